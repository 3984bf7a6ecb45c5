"""Hub-ready export and upload: a folder that loads for someone who has only torch and transformers.

- :mod:`~scratchformer.hub.export` - :func:`export`: stage, write (weights, code, tokenizer, our ``auto_map`` only,
  card), check, move into place.
- :mod:`~scratchformer.hub.sources` - what an export reads: the model and tokenizer, through
  :func:`scratchformer.loading.load`.
- :mod:`~scratchformer.hub.destination` - where an export may go: the output-folder and ``--overwrite`` rules and
  the repo-id rule, checked before any file is touched.
- :mod:`~scratchformer.hub.layout` - what an exported folder holds: file names and the remote-code entries.
- :mod:`~scratchformer.hub.card` - the model card (:func:`model_card`) and measured scores (:func:`load_scores`).
- :mod:`~scratchformer.hub.checks` - :func:`check_folder`: would this folder load for a Hub user?
- :mod:`~scratchformer.hub.onnx` - the encoder as ONNX (``export --onnx``).
- :mod:`~scratchformer.hub.push` - :func:`push`: export to a temporary folder and upload it in one commit.

The names below are the public API; import them from here (``from scratchformer.hub import export``). Note that
``scratchformer.hub.export`` and ``scratchformer.hub.push`` are then the functions; their modules stay importable
by their full names (``from scratchformer.hub.export import ...``).
"""

from ..errors import HubError
from .card import load_scores, model_card
from .checks import check_folder
from .export import export
from .push import push

__all__ = ["HubError", "check_folder", "export", "load_scores", "model_card", "push"]
