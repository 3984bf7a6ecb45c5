"""Attention maps of one sentence, for encoders and encoder-decoders alike (the decoder fed by teacher forcing), and
the inputs of bertviz."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import ScratchformerError
from .encoding import Encoded, TextEncoder
from .words import TokenGroup, shifted_groups, token_groups


@dataclass
class AttentionStack:
    """One kind of attention of a model, ready to draw: ``weights`` is ``(layers, heads, queries, keys)``."""

    key: str  # "encoder" | "decoder" | "cross": a stable name for code and HTML
    title: str  # "encoder self-attention", ...
    weights: torch.Tensor
    query_tokens: list[str]
    key_tokens: list[str]
    query_groups: list[TokenGroup]  # the words along the query axis (rows)
    key_groups: list[TokenGroup]  # the words along the key axis (columns)
    note: str = ""  # e.g. that the decoder was fed the sentence by teacher forcing

    @property
    def num_layers(self) -> int:
        return self.weights.shape[0]

    @property
    def num_heads(self) -> int:
        return self.weights.shape[1]


@dataclass
class AttentionMaps:
    """Attention probabilities for one sentence, each ``(layers, heads, queries, keys)``; ``groups`` are the words
    (axis labels), and for an encoder-decoder ``cross`` maps decoder queries onto encoder keys."""

    tokens: list[str]
    encoder: torch.Tensor
    decoder_tokens: list[str] | None = None
    decoder: torch.Tensor | None = None
    cross: torch.Tensor | None = None
    text: str = ""
    groups: list[TokenGroup] = field(default_factory=list)
    decoder_groups: list[TokenGroup] | None = None
    target: str | None = None  # the decoder's text when it was not the sentence itself

    def stacks(self) -> list[AttentionStack]:
        """Encoder self-attention and, for an encoder-decoder, decoder self-attention and cross-attention."""
        groups, decoder_groups = self.groups, self.decoder_groups
        stacks = [AttentionStack("encoder", "encoder self-attention", self.encoder, self.tokens, self.tokens,
                                 groups, groups)]
        if self.decoder is None:
            return stacks
        note = ("the decoder was fed the same sentence shifted one token right (teacher forcing): <s> + the sentence "
                "without its last token" if self.target is None
                else f"the decoder was fed the target {self.target!r} shifted one token right (teacher forcing)")
        stacks.append(AttentionStack("decoder", "decoder self-attention (causal)", self.decoder, self.decoder_tokens,
                                     self.decoder_tokens, decoder_groups, decoder_groups, note))
        stacks.append(AttentionStack("cross", "cross-attention (decoder queries, encoder keys)", self.cross,
                                     self.decoder_tokens, self.tokens, decoder_groups, groups, note))
        return stacks


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


def attention_maps(text_encoder: TextEncoder, sentence: str, target: str | None = None) -> AttentionMaps:
    """Attention probabilities for one sentence, heads kept apart; ``target`` feeds an encoder-decoder's decoder."""
    encoded = text_encoder.tokenize([sentence])[0]
    tokens = text_encoder.tokens(encoded.input_ids)
    if text_encoder.encoder is text_encoder.model:
        if target is not None:
            raise ScratchformerError(f"target={target!r} needs an encoder-decoder; {type(text_encoder.model).__name__} "
                                     "has no decoder")
        with eager_attention(text_encoder.model):
            output = text_encoder.forward([encoded], output_attentions=True)
        return AttentionMaps(tokens=tokens, encoder=stack_attention(output.attentions, text_encoder.model,
                                                                    "attentions"),
                             text=sentence, groups=token_groups(encoded, tokens))
    return _encoder_decoder_maps(text_encoder, encoded, tokens, target)


def _decoder_input(text_encoder: TextEncoder, encoded: Encoded, target: str | None) -> tuple[list[int], Any]:
    """Teacher forcing: ``<s>`` + the decoder's text without its last token (``</s>``), and that text's encoding."""
    config = text_encoder.model.config  # the first input: decoder_start_token_id, else bos, else pad, else 0
    start = next((x for x in (config.decoder_start_token_id, config.bos_token_id, config.pad_token_id)
                  if x is not None), 0)
    decoded = encoded if target is None else text_encoder.tokenize([target])[0]
    return [start] + decoded.input_ids[:-1], decoded


def _encoder_decoder_maps(text_encoder: TextEncoder, encoded: Encoded, tokens: list[str],
                          target: str | None) -> AttentionMaps:
    model, device = text_encoder.model, text_encoder.device
    decoder_ids, decoder_text = _decoder_input(text_encoder, encoded, target)
    with eager_attention(model), torch.no_grad():
        output = model(
            input_ids=torch.tensor([encoded.input_ids], device=device),
            attention_mask=torch.ones(1, len(encoded.input_ids), dtype=torch.long, device=device),
            decoder_input_ids=torch.tensor([decoder_ids], device=device),
            output_attentions=True,
            return_dict=True,
        )
    decoder_tokens = text_encoder.tokens(decoder_ids)
    groups = token_groups(encoded, tokens)
    decoder_source_groups = token_groups(decoder_text, text_encoder.tokens(decoder_text.input_ids))
    return AttentionMaps(
        tokens=tokens,
        encoder=stack_attention(output.encoder_attentions, model, "encoder_attentions"),
        decoder_tokens=decoder_tokens,
        decoder=stack_attention(output.decoder_attentions, model, "decoder_attentions"),
        cross=stack_attention(output.cross_attentions, model, "cross_attentions"),
        text=encoded.text,
        groups=groups,
        decoder_groups=shifted_groups(decoder_source_groups, decoder_tokens[0], len(decoder_ids)),
        target=target,
    )


def _as_layer_list(weights: torch.Tensor, layers: int, heads: int) -> list[torch.Tensor]:
    """``(L, H, q, k)`` -> bertviz's list of ``(1, heads, q, k)``, zero-padded up to ``layers`` and ``heads``."""
    padded = weights.new_zeros(layers, heads, *weights.shape[2:])
    padded[: weights.shape[0], : weights.shape[1]] = weights
    return [padded[i][None] for i in range(layers)]


def bertviz_inputs(model: torch.nn.Module, tokenizer: Any, source: str, target: str | None = None,
                   ) -> dict[str, Any]:
    """The keyword arguments of bertviz's ``head_view`` and ``model_view`` for one sentence (the decoder fed
    ``target``, else the source, by teacher forcing). The shorter stacks are padded with all-zero layers and heads,
    since bertviz 1.4 raises ``IndexError`` on a decoder shallower than its encoder (docs/learning.md)."""
    from .encoding import TextEncoder

    maps = attention_maps(TextEncoder(model, tokenizer), source, target)
    if maps.decoder is None:
        return {"attention": [layer[None] for layer in maps.encoder], "tokens": maps.tokens}
    stacks = (maps.encoder, maps.decoder, maps.cross)
    layers = max(s.shape[0] for s in stacks)
    heads = max(s.shape[1] for s in stacks)
    return {**{f"{kind}_attention": _as_layer_list(weights, layers, heads)
                for kind, weights in zip(("encoder", "decoder", "cross"), stacks)},
            "encoder_tokens": maps.tokens, "decoder_tokens": maps.decoder_tokens}
