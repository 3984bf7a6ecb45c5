"""Hub-ready export and upload: a folder that loads for someone who has only torch and transformers.

- :mod:`scratchformer.hub.export` - ``export`` (safetensors, code files, tokenizer, model card), ``check_folder``,
  ``push`` (one commit to a Hub repo).
"""
