"""scratchformer: the "Attention is All You Need" encoder-decoder, from scratch, as a Hugging Face model.

Importing the package registers the classes with the ``Auto*`` factories of ``transformers`` and marks them for
remote-code export, so that ``save_pretrained`` writes an ``auto_map`` and copies the code files next to the weights.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer

from .checkpoints import load_pretrained, pretrained_path
from .configuration_scratchformer import ScratchformerConfig
from .modeling_scratchformer import (
    ScratchformerEncoderModel,
    ScratchformerForConditionalGeneration,
    ScratchformerModel,
    ScratchformerPreTrainedModel,
)
from .tokenization_scratchformer import ScratchformerTokenizer

__version__ = "0.1.0"

AutoConfig.register(ScratchformerConfig.model_type, ScratchformerConfig, exist_ok=True)
AutoModel.register(ScratchformerConfig, ScratchformerEncoderModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(ScratchformerConfig, ScratchformerForConditionalGeneration, exist_ok=True)
AutoTokenizer.register(ScratchformerConfig, tokenizer_class=ScratchformerTokenizer, exist_ok=True)

ScratchformerConfig.register_for_auto_class()
ScratchformerEncoderModel.register_for_auto_class("AutoModel")
ScratchformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
ScratchformerTokenizer.register_for_auto_class("AutoTokenizer")

__all__ = [
    "ScratchformerConfig",
    "ScratchformerEncoderModel",
    "ScratchformerForConditionalGeneration",
    "ScratchformerModel",
    "ScratchformerPreTrainedModel",
    "ScratchformerTokenizer",
    "__version__",
    "load_pretrained",
    "pretrained_path",
]
