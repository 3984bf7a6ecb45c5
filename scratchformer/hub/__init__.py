"""Hub-ready export and upload: a folder that loads for someone who has only torch and transformers (one module
per job: docs/hub.md, "The code")."""

from ..errors import HubError
from .card import load_scores, model_card
from .checks import check_folder
from .export import export
from .push import push

__all__ = ["HubError", "check_folder", "export", "load_scores", "model_card", "push"]
