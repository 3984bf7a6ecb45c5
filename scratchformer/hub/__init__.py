"""Hub-ready export and upload: a folder that loads for someone who has only torch and transformers.

scratchformer.hub.export writes it from what scratchformer.hub.sources reads, where scratchformer.hub.destination
allows, as scratchformer.hub.layout describes, with scratchformer.hub.card's card and scratchformer.hub.onnx's ONNX
encoder; scratchformer.hub.checks says whether a folder would load for a Hub user; scratchformer.hub.push uploads an
export in one commit (docs/hub.md, "The code").
"""

from ..errors import HubError
from .card import load_scores, model_card
from .checks import check_folder
from .export import export
from .push import push

__all__ = ["HubError", "check_folder", "export", "load_scores", "model_card", "push"]
