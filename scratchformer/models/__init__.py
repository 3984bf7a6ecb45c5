"""The model core: the configuration, the models and the tokenizer, laid out as a native transformers model.

``paper_scratchformer.py`` (the paper in PyTorch alone: read it first), ``modeling_scratchformer.py``,
``configuration_scratchformer.py`` and ``card_scratchformer.py`` are the remote code (:data:`CODE_FILES`):
``save_pretrained`` copies them next to the weights, so they import only torch, transformers and each other;
``tokenization_scratchformer.py`` does not travel (a saved tokenizer loads without it). Importing this ``__init__``
registers the classes with transformers' ``Auto*`` factories and for remote-code export.
"""

import transformers
from transformers import AutoConfig, AutoTokenizer

from . import modeling_scratchformer
from .configuration_scratchformer import CHECKPOINT_FORMAT, ScratchformerConfig
from .modeling_scratchformer import (
    AUTO_MAP,
    ScratchformerEncoderModel,
    ScratchformerForConditionalGeneration,
    ScratchformerForMaskedLM,
    ScratchformerForSequenceClassification,
    ScratchformerForTokenClassification,
    ScratchformerModel,
    ScratchformerPreTrainedModel,
)
from .tokenization_scratchformer import ScratchformerTokenizer

# auto class -> our class, read off AUTO_MAP (the auto_map Hub users load through): one list of the model classes
MODEL_CLASSES = {getattr(transformers, auto): getattr(modeling_scratchformer, target.split(".")[1])
                 for auto, target in AUTO_MAP.items() if auto != AutoConfig.__name__}
# The files that travel with a checkpoint (the remote code): save_pretrained copies them flat next to the weights
CODE_FILES = ("configuration_scratchformer.py", "modeling_scratchformer.py", "paper_scratchformer.py",
              "card_scratchformer.py")
# The dtypes a checkpoint's weights may be stored in (train --save-dtype, export --dtype)
SAVE_DTYPES = ("float32", "float16", "bfloat16")

AutoConfig.register(ScratchformerConfig.model_type, ScratchformerConfig, exist_ok=True)
AutoTokenizer.register(ScratchformerConfig, tokenizer_class=ScratchformerTokenizer, exist_ok=True)
ScratchformerConfig.register_for_auto_class()
for _auto, _model in MODEL_CLASSES.items():
    _auto.register(ScratchformerConfig, _model, exist_ok=True)
    _model.register_for_auto_class(_auto.__name__)

__all__ = [
    "CHECKPOINT_FORMAT",
    "CODE_FILES",
    "MODEL_CLASSES",
    "SAVE_DTYPES",
    "ScratchformerConfig",
    "ScratchformerEncoderModel",
    "ScratchformerForConditionalGeneration",
    "ScratchformerForMaskedLM",
    "ScratchformerForSequenceClassification",
    "ScratchformerForTokenClassification",
    "ScratchformerModel",
    "ScratchformerPreTrainedModel",
    "ScratchformerTokenizer",
]
