"""The model core: the configuration, the models and the tokenizer, laid out as a native transformers model.

``paper_scratchformer.py`` is the Transformer of the paper in PyTorch alone (read it first);
``modeling_scratchformer.py`` makes it a transformers model by subclassing its classes. With
``configuration_scratchformer.py`` and ``card_scratchformer.py`` (the card ``push_to_hub`` writes) they are the
**remote code**: ``save_pretrained`` copies them flat next to the weights, and Hub users run them with
``trust_remote_code=True``. They import only torch, transformers, the standard library and each other (single-dot
relative imports); the paper file imports torch and the standard library only.
``tokenization_scratchformer.py`` follows the same import rule but does not travel: a saved tokenizer folder loads as
transformers' built-in ``TokenizersBackend`` (same ``tokenizer.json``, same ids) for anyone without this package.

This ``__init__`` is not copied either. Importing it registers the classes with the ``Auto*`` factories of
transformers (in-process use: ``AutoTokenizer`` then gives ``ScratchformerTokenizer``, with its input checks) and marks
the model classes for remote-code export, so that ``save_pretrained`` writes an ``auto_map`` and the code files.
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
