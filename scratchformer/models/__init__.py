"""The model core: exactly the files that travel with a checkpoint (remote code for Hub users).

``configuration_scratchformer.py``, ``modeling_scratchformer.py`` and ``tokenization_scratchformer.py`` import only
torch, transformers, the standard library and each other (single-dot relative imports), because
``save_pretrained`` copies them flat next to the weights. This ``__init__`` is not copied: importing it registers the
classes with the ``Auto*`` factories of transformers (in-process use) and marks them for remote-code export, so that
``save_pretrained`` writes an ``auto_map`` and the code files.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

from .configuration_scratchformer import CHECKPOINT_FORMAT, ScratchformerConfig
from .modeling_scratchformer import (
    ScratchformerEncoderModel,
    ScratchformerForConditionalGeneration,
    ScratchformerModel,
    ScratchformerPreTrainedModel,
)
from .tokenization_scratchformer import ScratchformerTokenizer

AutoConfig.register(ScratchformerConfig.model_type, ScratchformerConfig, exist_ok=True)
AutoModel.register(ScratchformerConfig, ScratchformerEncoderModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(ScratchformerConfig, ScratchformerForConditionalGeneration, exist_ok=True)
AutoTokenizer.register(ScratchformerConfig, tokenizer_class=ScratchformerTokenizer, exist_ok=True)

ScratchformerConfig.register_for_auto_class()
ScratchformerEncoderModel.register_for_auto_class("AutoModel")
ScratchformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
ScratchformerTokenizer.register_for_auto_class("AutoTokenizer")

__all__ = [
    "CHECKPOINT_FORMAT",
    "ScratchformerConfig",
    "ScratchformerEncoderModel",
    "ScratchformerForConditionalGeneration",
    "ScratchformerModel",
    "ScratchformerPreTrainedModel",
    "ScratchformerTokenizer",
]
