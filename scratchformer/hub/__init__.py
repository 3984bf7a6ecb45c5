"""Hub-ready export and upload: a folder that loads for someone who has only torch and transformers.

- :mod:`scratchformer.hub.export` stages, writes, checks and moves an export into place; what it reads is
  :mod:`scratchformer.hub.sources`, where it may go :mod:`scratchformer.hub.destination`, what it holds
  :mod:`scratchformer.hub.layout`, its card :mod:`scratchformer.hub.card`, its encoder as ONNX
  :mod:`scratchformer.hub.onnx`.
- :mod:`scratchformer.hub.checks`: would this folder load for a Hub user?
- :mod:`scratchformer.hub.push`: export to a temporary folder and upload it in one commit.

``scratchformer.hub.export`` and ``scratchformer.hub.push`` are then the functions below; their modules stay
importable by their full names.
"""

from ..errors import HubError
from .card import load_scores, model_card
from .checks import check_folder
from .export import export
from .push import push

__all__ = ["HubError", "check_folder", "export", "load_scores", "model_card", "push"]
