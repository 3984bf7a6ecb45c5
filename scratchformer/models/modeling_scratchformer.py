"""The Transformer of Vaswani et al. (2017), "Attention Is All You Need", written from scratch as a Hugging Face model.

Reading order (top to bottom), one paper concept per class:

    sinusoidal_position_encoding            section 3.5, PE(pos, 2i) = sin(pos / 10000^(2i/d_model))
    ScratchformerSinusoidalPositionalEncoding
    ScratchformerRotaryEmbedding            RoFormer (Su et al. 2021), an optional alternative
    ScratchformerEmbeddings                 section 3.4: token embedding * sqrt(d_model) + positions, dropout
    ScratchformerAttention                  section 3.2: scaled dot-product, multi-head attention
    ScratchformerFeedForward                section 3.3: FFN(x) = max(0, x W1 + b1) W2 + b2
    ScratchformerResidual                   section 3.1 / 5.4: LayerNorm(x + Dropout(Sublayer(x)))
    ScratchformerEncoderLayer / ScratchformerDecoderLayer
    ScratchformerStack                      what the encoder and decoder share
    ScratchformerEncoder / ScratchformerDecoder
    ScratchformerModel                      the bare encoder-decoder
    ScratchformerForConditionalGeneration   + the pre-softmax linear projection (LM head), loss and generate()
    ScratchformerEncoderModel               the encoder alone, for contextual embeddings (AutoModel)
    ScratchformerForSequenceClassification  + mean over the real tokens and a classifier (text-classification)
    ScratchformerForTokenClassification     + a classifier on every token (token-classification)
    model_card_text, push_with_model_card   the model card that model.push_to_hub writes for a new repo

Tensor shapes in comments: B = batch, T = target (query) length, S = source (key) length, D = d_model,
H = heads, Dh = D / H (head size), V = vocabulary.

This file is copied next to the weights by ``save_pretrained`` so that ``from_pretrained(..., trust_remote_code=True)``
works where the ``scratchformer`` package is not installed; it imports only torch, transformers and its sibling
``configuration_scratchformer`` (single-dot relative import).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import transformers

# Hub users run this file with the transformers they have: say what it needs before an import below fails with a
# bare "cannot import name ..." (transformers 4.x). 5.4 is scratchformer's floor (pyproject.toml); this check uses
# only the standard library and transformers.__version__.
if tuple(int(part) for part in re.findall(r"\d+", transformers.__version__)[:2]) < (5, 4):
    raise ImportError(f"Scratchformer's model code (modeling_scratchformer.py) needs transformers >= 5.4, but "
                      f"transformers {transformers.__version__} is installed: pip install -U \"transformers>=5.4\"")

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    MaskedLMOutput,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import logging
from transformers.utils.deprecation import deprecate_kwarg

from .configuration_scratchformer import ScratchformerConfig

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

logger = logging.get_logger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# Positions
# --------------------------------------------------------------------------------------------------------------------


def sinusoidal_position_encoding(num_positions: int, d_model: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The paper's fixed positional encoding table, shape ``(num_positions, d_model)`` (section 3.5).

    ``PE[pos, 2i] = sin(pos / 10000^(2i / d_model))`` and ``PE[pos, 2i + 1] = cos(pos / 10000^(2i / d_model))``:
    sines on even dimensions, cosines on odd ones, *interleaved*. (Several tutorials use ``i / d_model`` in the
    exponent, or put all sines in the first half; both differ from the formula.) Computed in float64 and then cast.
    """
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # the "2i" of the formula, (ceil(D/2),)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (P, ceil(D/2))
    table = torch.zeros(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.to(dtype)


class ScratchformerSinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal position vectors added to the token embeddings (section 3.5). Has no parameters.

    Any length works (no maximum): the table is computed on first use and again, at least twice as long, when a
    longer input comes. It is kept in a plain attribute, not a buffer (buffers would come back as garbage from
    meta-device loading in ``from_pretrained``, and there is nothing to save). Recomputing it at every forward cost
    about 0.1 ms per generated token.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self._table: torch.Tensor | None = None  # (P, D), P > every position seen so far

    def forward(self, position_ids: torch.Tensor, num_positions: int) -> torch.Tensor:
        # position_ids: (B, T) with values < num_positions  ->  (B, T, D)
        table = self._table
        if table is None or table.shape[0] < num_positions or table.device != position_ids.device:
            length = max(num_positions, 64 if table is None else 2 * table.shape[0])
            table = self._table = sinusoidal_position_encoding(length, self.d_model).to(position_ids.device)
        return table[position_ids]


class ScratchformerRotaryEmbedding(nn.Module):
    """Rotary position embedding (RoPE, Su et al. 2021): rotates query/key pairs by a position-dependent angle.

    Used instead of additive positions when ``position_embedding_type="rope"``; applied to self-attention only
    (cross-attention compares decoder and encoder positions, which live on different axes). Dimension ``j`` is paired
    with ``j + Dh/2`` ("rotate half", as in GPT-NeoX/Llama), with angle ``pos * theta^(-2j/Dh)``.
    """

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # position_ids: (B, T)  ->  cos, sin: (B, 1, T, Dh), broadcast over heads
        two_j = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=position_ids.device)
        inv_freq = self.theta ** (-two_j / self.head_dim)  # (Dh/2,)
        angle = position_ids[..., None].float() * inv_freq  # (B, T, Dh/2)
        angle = torch.cat((angle, angle), dim=-1)[:, None]  # (B, 1, T, Dh)
        return angle.cos(), angle.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` of shape ``(B, H, T, Dh)`` by the angles whose cosines/sines are given, ``(B, 1, T, Dh)``."""
    return (x * cos + _rotate_half(x) * sin).to(x.dtype)


def apply_dropout(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """``dropout(x)``, without calling the module where dropout is the identity (inference, or ``p = 0``).

    The result is the same; what is saved is the call itself. A small model on a GPU is bound by such per-call costs,
    not by arithmetic: a decoding step of 4 + 4 layers makes 17 of these calls, and skipping them made greedy
    generation of a tiny model 6% faster per token (the overhead group of benchmarks/RESULTS.md). A dropout module
    switched back to training mode on its own (Monte Carlo dropout) still applies.
    """
    return dropout(x) if dropout.training and dropout.p > 0 else x


class ScratchformerEmbeddings(nn.Module):
    """The input of a stack: ``Dropout(Embedding(x) * sqrt(d_model) + PE)`` (sections 3.4, 3.5 and 5.4).

    ``word_embeddings`` is the learned token table (the same attribute path as in BERT/DistilBERT);
    ``position_embeddings`` is the learned position table when ``position_embedding_type="learned"``.
    With ``"rope"`` nothing is added here: positions enter inside attention.
    """

    def __init__(self, config: ScratchformerConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.position_embedding_type = config.position_embedding_type
        self.max_position_embeddings = config.max_position_embeddings
        if config.position_embedding_type == "learned":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.d_model)
        elif config.position_embedding_type == "sinusoidal":
            self.position_embeddings = ScratchformerSinusoidalPositionalEncoding(config.d_model)
        else:
            self.position_embeddings = None
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, input_ids: torch.Tensor | None, position_ids: torch.Tensor, inputs_embeds: torch.Tensor | None = None,
        num_positions: int | None = None,
    ) -> torch.Tensor:
        # input_ids, position_ids: (B, T); inputs_embeds: raw table rows (B, T, D)  ->  (B, T, D)
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        hidden_states = inputs_embeds * self.embed_scale
        if self.position_embedding_type == "learned":
            hidden_states = hidden_states + self.position_embeddings(position_ids)
        elif self.position_embedding_type == "sinusoidal":
            hidden_states = hidden_states + self.position_embeddings(position_ids, num_positions).to(hidden_states.dtype)
        return apply_dropout(self.dropout, hidden_states)


# --------------------------------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------------------------------


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention written out (section 3.2.1): ``softmax(Q K^T / sqrt(d_k) + mask) V``.

    query: (B, H, T, Dh); key, value: (B, H, S, Dh); attention_mask: additive, broadcastable to (B, H, T, S).
    Returns the output (B, T, H, Dh) and the attention probabilities (B, H, T, S).
    """
    scores = torch.matmul(query, key.transpose(-1, -2)) * scaling  # (B, H, T, S)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value)  # (B, H, T, Dh)
    return output.transpose(1, 2).contiguous(), weights  # (B, T, H, Dh)


class ScratchformerAttention(nn.Module):
    """Multi-head attention (section 3.2.2): ``Concat(head_1, ..., head_h) W^O``, ``head_i = Attention(Q W_i^Q,
    K W_i^K, V W_i^V)``.

    The same class serves the three uses of the paper (section 3.2.3): encoder self-attention, masked (causal) decoder
    self-attention, and encoder-decoder ("cross") attention whose queries come from the decoder and whose keys and
    values come from the encoder output. The kernel is chosen through the transformers attention interface
    (``config._attn_implementation``: ``"sdpa"`` by default, ``"eager"`` = :func:`eager_attention_forward`).
    """

    def __init__(self, config: ScratchformerConfig, num_heads: int, *, is_causal: bool, is_cross_attention: bool,
                 layer_idx: int | None = None):
        super().__init__()
        self.config = config
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads
        self.scaling = self.head_dim**-0.5  # 1 / sqrt(d_k)
        self.dropout = config.attention_dropout
        # Read by the sdpa integration when no mask is given: encoder and cross-attention must never be causal.
        self.is_causal = is_causal
        self.is_cross_attention = is_cross_attention
        self.layer_idx = layer_idx
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.d_model, config.d_model, bias=bias)
        self.k_proj = nn.Linear(config.d_model, config.d_model, bias=bias)
        self.v_proj = nn.Linear(config.d_model, config.d_model, bias=bias)
        self.out_proj = nn.Linear(config.d_model, config.d_model, bias=bias)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        # (B, L, D) -> (B, L, H, Dh) -> (B, H, L, Dh)
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | BlockMask | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        past_key_values: Cache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states: (B, T, D) queries; key_value_states: (B, S, D) encoder output for cross-attention."""
        query = self._split_heads(self.q_proj(hidden_states))  # (B, H, T, Dh)

        cache = None
        if past_key_values is not None:
            cache = past_key_values.cross_attention_cache if self.is_cross_attention else (
                past_key_values.self_attention_cache)

        if self.is_cross_attention and cache is not None and past_key_values.is_updated.get(self.layer_idx):
            # The encoder output does not change while decoding: its keys/values were projected once, at step 1.
            key = cache.layers[self.layer_idx].keys  # (B, H, S, Dh)
            value = cache.layers[self.layer_idx].values
        else:
            source = key_value_states if self.is_cross_attention else hidden_states
            key = self._split_heads(self.k_proj(source))  # (B, H, S, Dh)
            value = self._split_heads(self.v_proj(source))
            if rotary is not None:
                query, key = apply_rotary(query, *rotary), apply_rotary(key, *rotary)
            if cache is not None:
                # Self-attention: append this step's keys/values and get all of them back.
                key, value = cache.update(key, value, self.layer_idx)
                if self.is_cross_attention:
                    past_key_values.is_updated[self.layer_idx] = True

        # The attention weights only exist in the eager kernel: fall back to it for calls that ask for them.
        implementation = "eager" if output_attentions else self.config._attn_implementation
        if implementation == "flex_attention" and isinstance(attention_mask, torch.Tensor):
            # an additive mask given to this layer directly (the stacks give flex a BlockMask)
            attention_mask = _flex_block_mask(attention_mask != 0, query.shape[0], query.shape[2])
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention_forward)
        output, weights = attention_interface(
            self, query, key, value, attention_mask,
            dropout=self.dropout if self.training else 0.0, scaling=self.scaling,
        )
        output = output.reshape(*hidden_states.shape[:-1], -1)  # (B, T, H, Dh) -> (B, T, D)
        return self.out_proj(output), weights


# --------------------------------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------------------------------


class ScratchformerFeedForward(nn.Module):
    """Position-wise feed-forward network (section 3.3): ``FFN(x) = max(0, x W1 + b1) W2 + b2``."""

    def __init__(self, config: ScratchformerConfig, ffn_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, ffn_dim)
        self.activation = nn.ReLU() if config.activation_function == "relu" else nn.GELU()
        self.activation_dropout = nn.Dropout(config.activation_dropout)
        self.fc2 = nn.Linear(ffn_dim, config.d_model)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(hidden_states)  # (B, T, d_ff)
        if isinstance(self.activation, nn.ReLU) and not hidden.requires_grad:
            # Inference: ReLU in place, as x W1 + b1 is not needed again (no second (B, T, d_ff) tensor). Not under
            # autograd: the output of a linear layer on (B, T, D) is a view, and an in-place op on a view makes the
            # backward pass copy the whole activation (CopySlices), three extra kernels per layer.
            hidden = hidden.relu_()
        else:
            hidden = self.activation(hidden)
        return self.fc2(apply_dropout(self.activation_dropout, hidden))


class ScratchformerResidual(nn.Module):
    """The residual connection and LayerNorm around every sub-layer (sections 3.1 and 5.4).

    Post-LN (the paper): ``LayerNorm(x + Dropout(Sublayer(x)))``. Pre-LN: ``x + Dropout(Sublayer(LayerNorm(x)))``.
    A layer calls ``sublayer_input(x)`` to get what the sub-layer reads, then ``residual(x, sublayer_output)``.
    """

    def __init__(self, config: ScratchformerConfig):
        super().__init__()
        self.pre_layer_norm = config.pre_layer_norm
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def sublayer_input(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(x) if self.pre_layer_norm else x

    def forward(self, x: torch.Tensor, sublayer_output: torch.Tensor) -> torch.Tensor:
        x = x + apply_dropout(self.dropout, sublayer_output)
        return x if self.pre_layer_norm else self.layer_norm(x)


class ScratchformerEncoderLayer(GradientCheckpointingLayer):
    """Encoder layer (section 3.1): self-attention, then the feed-forward network, each in a residual block."""

    def __init__(self, config: ScratchformerConfig, layer_idx: int):
        super().__init__()
        self.self_attn = ScratchformerAttention(
            config, config.encoder_attention_heads, is_causal=False, is_cross_attention=False, layer_idx=layer_idx)
        self.self_attn_residual = ScratchformerResidual(config)
        self.feed_forward = ScratchformerFeedForward(config, config.encoder_ffn_dim)
        self.feed_forward_residual = ScratchformerResidual(config)

    def forward(
        self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | BlockMask | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None, output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attended, weights = self.self_attn(
            self.self_attn_residual.sublayer_input(hidden_states), attention_mask=attention_mask, rotary=rotary,
            output_attentions=output_attentions)
        hidden_states = self.self_attn_residual(hidden_states, attended)
        del attended  # added to the residual stream: free it before the FFN allocates (lower peak memory)
        fed = self.feed_forward(self.feed_forward_residual.sublayer_input(hidden_states))
        hidden_states = self.feed_forward_residual(hidden_states, fed)
        return hidden_states, weights


class ScratchformerDecoderLayer(GradientCheckpointingLayer):
    """Decoder layer (section 3.1): masked self-attention, encoder-decoder attention, feed-forward network."""

    def __init__(self, config: ScratchformerConfig, layer_idx: int):
        super().__init__()
        heads = config.decoder_attention_heads
        self.self_attn = ScratchformerAttention(
            config, heads, is_causal=True, is_cross_attention=False, layer_idx=layer_idx)
        self.self_attn_residual = ScratchformerResidual(config)
        self.cross_attn = ScratchformerAttention(
            config, heads, is_causal=False, is_cross_attention=True, layer_idx=layer_idx)
        self.cross_attn_residual = ScratchformerResidual(config)
        self.feed_forward = ScratchformerFeedForward(config, config.decoder_ffn_dim)
        self.feed_forward_residual = ScratchformerResidual(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | BlockMask | None = None,
        encoder_attention_mask: torch.Tensor | BlockMask | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        use_cache: bool = False,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        # `use_cache` is only read by the gradient-checkpointing wrapper, which turns caching off while training.
        attended, self_weights = self.self_attn(
            self.self_attn_residual.sublayer_input(hidden_states), attention_mask=attention_mask, rotary=rotary,
            past_key_values=past_key_values, output_attentions=output_attentions)
        hidden_states = self.self_attn_residual(hidden_states, attended)
        del attended  # each sub-layer output is freed once it is in the residual stream (lower peak memory)
        attended, cross_weights = self.cross_attn(
            self.cross_attn_residual.sublayer_input(hidden_states), key_value_states=encoder_hidden_states,
            attention_mask=encoder_attention_mask, past_key_values=past_key_values,
            output_attentions=output_attentions)
        hidden_states = self.cross_attn_residual(hidden_states, attended)
        del attended
        fed = self.feed_forward(self.feed_forward_residual.sublayer_input(hidden_states))
        hidden_states = self.feed_forward_residual(hidden_states, fed)
        return hidden_states, self_weights, cross_weights


# --------------------------------------------------------------------------------------------------------------------
# Input checks and masks
# --------------------------------------------------------------------------------------------------------------------


def _check_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Reject what would otherwise fail deep inside torch (or silently index garbage).

    The value check never stalls an accelerator: on the CPU (where tokenizers put their output) a bad id is a clear
    ``ValueError`` at once; on a GPU the check is a device-side assert (``torch._assert_async``), which stops the
    program at the next synchronisation without making the host wait for the device on every call and every
    generation step. Meta tensors have no values to check.
    """
    if not isinstance(ids, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}; "
                         f"call the tokenizer with return_tensors='pt'")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, sequence_length), got shape {tuple(ids.shape)}; "
                         f"for a single sequence use {name}[None]")
    if ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(ids.shape)}): pass at least one sequence of one token")
    if ids.dtype not in (torch.long, torch.int):
        raise ValueError(f"{name} must hold integer token ids of dtype torch.long (or torch.int), got {ids.dtype}; "
                         f"convert with {name}.long()")
    if torch.compiler.is_compiling() or ids.device.type == "meta":
        return
    _check_values(((ids >= 0) & (ids < vocab_size)).all(),
                  f"{name} has token ids outside 0..{vocab_size - 1} (the vocabulary has {vocab_size} tokens); was it "
                  "made by a different tokenizer?", lambda: f" Its ids span [{int(ids.min())}, {int(ids.max())}].")


def _check_values(ok: torch.Tensor, message: str, detail: Callable[[], str] = str) -> None:
    """Raise ``ValueError(message + detail())`` unless ``ok``; on an accelerator a device-side assert instead, so
    that the host never waits for the device (see :func:`_check_ids`)."""
    if ok.device.type != "cpu":
        torch._assert_async(ok, message)
    elif not ok:
        raise ValueError(message + detail())


def _check_embeds(name: str, embeds: torch.Tensor, d_model: int, dtype: torch.dtype) -> None:
    """Embeddings are ``(batch, length, d_model)`` floats of the model's dtype (or any float under autocast)."""
    if not isinstance(embeds, torch.Tensor) or embeds.dim() != 3 or embeds.shape[-1] != d_model:
        shape = tuple(embeds.shape) if isinstance(embeds, torch.Tensor) else type(embeds).__name__
        raise ValueError(f"{name} must have shape (batch, sequence_length, d_model={d_model}), got {shape}")
    if embeds.shape[0] == 0 or embeds.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(embeds.shape)})")
    if embeds.dtype != dtype and not (embeds.is_floating_point() and torch.is_autocast_enabled(embeds.device.type)):
        raise ValueError(f"{name} has dtype {embeds.dtype} but the model computes in {dtype}: convert them with "
                         f"{name}.to({dtype}) (or run under torch.autocast)")


def _check_mask(name: str, mask: torch.Tensor | None, batch: int, lengths: tuple[int, ...]) -> None:
    """A padding mask is ``(batch, length)`` of 1 (a real token) and 0 (padding), or booleans; 0.5, 2 or -1 mean
    nothing, so they are refused rather than read as ``mask.bool()``."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.shape[0] != batch or mask.shape[1] not in lengths:
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        expected = " or ".join(f"({batch}, {n})" for n in lengths)
        raise ValueError(f"{name} must have shape {expected} to match the input ids, got {shape}")
    if mask.dtype == torch.bool or torch.compiler.is_compiling() or mask.device.type == "meta":
        return
    _check_values(((mask == 0) | (mask == 1)).all(), f"{name} must hold only 1 (a real token) and 0 (padding), or "
                  "booleans", lambda: f"; it holds {sorted({float(v) for v in mask.unique()[:6].tolist()})}")


# transformers 5.24 renamed the key/value cache from ``past_key_values`` to ``cache``: in the output classes, in
# ``generate()`` and in what it passes to ``forward``. This file travels with checkpoints, so it runs on both sides.
CACHE_NAME = "cache" if "cache" in {field.name for field in dataclasses.fields(Seq2SeqLMOutput)} else "past_key_values"


def _output_with_cache(output_class: type, cache: Cache | None, **fields):
    """``output_class(**fields)`` with the key/value cache under the name this transformers version uses."""
    return output_class(**fields, **{CACHE_NAME: cache})


def _cache_of(output) -> Cache | None:
    """The key/value cache of a transformers output, whatever this version calls it."""
    return getattr(output, CACHE_NAME)


# What the Trainer (and some generate() versions) pass that this model has no use for: it reads positions from the cache.
_HARMLESS_KWARGS = frozenset({"num_items_in_batch", "cache_position"})


def _warn_ignored(model: nn.Module, kwargs: dict) -> None:
    """Say which keyword arguments ``forward`` took and did not use: an argument that a new transformers version
    renames (as 5.24 renamed the cache) must not be dropped in silence."""
    ignored = sorted(set(kwargs) - _HARMLESS_KWARGS)
    if ignored:
        logger.warning_once(f"{type(model).__name__}.forward ignores {', '.join(ignored)}: it has no such argument")


def _one_cache(cache: Cache | None, past_key_values: Cache | None) -> Cache | None:
    """The key/value cache given under either name: ``cache`` (what ``generate()`` passes from transformers 5.24 on)
    or ``past_key_values`` (before 5.24, and still accepted)."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("pass the key/value cache once, as cache= or as past_key_values= (the older name), not both")
    cache = cache if cache is not None else past_key_values
    if cache is not None and not isinstance(cache, EncoderDecoderCache):
        raise ValueError(f"the key/value cache must be a transformers EncoderDecoderCache (the decoder's self-attention "
                         f"and cross-attention caches), got {type(cache).__name__}; pass none with use_cache=True "
                         "to start one")
    return cache


def _forward_took(self: nn.Module, **kwargs) -> None:
    """Does nothing: transformers' ``deprecate_kwarg`` around it says what a ``forward`` was given (see below)."""


_forward_took.__name__ = "forward"  # the warning names "<model class>.forward"
_old_cache_name_notice = deprecate_kwarg("past_key_values", "6.0.0", additional_message="Use `cache` instead.")(
    _forward_took)


def _warn_old_cache_name(model: nn.Module, past_key_values: Cache | None) -> None:
    """From transformers 5.24 on, ``past_key_values=`` is the old name of ``cache=``: ``forward`` still takes it
    (:func:`_one_cache`), and warns as transformers' own models do, with their helper: a ``FutureWarning``
    "`past_key_values` is deprecated ... for `ScratchformerModel.forward`. Use `cache` instead." Before 5.24 it is the
    current name (``generate()`` passes it at every step), and nothing is said. (Not a decorator on ``forward``:
    that would hide its signature's code, which generate() reads.)"""
    if past_key_values is not None and CACHE_NAME == "cache":
        _old_cache_name_notice(model, past_key_values=past_key_values)


def _position_ids(padding_mask: torch.Tensor | None, batch: int, length: int, past_length: int,
                  device: torch.device) -> torch.Tensor:
    """Positions of the current tokens, ``(B, T)``. With a padding mask, padding does not count: a left-padded
    sentence gets the same positions as the sentence alone, so padding never changes the real tokens' outputs."""
    if padding_mask is None:
        return torch.arange(past_length, past_length + length, device=device).expand(batch, length)
    positions = (padding_mask.bool().long().cumsum(-1) - 1).clamp(min=0)  # (B, past + T) or (B, T); nonzero = real
    return positions[:, -length:]


def _blocked_keys(
    key_padding_mask: torch.Tensor | None, query_length: int, key_length: int, causal: bool, device: torch.device,
    explicit: bool,
) -> torch.Tensor | None:
    """Which keys each query may not attend to: a boolean tensor broadcastable to ``(B, H, T, S)``, ``True`` =
    masked (padding, and for causal attention the future).

    Returns ``None`` when nothing is masked, so that sdpa can use its fastest kernel (``is_causal`` handles the causal
    case when there is no cache); ``explicit=True`` forces a tensor (the eager kernel needs the causal mask).
    """
    if (key_padding_mask is not None and key_padding_mask.device.type == "cpu" and not torch.compiler.is_compiling()
            and bool(key_padding_mask.all())):
        key_padding_mask = None  # nothing is padded: let sdpa use its fastest kernel (checked on the CPU only,
        # where it costs no synchronisation; on a GPU the mask is built instead of stalling the host)
    past_length = key_length - query_length
    needs_causal = causal and query_length > 1  # a single new token may see every key
    if key_padding_mask is None:
        if not needs_causal:
            return None
        if not explicit and past_length == 0:
            return None  # sdpa applies `is_causal` itself (valid only without a cache: it aligns top-left)
    allowed = torch.ones(1, 1, 1, key_length, dtype=torch.bool, device=device)
    if causal:
        # query i (absolute position past + i) may see keys 0..past + i  (section 3.2.3, "masking out")
        allowed = torch.ones(query_length, key_length, dtype=torch.bool, device=device).tril(past_length)[None, None]
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask.bool()[:, None, None, :]  # (B, 1, T or 1, S)
    return ~allowed


def _additive(blocked: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive form of a boolean mask: 0 where attending is allowed, the most negative finite number where it is
    blocked (never -inf: a fully padded row then gets uniform weights, not NaN)."""
    if blocked is None:
        return None
    return torch.zeros(blocked.shape, dtype=dtype, device=blocked.device).masked_fill(blocked, torch.finfo(dtype).min)


def _flex_block_mask(blocked: torch.Tensor, batch: int, query_length: int) -> BlockMask:
    """flex attention's own form of a boolean mask ``(B or 1, 1, T or 1, S)`` (``True`` = masked) for ``B`` rows of
    ``T`` queries: a ``BlockMask``, with which flex skips whole blocks of masked keys (padding, the future) instead of
    adding a bias to every score.

    It is also the form transformers' own models give flex. (For a tensor mask, transformers' flex path reads
    ``mask[b][0][q][k]`` in its ``score_mod``, which torch 2.13's CPU flex kernel crashes on with a segmentation
    fault.) The mask is made for every row even where one row would do: after a few shapes, torch 2.13 compiles flex
    for dynamic shapes, and its CPU code for a one-row (broadcast) mask then fails to build. A query that may see no
    key at all, e.g. a padded position under a causal mask, gets zeros from flex where the additive mask gives it
    uniform weights; either is ignored, neither is NaN.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    allowed = (~blocked).expand(batch, 1, query_length, -1)  # (B, 1, T, S)

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return allowed[b, 0, q, k]

    return create_block_mask(mask_mod, batch, None, query_length, allowed.shape[-1], device=blocked.device)


def _kernel_mask(blocked: torch.Tensor | None, batch: int, query_length: int, dtype: torch.dtype,
                 config: ScratchformerConfig, output_attentions: bool) -> torch.Tensor | BlockMask | None:
    """A :func:`_blocked_keys` mask in the form the configured attention kernel reads: a ``BlockMask`` for flex
    attention, the additive form for the others (and for calls that return the weights: they run the eager kernel).
    """
    if blocked is not None and config._attn_implementation == "flex_attention" and not output_attentions:
        return _flex_block_mask(blocked, batch, query_length)
    return _additive(blocked, dtype)


def _static_cache_layout(attention_mask: torch.Tensor | None, past_key_values: EncoderDecoderCache, batch: int,
                         length: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Positions ``(B, T)``, the self-attention mask ``(B or 1, 1, T, S)`` (``True`` = masked) and the number of keys
    ``S`` for a preallocated cache of ``S`` slots.

    Everything here has a fixed shape and no host synchronisation, so that a compiled decoding step is one graph: the
    number of tokens already cached is a 0-d tensor on the device (``past``), the keys are all ``S`` slots, and a slot
    is visible to query ``i`` when it holds a token at or before it (``slot <= past + i``), which masks the empty
    slots and the future alike (section 3.2.3). Decoder inputs are taken as unpadded (what ``generate`` feeds an
    encoder-decoder); a 2-D ``(B, S)`` padding mask or the 4-D mask ``generate`` builds may refine the mask.
    """
    past = past_key_values.get_seq_length()  # 0-d tensor once the cache is filled, 0 before
    total = past_key_values.self_attention_cache.get_mask_sizes(length, 0)[0]  # S, a Python int
    query_positions = torch.arange(length, device=device) + past  # (T,)
    masked = torch.arange(total, device=device)[None, :] > query_positions[:, None]  # (T, S)
    masked = masked[None, None]  # (1, 1, T, S)
    if attention_mask is not None and attention_mask.dim() == 2:
        _check_mask("decoder_attention_mask", attention_mask, batch, (total,))
        masked = masked | ~attention_mask.bool()[:, None, None, :]
    elif attention_mask is not None:
        if attention_mask.dim() != 4 or attention_mask.shape[-2:] != (length, total):
            raise ValueError(f"decoder_attention_mask must have shape (batch, {total}) or (batch, 1, {length}, "
                             f"{total}) with a static cache of {total} slots, got {tuple(attention_mask.shape)}")
        visible = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
        masked = masked | ~visible
    return query_positions.expand(batch, length), masked, total


def _signature_computed_once(forward: Callable) -> Callable:
    """Store ``forward``'s signature on it, so that ``inspect.signature`` becomes a lookup.

    transformers' ``generate()`` calls ``inspect.signature(model.forward)`` at every decoding step of a model
    registered for remote code (it looks for a ``cache_position`` argument). Building the signature of a 16-argument
    ``forward`` takes tens of microseconds, as long as a small model's decoding step spends launching a dozen kernels
    on a GPU: 3% of a tiny model's time per token (the overhead group of benchmarks/RESULTS.md), BART does not pay it
    (it is not remote code). The signature itself is unchanged.
    """
    forward.__signature__ = inspect.signature(forward)
    return forward


def _flag(value: bool | None, config: ScratchformerConfig, name: str, default: bool = False) -> bool:
    return bool(value) if value is not None else bool(getattr(config, name, default))


# --------------------------------------------------------------------------------------------------------------------
# Pre-trained model base
# --------------------------------------------------------------------------------------------------------------------


# What config.json's auto_map names, for Hub users with remote code: the one place of this policy (registration,
# save_pretrained and the Hub export use it). AutoModel is the encoder, as for DistilBERT.
AUTO_MAP = {
    "AutoConfig": "configuration_scratchformer.ScratchformerConfig",
    "AutoModel": "modeling_scratchformer.ScratchformerEncoderModel",
    "AutoModelForSeq2SeqLM": "modeling_scratchformer.ScratchformerForConditionalGeneration",
    "AutoModelForSequenceClassification": "modeling_scratchformer.ScratchformerForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_scratchformer.ScratchformerForTokenClassification",
    "AutoModelForMaskedLM": "modeling_scratchformer.ScratchformerForMaskedLM",
}
# Formats that unpickle on load (torch.load, pickle, joblib, numpy with allow_pickle): never written, never read.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz")


def safetensors_problem(folder: str | os.PathLike) -> str | None:
    """Why ``folder`` has no weights we may load, or ``None``: the one place of the safetensors-only rule."""
    names = os.listdir(folder)
    if "model.safetensors" in names or "model.safetensors.index.json" in names:
        return None
    pickles = sorted(name for name in names if os.path.splitext(name)[1] in PICKLE_SUFFIXES)
    detail = f" (it has {', '.join(pickles)}: pickled weights are never loaded)" if pickles else ""
    return (f"Scratchformer loads weights from safetensors only, and {folder} has no model.safetensors{detail}. "
            "Unpickling a pytorch_model.bin can run arbitrary code: convert the checkpoint where you trust it (load "
            "it, then save_pretrained writes safetensors).")


class ScratchformerPreTrainedModel(PreTrainedModel):
    """Weight initialisation and the Hugging Face plumbing shared by all Scratchformer models."""

    config_class = ScratchformerConfig
    config: ScratchformerConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["ScratchformerEncoderLayer", "ScratchformerDecoderLayer"]
    _skip_keys_device_placement = ["past_key_values", "cache"]  # the cache's name before and from transformers 5.24
    _supports_sdpa = True
    _supports_attention_backend = True
    _supports_flex_attn = True  # our boolean masks become BlockMasks (_flex_block_mask)

    def post_init(self) -> None:
        """Initialise and tie as usual, then list the tied copies (e.g. ``lm_head.weight``) as keys that are never
        saved: ``save_pretrained`` stores one tensor per tie anyway, and with the list ``Trainer`` re-ties them on
        ``resume_from_checkpoint`` instead of warning that they are "missing"."""
        super().post_init()
        self._keys_to_ignore_on_save = set(self.all_tied_weights_keys) or None

    _auto_classes_also_served = ("AutoModel",)  # auto_map entries a saved folder gets besides its own class

    def __init__(self, config: ScratchformerConfig, *args, **kwargs):
        config.check_fits_in_memory(torch.finfo(torch.get_default_dtype()).bits // 8)  # the dtype it is built in
        super().__init__(config, *args, **kwargs)

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as usual, with our ``auto_map`` only: transformers lists just the class being saved (Hub users also
        need ``AutoModel`` -> the encoder, for embeddings and the feature-extraction pipeline), and keeps any
        foreign entry a loaded config carried in (code we never reviewed would then run for Hub users)."""
        ours = {key: value for key, value in (getattr(self.config, "auto_map", None) or {}).items()
                if AUTO_MAP.get(key) == value}
        self.config.auto_map = {**ours, **{key: AUTO_MAP[key] for key in self._auto_classes_also_served}}
        return super().save_pretrained(save_directory, *args, **kwargs)

    def push_to_hub(self, repo_id: str, **kwargs):
        """Upload as transformers does (one commit: weights, config and code), but a repo without a ``README.md``
        gets our model card (:func:`model_card_text`) instead of transformers' empty template. Same arguments as
        ``PreTrainedModel.push_to_hub``."""
        return push_with_model_card(self, repo_id, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """Load as usual, with two safety rules: weights come from safetensors only (a pickled ``pytorch_model.bin``
        is never unpickled, unless the caller passes ``use_safetensors=False``), and an unreadable weights file gives
        an error that names it."""
        kwargs.setdefault("use_safetensors", True)
        # None: no folder or repo at all, the weights come as state_dict= (a form transformers supports)
        if (kwargs["use_safetensors"] and pretrained_model_name_or_path is not None
                and os.path.isdir(pretrained_model_name_or_path)):
            problem = safetensors_problem(pretrained_model_name_or_path)
            if problem:
                raise OSError(problem)
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except Exception as error:
            source = str(pretrained_model_name_or_path)
            if type(error).__name__ == "SafetensorError":  # header or size check failed: truncated or corrupted
                names = ["model.safetensors"]
                if os.path.isdir(source):
                    names = sorted(name for name in os.listdir(source) if name.endswith(".safetensors"))
                raise OSError(f"cannot read the weights file {' / '.join(names)} of {source}: it is truncated or "
                              f"corrupted ({error}). Download it again (force_download=True) or re-export the "
                              "checkpoint.") from error
            raise

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Linear layers ~ N(0, init_std), biases 0. Token embeddings ~ N(0, d_model^-1/2) when they are scaled by
        sqrt(d_model), so the scaled embedding has unit variance like the positional encoding (as in fairseq);
        the padding row is zero. LayerNorm: weight 1, bias 0."""
        std = self.config.init_std
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            is_token_table = module.num_embeddings == self.config.vocab_size and module.padding_idx is not None
            scaled = is_token_table and self.config.scale_embedding
            init.normal_(module.weight, mean=0.0, std=self.config.d_model**-0.5 if scaled else std)
            if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
                module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)


# --------------------------------------------------------------------------------------------------------------------
# Encoder and decoder stacks
# --------------------------------------------------------------------------------------------------------------------


class ScratchformerStack(nn.Module):
    """What the encoder and the decoder share (section 3.1): the input embeddings, N identical layers and, for
    pre-LN, a final LayerNorm. Subclasses say which side of the config they read and which layer they stack."""

    side: str  # "encoder" or "decoder": selects the config fields {side}_layers, {side}_attention_heads
    layer_class: type[nn.Module]

    def __init__(self, config: ScratchformerConfig):
        super().__init__()
        self.config = config
        self.embeddings = ScratchformerEmbeddings(config)
        head_dim = config.d_model // getattr(config, f"{self.side}_attention_heads")
        self.rotary = ScratchformerRotaryEmbedding(head_dim, config.rope_theta) if (
            config.position_embedding_type == "rope") else None
        num_layers = getattr(config, f"{self.side}_layers")
        self.layers = nn.ModuleList(self.layer_class(config, i) for i in range(num_layers))
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.pre_layer_norm else None

    def _input_shape(self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
                     names: tuple[str, str]) -> tuple[int, int, torch.device]:
        """Check the token ids (or embeddings) this stack reads; return batch size, length and device."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError(f"pass exactly one of {names[0]} or {names[1]} to the {self.side}")
        given = input_ids if input_ids is not None else inputs_embeds
        if isinstance(given, torch.Tensor) and given.device.type == "meta" != self.embeddings.word_embeddings.weight.device.type:
            raise ValueError(f"{names[0] if input_ids is not None else names[1]} are on the meta device (shapes "
                             "without values): make them on the model's device")
        if input_ids is not None:
            _check_ids(names[0], input_ids, self.config.vocab_size)
            return input_ids.shape[0], input_ids.shape[1], input_ids.device
        _check_embeds(names[1], inputs_embeds, self.config.d_model, self.embeddings.word_embeddings.weight.dtype)
        return inputs_embeds.shape[0], inputs_embeds.shape[1], inputs_embeds.device

    def _check_positions(self, length: int, advice: str) -> None:
        limit = self.config.max_position_embeddings
        if self.config.position_embedding_type == "learned" and length > limit:
            raise ValueError(f"the {self.side} input has {length} tokens but learned positions stop at "
                             f"max_position_embeddings={limit}; {advice} or use sinusoidal or rope positions")

    def _final_layer_norm(self, hidden_states: torch.Tensor, all_hidden_states: list | None) -> torch.Tensor:
        """Pre-LN's final LayerNorm; the last ``hidden_states`` entry is then the normalised output."""
        if self.layer_norm is None:
            return hidden_states
        hidden_states = self.layer_norm(hidden_states)
        if all_hidden_states is not None:
            all_hidden_states[-1] = hidden_states
        return hidden_states


class ScratchformerEncoder(ScratchformerStack):
    """The encoder: embeddings, then N layers of self-attention + feed-forward (section 3.1)."""

    side = "encoder"
    layer_class = ScratchformerEncoderLayer

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ) -> BaseModelOutput | tuple:
        """input_ids, attention_mask: (B, S); ``attention_mask`` is 1 for real tokens and 0 for padding."""
        config = self.config
        output_attentions = _flag(output_attentions, config, "output_attentions")
        output_hidden_states = _flag(output_hidden_states, config, "output_hidden_states")
        return_dict = _flag(return_dict, config, "return_dict", True)
        batch, length, device = self._input_shape(input_ids, inputs_embeds, ("input_ids", "inputs_embeds"))
        _check_mask("attention_mask", attention_mask, batch, (length,))
        self._check_positions(length, "truncate it (tokenizer truncation=True)")

        position_ids = _position_ids(attention_mask, batch, length, 0, device)
        hidden_states = self.embeddings(input_ids, position_ids, inputs_embeds, num_positions=length)
        rotary = self.rotary(position_ids) if self.rotary is not None else None
        explicit = output_attentions or config._attn_implementation != "sdpa"
        mask = _kernel_mask(_blocked_keys(attention_mask, length, length, False, device, explicit),
                            batch, length, hidden_states.dtype, config, output_attentions)

        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for layer in self.layers:
            hidden_states, weights = layer(hidden_states, attention_mask=mask, rotary=rotary,
                                           output_attentions=output_attentions)
            if output_hidden_states:
                all_hidden_states.append(hidden_states)
            if output_attentions:
                all_attentions.append(weights)
        hidden_states = self._final_layer_norm(hidden_states, all_hidden_states)

        output = BaseModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden_states) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None,
        )
        return output if return_dict else output.to_tuple()


class ScratchformerDecoder(ScratchformerStack):
    """The decoder: embeddings, N layers of masked self-attention + cross-attention + FFN (section 3.1).

    Two kinds of key/value cache: a growing ``DynamicCache`` (the default) and a preallocated ``StaticCache``
    (``generate(..., cache_implementation="static")``), whose fixed shapes let ``torch.compile`` capture one decoding
    step as a single graph; see :func:`_static_cache_layout`.
    """

    side = "decoder"
    layer_class = ScratchformerDecoderLayer

    def _dynamic_cache_layout(self, attention_mask: torch.Tensor | None, past_key_values: Cache | None, batch: int,
                              length: int, device: torch.device, explicit: bool,
                              ) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """Positions ``(B, T)``, the causal self-attention mask (``True`` = masked, or ``None``) and the number of
        keys, for no cache or a growing one: the keys are the ``past`` cached ones plus these ``T``."""
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        total = past_length + length
        _check_mask("decoder_attention_mask", attention_mask, batch, (length, total) if past_length else (length,))
        if attention_mask is not None and attention_mask.shape[1] == length and past_length:
            attention_mask = None  # a mask of the new tokens only says nothing about the cached ones
        position_ids = _position_ids(attention_mask, batch, length, past_length, device)
        blocked = _blocked_keys(attention_mask, length, total, True, device, explicit or past_length > 0)
        return position_ids, blocked, total

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        cache: EncoderDecoderCache | None = None,
    ) -> BaseModelOutputWithPastAndCrossAttentions | tuple:
        """input_ids: (B, T) the tokens of this step (only the new ones when a cache is given);
        attention_mask: (B, T) or (B, past + T) decoder padding; encoder_hidden_states: (B, S, D);
        encoder_attention_mask: (B, S); cache (or past_key_values, its name before transformers 5.24): the keys and
        values of the earlier steps."""
        past_key_values = _one_cache(cache, past_key_values)
        config = self.config
        output_attentions = _flag(output_attentions, config, "output_attentions")
        output_hidden_states = _flag(output_hidden_states, config, "output_hidden_states")
        return_dict = _flag(return_dict, config, "return_dict", True)
        use_cache = _flag(use_cache, config, "use_cache")
        batch, length, device = self._input_shape(
            input_ids, inputs_embeds, ("decoder_input_ids", "decoder_inputs_embeds"))
        if encoder_hidden_states is None:
            raise ValueError("the decoder needs encoder_hidden_states (run the encoder first)")
        if encoder_hidden_states.shape[0] != batch:
            raise ValueError(f"the decoder inputs have batch size {batch} but the encoder output has "
                             f"{encoder_hidden_states.shape[0]}")
        _check_mask("encoder attention_mask", encoder_attention_mask, batch, (encoder_hidden_states.shape[1],))

        if use_cache and self.training and torch.is_grad_enabled() and self.layers[0].gradient_checkpointing:
            # Checkpointing runs each layer again in the backward pass, which would fill a cache twice.
            use_cache, past_key_values = False, None
        if use_cache and past_key_values is None:
            # Every layer is full attention, so the layers are made as they are first filled. (DynamicCache(config=...)
            # would deep-copy this encoder-decoder config into a decoder config at every forward: 10% of a small
            # model's forward, measured in the overhead group of benchmarks/RESULTS.md.)
            past_key_values = EncoderDecoderCache(DynamicCache(), DynamicCache())
        explicit = output_attentions or config._attn_implementation != "sdpa"
        if past_key_values is not None and past_key_values.is_compileable:
            position_ids, self_mask, total = _static_cache_layout(attention_mask, past_key_values, batch, length, device)
        else:
            position_ids, self_mask, total = self._dynamic_cache_layout(
                attention_mask, past_key_values, batch, length, device, explicit)
        self._check_positions(total, "generate fewer tokens")
        hidden_states = self.embeddings(input_ids, position_ids, inputs_embeds, num_positions=total)
        rotary = self.rotary(position_ids) if self.rotary is not None else None
        self_mask = _kernel_mask(self_mask, batch, length, hidden_states.dtype, config, output_attentions)
        cross_mask = _kernel_mask(
            _blocked_keys(encoder_attention_mask, length, encoder_hidden_states.shape[1], False, device, explicit),
            batch, length, hidden_states.dtype, config, output_attentions)

        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_self, all_cross = ([], []) if output_attentions else (None, None)
        for layer in self.layers:
            hidden_states, self_weights, cross_weights = layer(
                hidden_states, encoder_hidden_states, attention_mask=self_mask, encoder_attention_mask=cross_mask,
                rotary=rotary, past_key_values=past_key_values, use_cache=use_cache,
                output_attentions=output_attentions)
            if output_hidden_states:
                all_hidden_states.append(hidden_states)
            if output_attentions:
                all_self.append(self_weights)
                all_cross.append(cross_weights)
        hidden_states = self._final_layer_norm(hidden_states, all_hidden_states)

        output = _output_with_cache(
            BaseModelOutputWithPastAndCrossAttentions, past_key_values if use_cache else None,
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden_states) if output_hidden_states else None,
            attentions=tuple(all_self) if output_attentions else None,
            cross_attentions=tuple(all_cross) if output_attentions else None,
        )
        return output if return_dict else output.to_tuple()


def mean_over_labelled(total: torch.Tensor, labels: torch.Tensor,
                       num_items_in_batch: int | torch.Tensor | None = None) -> torch.Tensor:
    """A loss summed over the labelled positions (``labels != -100``), divided by their number; 0, not NaN, when there
    are none. The Hugging Face ``Trainer`` passes ``num_items_in_batch``: the labelled positions of all the
    micro-batches of one optimizer step. Dividing by that count makes gradient accumulation give the gradient of one
    big batch (the Trainer then does not divide by the number of micro-batches itself)."""
    if num_items_in_batch is None:
        count = (labels != -100).sum()
    else:
        count = torch.as_tensor(num_items_in_batch, device=total.device)
    return total / count.clamp(min=1)


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing: the decoder input is the target shifted one step right, starting with the start token
    (``-100`` loss-ignore markers become padding)."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


# --------------------------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------------------------


class ScratchformerModel(ScratchformerPreTrainedModel):
    """The bare encoder-decoder (Figure 1 of the paper, without the final linear + softmax).

    With ``tie_word_embeddings`` (default) the encoder and decoder read one shared token table.
    """

    _tied_weights_keys = {"decoder.embeddings.word_embeddings.weight": "encoder.embeddings.word_embeddings.weight"}
    _keys_to_ignore_on_load_unexpected = [r"(^|\.)lm_head\."]

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.encoder = ScratchformerEncoder(config)
        self.decoder = ScratchformerDecoder(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embeddings.word_embeddings = value
        if self.config.tie_word_embeddings:
            self.decoder.embeddings.word_embeddings = value

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput | tuple:
        """Encode the source (unless ``encoder_outputs`` are given) and decode. Without decoder inputs, the
        decoder reads the source shifted right (as BART does), which makes the bare model usable on one text."""
        _warn_ignored(self, kwargs)
        _warn_old_cache_name(self, past_key_values)
        return_dict = _flag(return_dict, self.config, "return_dict", True)
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            if input_ids is None:
                raise ValueError("pass decoder_input_ids (or input_ids, which are then shifted right)")
            _check_ids("input_ids", input_ids, self.config.vocab_size)
            decoder_input_ids = shift_tokens_right(input_ids, self.config.pad_token_id,
                                                   self.config.decoder_start_token_id)
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True)
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids, attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state, encoder_attention_mask=attention_mask,
            past_key_values=_one_cache(cache, past_key_values), inputs_embeds=decoder_inputs_embeds, use_cache=use_cache,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True)
        output = _output_with_cache(
            Seq2SeqModelOutput, _cache_of(decoder_outputs),
            last_hidden_state=decoder_outputs.last_hidden_state,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )
        return output if return_dict else output.to_tuple()


class ScratchformerForConditionalGeneration(ScratchformerPreTrainedModel, GenerationMixin):
    """The encoder-decoder with the pre-softmax linear projection to the vocabulary (section 3.4).

    ``labels`` give the cross-entropy loss (positions with ``-100`` are ignored) and, shifted right, the decoder
    inputs. ``generate()`` (greedy, beam search, sampling) comes from ``GenerationMixin`` and uses a key/value cache
    in which the cross-attention keys and values are computed once per sequence.
    """

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embeddings.word_embeddings.weight"}
    _auto_classes_also_served = ("AutoModel", "AutoModelForMaskedLM")  # the encoder + this LM head = fill-mask

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.model = ScratchformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def generate(self, *args, **kwargs):
        """``GenerationMixin.generate``, with its settings checked first (:func:`_check_generation`): counts that
        would fail deep inside it (``num_beams=0`` divides by zero there), values it accepts but cannot mean
        (``top_p=0``, ``max_new_tokens=2.5``, ``eos_token_id=-1``), and lengths past the positions or the memory."""
        base = kwargs.get("generation_config") or self.generation_config
        settings = {**base.to_dict(), **{key: value for key, value in kwargs.items() if hasattr(base, key)}}
        inputs = args[0] if args else kwargs.get("input_ids", kwargs.get("inputs", kwargs.get("inputs_embeds")))
        _check_generation(settings, self.config, batch=inputs.shape[0] if isinstance(inputs, torch.Tensor) else 1,
                          device=self.device, dtype=self.dtype)
        return super().generate(*args, **kwargs)

    def create_masks_for_generate(self, config, inputs_embeds, attention_mask, *args, **kwargs):
        """What ``generate()`` calls at every step with a static cache, outside the compiled step, to make a 4-D
        decoder mask. Without a decoder mask (what ``generate`` passes an encoder-decoder) there is nothing to make:
        the decoder masks the empty slots and the future itself (:func:`_static_cache_layout`). Building the causal
        mask anyway took 6% of a tiny model's static-cache generation on the host, every step."""
        if attention_mask is None:
            return None
        from transformers.masking_utils import create_masks_for_generate

        return create_masks_for_generate(config, inputs_embeds, attention_mask, *args, **kwargs)

    @_signature_computed_once
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        past_key_values: EncoderDecoderCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        cache: EncoderDecoderCache | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput | tuple:
        """``labels`` give the mean cross-entropy over the labelled target tokens (see :func:`mean_over_labelled`
        for ``num_items_in_batch``)."""
        _warn_ignored(self, kwargs)
        _warn_old_cache_name(self, past_key_values)
        return_dict = _flag(return_dict, self.config, "return_dict", True)
        if labels is not None:
            if not isinstance(labels, torch.Tensor) or labels.dim() != 2:
                raise ValueError("labels must be a (batch, target_length) tensor of token ids, -100 where ignored")
            _check_ids("labels", labels.masked_fill(labels == -100, 0), self.config.vocab_size)
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask, encoder_outputs=encoder_outputs,
            cache=_one_cache(cache, past_key_values), inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds, use_cache=use_cache, output_attentions=output_attentions,
            output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V)

        loss = None
        if labels is not None:
            if labels.shape != logits.shape[:2]:
                raise ValueError(f"labels have shape {tuple(labels.shape)} but the decoder produced "
                                 f"{tuple(logits.shape[:2])} positions")
            labels = labels.to(logits.device).reshape(-1)
            total = nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels, ignore_index=-100,
                                                reduction="sum")
            loss = mean_over_labelled(total, labels, num_items_in_batch)

        output = _output_with_cache(
            Seq2SeqLMOutput, _cache_of(outputs),
            loss=loss,
            logits=logits,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )
        return output if return_dict else output.to_tuple()


class ScratchformerEncoderModel(ScratchformerPreTrainedModel):
    """The encoder alone: contextual embeddings of a text, the class behind ``AutoModel``.

    Loads from a full encoder-decoder checkpoint (the decoder and LM head are skipped). As in DistilBERT,
    ``model.embeddings.word_embeddings`` is the learned token table and
    ``model(**tokenizer(text, return_tensors="pt")).last_hidden_state`` the contextual vectors.
    """

    # A full encoder-decoder checkpoint also holds the decoder and the LM head: they are simply not needed here.
    _keys_to_ignore_on_load_unexpected = [r"(^|\.)decoder\.", r"(^|\.)lm_head\."]

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.encoder = ScratchformerEncoder(config)
        self.post_init()

    @property
    def embeddings(self) -> ScratchformerEmbeddings:
        """The input embedding layer (``embeddings.word_embeddings`` is the learned table), as in BERT/DistilBERT."""
        return self.encoder.embeddings

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embeddings.word_embeddings = value

    def get_encoder(self) -> ScratchformerEncoder:
        return self.encoder

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        _warn_ignored(self, kwargs)
        return self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=return_dict)


# --------------------------------------------------------------------------------------------------------------------
# Task heads on the encoder (as DistilBERT and BART have them)
# --------------------------------------------------------------------------------------------------------------------


def mean_over_tokens(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The sentence vector: the mean of the encoder output over the real tokens, ``(B, S, D) -> (B, D)``.

    Padding (``attention_mask == 0``) is left out, so a sentence gets the same vector alone or in a padded batch. The
    same pooling as the card's embedding snippet and the exported sentence-transformers folder.
    """
    if attention_mask is None:
        return hidden_states.mean(dim=1)
    mask = attention_mask.bool().unsqueeze(-1).to(hidden_states.dtype)  # (B, S, 1)
    return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


# generate() counts and their smallest meaningful value
_GENERATION_COUNTS = {"max_new_tokens": 1, "max_length": 1, "min_length": 0, "min_new_tokens": 0, "top_k": 0,
                      "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0, "num_beams": 1,
                      "num_return_sequences": 1, "num_beam_groups": 1}
_GENERATION_TOKEN_IDS = ("eos_token_id", "pad_token_id", "bos_token_id", "decoder_start_token_id")


def _check_generation(settings: dict, config: ScratchformerConfig, batch: int, device: torch.device,
                      dtype: torch.dtype) -> None:
    """Refuse generate() settings that transformers accepts but cannot mean (it warns at most), and a length that
    runs past learned positions or whose key/value cache alone would not fit in the device's memory."""
    for name, least in _GENERATION_COUNTS.items():
        value = settings.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            rule = "a positive integer" if least == 1 else f"an integer >= {least}"
            raise ValueError(f"generate: {name}={value!r} must be {rule}")
    for name, low, high in (("top_p", 0.0, 1.0), ("temperature", 0.0, math.inf), ("repetition_penalty", 0.0, math.inf)):
        value = settings.get(name)
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and low < value <= high):
            raise ValueError(f"generate: {name}={value!r} must be a finite number in ({low}, {high}]")
    for name in _GENERATION_TOKEN_IDS:
        ids = settings.get(name)
        for token in ids if isinstance(ids, (list, tuple)) else [ids]:
            if token is not None and (isinstance(token, bool) or not isinstance(token, int)
                                      or not 0 <= token < config.vocab_size):
                raise ValueError(f"generate: {name}={ids!r} must be a token id in [0, {config.vocab_size})")
    new_tokens = settings.get("max_new_tokens")
    length = new_tokens + 1 if new_tokens is not None else settings.get("max_length") or 1  # + the start token
    if config.position_embedding_type == "learned" and length > config.max_position_embeddings:
        raise ValueError(f"generate: up to {length} decoder tokens, but learned positions stop at "
                         f"max_position_embeddings={config.max_position_embeddings}: ask for fewer new tokens")
    rows = batch * max(settings.get("num_beams") or 1, settings.get("num_return_sequences") or 1)
    cache = rows * config.decoder_layers * 2 * length * config.d_model * torch.finfo(dtype).bits // 8
    memory = _device_memory(device)
    if memory is not None and cache > memory:
        raise ValueError(f"generate: {rows} sequences of up to {length} tokens need a key/value cache of "
                         f"{cache / 2**30:,.1f} GiB, more than the {memory / 2**30:,.1f} GiB of {device.type}: ask "
                         "for fewer new tokens, beams or sequences")


def _device_memory(device: torch.device) -> int | None:
    """The memory of ``device`` in bytes (a property lookup: no synchronisation), or ``None`` where unknown."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    if device.type != "cpu":
        return None
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _check_labels(labels: torch.Tensor, num_labels: int, ignored: int | None = None) -> None:
    """Class labels are integers in ``0..num_labels-1`` (or ``ignored``); cross-entropy fails obscurely otherwise."""
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"labels must be integer class ids in 0..{num_labels - 1}, got dtype {labels.dtype}")
    if torch.compiler.is_compiling() or labels.device.type == "meta":
        return
    ok = (labels >= 0) & (labels < num_labels)
    if ignored is not None:
        ok |= labels == ignored
    _check_values(ok.all(), f"labels must be class ids in 0..{num_labels - 1} (num_labels={num_labels})"
                  + (f" or {ignored}" if ignored is not None else ""),
                  lambda: f"; they span [{int(labels.min())}, {int(labels.max())}]")


def _classifier_dropout(config: ScratchformerConfig) -> float:
    return config.dropout if config.classifier_dropout is None else config.classifier_dropout


class ScratchformerClassificationHead(nn.Module):
    """A sentence vector to one score per label: dropout, dense + tanh, dropout, projection (as BART's head)."""

    def __init__(self, config: ScratchformerConfig):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.out_proj = nn.Linear(config.d_model, config.num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        # pooled: (B, D)  ->  logits (B, num_labels)
        hidden = torch.tanh(self.dense(self.dropout(pooled)))
        return self.out_proj(self.dropout(hidden))


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, config: ScratchformerConfig) -> torch.Tensor:
    """The loss for ``config.problem_type``, chosen as transformers does when it is not set: one label -> regression
    (MSE), integer labels -> single-label classification (cross-entropy), float labels of shape ``(B, num_labels)``
    -> multi-label classification (binary cross-entropy on each label). The choice is stored in the config."""
    num_labels = config.num_labels
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    labels = labels.to(logits.device)
    if config.problem_type == "single_label_classification":
        _check_labels(labels, num_labels)
    if config.problem_type == "regression":
        if num_labels == 1:
            return nn.functional.mse_loss(logits.squeeze(-1).float(), labels.squeeze(-1).float())
        return nn.functional.mse_loss(logits.float(), labels.float())
    if config.problem_type == "single_label_classification":
        return nn.functional.cross_entropy(logits.float().view(-1, num_labels), labels.view(-1))
    if config.problem_type == "multi_label_classification":
        return nn.functional.binary_cross_entropy_with_logits(logits.float(), labels.float())
    raise ValueError(f"problem_type={config.problem_type!r} is not one of 'regression', "
                     "'single_label_classification', 'multi_label_classification'")


class ScratchformerEncoderWithHead(ScratchformerPreTrainedModel):
    """What the task heads share: the encoder (``self.model``, a :class:`ScratchformerEncoderModel`) and its
    accessors. Loads from a full encoder-decoder checkpoint: the encoder is reused (``model.encoder.*``), the decoder
    and LM head are skipped, and the head starts from random values, as BERT's does."""

    _keys_to_ignore_on_load_unexpected = [r"(^|\.)decoder\.", r"(^|\.)lm_head\."]

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = ScratchformerEncoderModel(config)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.set_input_embeddings(value)

    def get_encoder(self) -> ScratchformerEncoder:
        return self.model.encoder


class ScratchformerForSequenceClassification(ScratchformerEncoderWithHead):
    """The encoder with a sentence-level classification (or regression) head, for ``text-classification``.

    Pooling: the **mean of the last encoder layer over the real tokens** (:func:`mean_over_tokens`; padding is left
    out), then :class:`ScratchformerClassificationHead`. Our encoder has no ``[CLS]`` token trained to summarise
    the text, and the mean is what the word-sense study and the sentence-transformers export use. ``num_labels``,
    ``id2label``/``label2id`` and ``problem_type`` come from the config; the loss follows ``problem_type`` as in
    transformers (:func:`sequence_classification_loss`).

    Loads from a full encoder-decoder checkpoint (:class:`ScratchformerEncoderWithHead`).
    """

    # The loss is a mean over the texts of the batch (MSE, or cross-entropy), with no per-token count to pass: the
    # Trainer then divides each micro-batch's loss by their number, which is what gradient accumulation needs.
    accepts_loss_kwargs = False

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.classifier = ScratchformerClassificationHead(config)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        """labels: ``(B,)`` class ids, ``(B,)`` or ``(B, 1)`` targets for regression, or ``(B, num_labels)`` 0/1
        floats for multi-label classification."""
        _warn_ignored(self, kwargs)
        return_dict = _flag(return_dict, self.config, "return_dict", True)
        encoded = self.model(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                             output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                             return_dict=True)
        logits = self.classifier(mean_over_tokens(encoded.last_hidden_state, attention_mask))  # (B, num_labels)
        loss = sequence_classification_loss(logits, labels, self.config) if labels is not None else None
        output = SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                          attentions=encoded.attentions)
        return output if return_dict else output.to_tuple()


class ScratchformerForTokenClassification(ScratchformerEncoderWithHead):
    """The encoder with one label per token (tagging, named entities), for ``token-classification``.

    Each vector of the last encoder layer goes through dropout and a linear projection to ``num_labels`` scores.
    ``labels`` of ``-100`` (padding, special tokens, the second text of a pair) are left out of the cross-entropy.
    Loads from a full encoder-decoder checkpoint like :class:`ScratchformerForSequenceClassification`.
    """

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.classifier = nn.Linear(config.d_model, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> TokenClassifierOutput | tuple:
        """labels: ``(B, S)`` label ids, ``-100`` where a token has no label; the loss is their mean cross-entropy
        (see :func:`mean_over_labelled` for ``num_items_in_batch``)."""
        _warn_ignored(self, kwargs)
        return_dict = _flag(return_dict, self.config, "return_dict", True)
        encoded = self.model(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                             output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                             return_dict=True)
        logits = self.classifier(self.dropout(encoded.last_hidden_state))  # (B, S, num_labels)
        loss = None
        if labels is not None:
            labels = labels.to(logits.device).reshape(-1)
            _check_labels(labels, self.num_labels, ignored=-100)
            total = nn.functional.cross_entropy(logits.float().view(-1, self.num_labels), labels, ignore_index=-100,
                                                reduction="sum")
            loss = mean_over_labelled(total, labels, num_items_in_batch)
        output = TokenClassifierOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                       attentions=encoded.attentions)
        return output if return_dict else output.to_tuple()


class ScratchformerForMaskedLM(ScratchformerEncoderWithHead):
    """The encoder with the tied output projection, for ``fill-mask``: BERT's masked-token prediction.

    The same weights the encoder's masked-token loss trains (``scratchformer train --encoder-mlm-weight``): each
    vector of the last encoder layer times the shared token table gives one score per token. Loads from a full
    encoder-decoder checkpoint with nothing new to learn (the decoder is skipped; the projection is the token table).
    """

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embeddings.word_embeddings.weight"}
    _keys_to_ignore_on_load_unexpected = [r"(^|\.)decoder\."]

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> MaskedLMOutput | tuple:
        """labels: ``(B, S)`` token ids to predict, ``-100`` where there is nothing to predict; the loss is their
        mean cross-entropy (see :func:`mean_over_labelled` for ``num_items_in_batch``)."""
        _warn_ignored(self, kwargs)
        return_dict = _flag(return_dict, self.config, "return_dict", True)
        encoded = self.model(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                             output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                             return_dict=True)
        logits = self.lm_head(encoded.last_hidden_state)  # (B, S, V)
        loss = None
        if labels is not None:
            labels = labels.to(logits.device).reshape(-1)
            total = nn.functional.cross_entropy(logits.float().view(-1, self.config.vocab_size), labels,
                                                ignore_index=-100, reduction="sum")
            loss = mean_over_labelled(total, labels, num_items_in_batch)
        output = MaskedLMOutput(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                attentions=encoded.attentions)
        return output if return_dict else output.to_tuple()


# --------------------------------------------------------------------------------------------------------------------
# Model card for push_to_hub
# --------------------------------------------------------------------------------------------------------------------

PAPER_CITATION = """
@inproceedings{vaswani2017attention,
  title     = {Attention Is All You Need},
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and
               Gomez, Aidan N. and Kaiser, {\\L}ukasz and Polosukhin, Illia},
  booktitle = {Advances in Neural Information Processing Systems 30 (NIPS 2017)},
  pages     = {5998--6008},
  year      = {2017},
  url       = {https://arxiv.org/abs/1706.03762}
}
"""


def model_card_text(model: ScratchformerPreTrainedModel, repo_id: str) -> str:
    """A short model card for ``model.push_to_hub``: metadata, the architecture, how to load it, what it is for,
    its limits and the paper to cite. ``scratchformer push`` writes the full card (scores, data sources, snippets)."""
    c = model.config
    tags = ["scratchformer", "transformer", "attention-is-all-you-need", "custom_code", "feature-extraction"]
    return "\n".join([
        "---", "library_name: transformers", "pipeline_tag: feature-extraction", "tags:", *[f"- {tag}" for tag in tags],
        "---", "", f"# {repo_id.split('/')[-1]}", "",
        f"A Scratchformer ({type(model).__name__}): the encoder-decoder Transformer of *Attention Is All You Need* "
        f"written from scratch, with {c.encoder_layers} encoder / {c.decoder_layers} decoder layers, d_model "
        f"{c.d_model}, {c.encoder_attention_heads} heads, d_ff {c.encoder_ffn_dim}, {c.position_embedding_type} "
        f"positions and {model.num_parameters() / 1e6:.1f} M parameters.", "",
        "## How to use", "", "```python", "from transformers import AutoModel, AutoTokenizer", "",
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)',
        f'encoder = AutoModel.from_pretrained("{repo_id}", trust_remote_code=True)  # runs this repo\'s code',
        'states = encoder(**tokenizer(["A sentence."], return_tensors="pt")).last_hidden_state', "```", "",
        "## Uses and limitations", "",
        "For studying and teaching the Transformer, and as a small model to fine-tune. A small model trained from "
        "scratch: not for decisions about people or anything that needs reliable or unbiased output.", "",
        "## Training data", "", "Not described yet: add the data this model was trained on, and their licences.", "",
        "## Citation", "", "```bibtex", PAPER_CITATION.strip(), "```", "",
    ])


def push_with_model_card(model: ScratchformerPreTrainedModel, repo_id: str, *, commit_message: str | None = None,
                         commit_description: str | None = None, private: bool | None = None,
                         token: bool | str | None = None, revision: str | None = None, create_pr: bool = False,
                         max_shard_size: int | str | None = "50GB", tags: list[str] | None = None):
    """``PreTrainedModel.push_to_hub`` with our card: create the repo if needed, save the model into a temporary
    folder, add ``README.md`` unless the repo has one (its card is kept), upload everything in one commit."""
    import tempfile

    from huggingface_hub import HfApi

    api = HfApi(token=token)
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    with tempfile.TemporaryDirectory() as folder:
        model.save_pretrained(folder, max_shard_size=max_shard_size)
        if not api.file_exists(repo_id, "README.md", revision=revision):
            card = model_card_text(model, repo_id)
            if tags:
                card = card.replace("tags:\n", "tags:\n" + "".join(f"- {tag}\n" for tag in tags), 1)
            with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as handle:
                handle.write(card)
        return api.upload_folder(repo_id=repo_id, folder_path=folder, revision=revision, create_pr=create_pr,
                                 commit_message=commit_message or "Upload model",
                                 commit_description=commit_description)


__all__ = [
    "ScratchformerEncoderModel",
    "ScratchformerForConditionalGeneration",
    "ScratchformerForSequenceClassification",
    "ScratchformerForTokenClassification",
    "ScratchformerModel",
    "ScratchformerPreTrainedModel",
    "sinusoidal_position_encoding",
]
