"""Training on the Hugging Face ``Seq2SeqTrainer``: options, data, noise, loss, metrics and callbacks.

- :mod:`scratchformer.training.data` - loading, splitting and tokenizing data, and BART's text-infilling noise;
- :mod:`scratchformer.training.pipeline` - ``scratchformer train``: options, up-front checks, the run itself.

``python -m scratchformer.training ARGS`` is ``scratchformer train ARGS`` (for ``torchrun``).
"""

from .pipeline import TrainConfig, checkpoint_step, config_from_args, run_training

__all__ = ["TrainConfig", "checkpoint_step", "config_from_args", "run_training"]
