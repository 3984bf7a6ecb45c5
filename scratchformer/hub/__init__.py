"""Hub-ready export and upload: :func:`export`, :func:`push`, :func:`check_folder` and the model card.

``scratchformer.hub.export`` and ``scratchformer.hub.push`` are the functions; their modules stay importable by their
full names.
"""

from ..errors import HubError
from .card import load_scores, model_card
from .checks import check_folder
from .export import export
from .push import push

__all__ = ["HubError", "check_folder", "export", "load_scores", "model_card", "push"]
