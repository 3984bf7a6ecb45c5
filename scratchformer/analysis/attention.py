"""Attention maps of one sentence, for encoders and encoder-decoders alike.

The default attention kernel of most models (sdpa, flash) returns no attention weights, so the model is switched to
the eager kernel for the call and switched back afterwards (:func:`eager_attention`). For an encoder-decoder the
decoder is fed the sentence itself shifted right (teacher forcing, as in training a denoising autoencoder), so its
self-attention and cross-attention can be shown too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ScratchformerError
from .encoding import Encoded, TextEncoder


@dataclass
class AttentionMaps:
    """Attention probabilities for one sentence, each ``(layers, heads, queries, keys)``.

    For an encoder-decoder the decoder reads ``decoder_tokens`` (teacher forcing) and ``cross`` maps decoder
    queries onto encoder keys.
    """

    tokens: list[str]
    encoder: torch.Tensor
    decoder_tokens: list[str] | None = None
    decoder: torch.Tensor | None = None
    cross: torch.Tensor | None = None


@contextmanager
def eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """Run the block with eager attention (the kernel that returns weights), then restore the previous kernel."""
    previous = getattr(model.config, "_attn_implementation", None)
    switch = previous not in (None, "eager") and hasattr(model, "set_attn_implementation")
    if switch:
        try:
            model.set_attn_implementation("eager")
        except (ValueError, NotImplementedError):
            switch = False
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(previous)


def stack_attention(attentions: Any, model: torch.nn.Module, field_name: str) -> torch.Tensor:
    """HF tuple of ``(1, heads, q, k)`` per layer -> ``(layers, heads, q, k)`` float32 on the CPU."""
    if not attentions or any(a is None for a in attentions):
        raise ScratchformerError(f"{type(model).__name__} returned no attention weights ({field_name}); attention "
                                 "maps need a model that supports output_attentions=True")
    return torch.stack([a[0] for a in attentions]).float().cpu()


def decoder_start_id(config: Any) -> int:
    """The first decoder input: ``decoder_start_token_id``, else ``bos``, else ``pad``, else 0."""
    candidates = (config.decoder_start_token_id, config.bos_token_id, config.pad_token_id)
    return next((x for x in candidates if x is not None), 0)


def attention_maps(text_encoder: TextEncoder, sentence: str) -> AttentionMaps:
    """Attention probabilities for one sentence (heads kept apart); see the module docstring."""
    encoded = text_encoder.tokenize([sentence])[0]
    if text_encoder.encoder is text_encoder.model:
        return _encoder_maps(text_encoder, encoded)
    return _encoder_decoder_maps(text_encoder, encoded)


def _encoder_maps(text_encoder: TextEncoder, encoded: Encoded) -> AttentionMaps:
    with eager_attention(text_encoder.model):
        output = text_encoder.forward([encoded], output_attentions=True)
    return AttentionMaps(tokens=text_encoder.tokens(encoded.input_ids),
                         encoder=stack_attention(output.attentions, text_encoder.model, "attentions"))


def _encoder_decoder_maps(text_encoder: TextEncoder, encoded: Encoded) -> AttentionMaps:
    model, device = text_encoder.model, text_encoder.device
    decoder_ids = [decoder_start_id(model.config)] + encoded.input_ids[:-1]  # the sentence shifted right
    with eager_attention(model), torch.no_grad():
        output = model(
            input_ids=torch.tensor([encoded.input_ids], device=device),
            attention_mask=torch.ones(1, len(encoded.input_ids), dtype=torch.long, device=device),
            decoder_input_ids=torch.tensor([decoder_ids], device=device),
            output_attentions=True,
            return_dict=True,
        )
    return AttentionMaps(
        tokens=text_encoder.tokens(encoded.input_ids),
        encoder=stack_attention(output.encoder_attentions, model, "encoder_attentions"),
        decoder_tokens=text_encoder.tokens(decoder_ids),
        decoder=stack_attention(output.decoder_attentions, model, "decoder_attentions"),
        cross=stack_attention(output.cross_attentions, model, "cross_attentions"),
    )
