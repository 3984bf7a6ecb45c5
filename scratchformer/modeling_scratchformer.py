"""PLACEHOLDER - the real model is being written right now; the class names below are final."""
from transformers import PreTrainedModel

from .configuration_scratchformer import ScratchformerConfig


class ScratchformerPreTrainedModel(PreTrainedModel):
    config_class = ScratchformerConfig


class ScratchformerModel(ScratchformerPreTrainedModel):
    pass


class ScratchformerForConditionalGeneration(ScratchformerPreTrainedModel):
    pass


class ScratchformerEncoderModel(ScratchformerPreTrainedModel):
    pass
