"""Hub-ready export and upload: a folder that loads for someone who has only torch and transformers.

:func:`export` (:mod:`~scratchformer.hub.export`: stage, write, check, move into place), :func:`push` (export to a
temporary folder and upload it in one commit), :func:`check_folder` (would this folder load for a Hub user?) and the
model card (:func:`model_card`, :func:`load_scores`). Note that ``scratchformer.hub.export`` and
``scratchformer.hub.push`` are the functions; their modules stay importable by their full names.
"""

from ..errors import HubError
from .card import load_scores, model_card
from .checks import check_folder
from .export import export
from .push import push

__all__ = ["HubError", "check_folder", "export", "load_scores", "model_card", "push"]
