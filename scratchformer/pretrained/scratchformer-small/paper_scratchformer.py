"""The Transformer of Vaswani et al. (2017), "Attention Is All You Need", in PyTorch alone, bottom-up to Figure 1.

Each piece comes before the pieces that use it, one concept of the paper per class or function, and the last class,
``Transformer``, puts Figure 1 together. Section 3 read in this order (left: the paper's section):

    3.5    sinusoidal_position_encoding, SinusoidalPositionalEncoding   PE(pos, 2i) = sin(pos / 10000^(2i/d_model))
           RotaryEmbedding, apply_rotary                                rotary positions (RoFormer), an alternative
    3.4    Embeddings                 Embedding(x) * sqrt(d_model) + PE, then dropout
    3.2.1  attention                  softmax(Q K^T / sqrt(d_k)) V, where a query may attend
    3.2.2  MultiHeadAttention         project Q, K and V, split into h heads, attend, concatenate, project with W^O
    3.3    FeedForward                FFN(x) = max(0, x W1 + b1) W2 + b2
    3.1    Residual                   LayerNorm(x + Dropout(Sublayer(x))) around every sub-layer
    3.1    EncoderLayer, DecoderLayer, Encoder, Decoder
    3.2.3  padding_mask, causal_mask  what each position may attend to
           positions_skipping_padding a token's position counts the real tokens only (padding is not in the paper)
    3.4    pre_softmax_linear         the output projection to the vocabulary, tied to the embeddings
           shift_tokens_right         teacher forcing: the decoder reads the target shifted one step right
    Fig. 1 Transformer                encoder, decoder, pre-softmax linear: encode, decode, forward -> logits, and
                                      greedy_decode, the loop that writes a translation one token at a time

Shapes in comments: B batch, T target (query) length, S source (key) length, D = d_model, H heads, Dh = D / H,
V vocabulary. A mask is one boolean "may attend" tensor, broadcastable to (B, H, T, S): True where query t may attend
to key s. ``config`` is anything with the fields of ``TransformerConfig`` (below): ``ScratchformerConfig``, whose
defaults are the paper's base model (section 6.1).

``modeling_scratchformer.py`` makes these classes a transformers model (attention kernels, the key/value cache of
``generate()``, input checks, outputs) by subclassing them, so the parameter names are these. Where it needs a hook
here, the hook is named in one sentence where it appears ("the adapter ..."). Both files are copied next to the
weights; this one imports torch and the standard library only.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import torch
from torch import nn


@runtime_checkable
class TransformerConfig(Protocol):
    """The hyper-parameters this file reads, each once: ``ScratchformerConfig`` has them all (with the paper's base
    model as defaults), and so may any object, e.g. a ``types.SimpleNamespace``."""

    vocab_size: int  # V, one table shared by source and target (section 3.4)
    d_model: int  # D
    encoder_layers: int  # N
    decoder_layers: int
    encoder_attention_heads: int  # h
    decoder_attention_heads: int
    encoder_ffn_dim: int  # d_ff
    decoder_ffn_dim: int
    activation_function: str  # "relu" (the paper) or "gelu"
    dropout: float  # P_drop (section 5.4)
    attention_dropout: float  # not in the paper: on the attention weights
    activation_dropout: float  # not in the paper: after the FFN's activation
    max_position_embeddings: int  # the length of a "learned" position table
    position_embedding_type: str  # "sinusoidal" (the paper), "learned" or "rope"
    rope_theta: float  # the base of the rotary frequencies
    pre_layer_norm: bool  # False: the paper's LayerNorm(x + Sublayer(x))
    layer_norm_eps: float
    scale_embedding: bool  # multiply the embeddings by sqrt(d_model) (section 3.4)
    tie_word_embeddings: bool  # one matrix for both embeddings and the pre-softmax linear (section 3.4)
    attention_bias: bool  # biases in the attention projections
    bias: bool  # False: no bias in any attention projection or feed-forward linear (Cramming)
    pad_token_id: int | None  # the padding token: its embedding row stays zero
    eos_token_id: int | None  # </s>: greedy_decode stops a sentence there
    decoder_start_token_id: int | None  # the decoder's first input token


# A mask: True where query t may attend to key s, broadcastable to (B, H, T, S); None: every key. (The adapter passes
# its attention kernel's form of the same mask through the same arguments, unchanged.)
MayAttend = torch.Tensor | None

# --------------------------------------------------------------------------------------------------------------------
# 3.5 Positional encoding
# --------------------------------------------------------------------------------------------------------------------


def sinusoidal_position_encoding(num_positions: int, d_model: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The paper's fixed table, ``(num_positions, d_model)``: ``PE[pos, 2i] = sin(pos / 10000^(2i / d_model))`` and
    ``PE[pos, 2i + 1] = cos(...)``, sines and cosines *interleaved*, computed in float64.

    Example: ``sinusoidal_position_encoding(2, 4)[1] == [sin 1, cos 1, sin 0.01, cos 0.01]``.
    """
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # the "2i" of the formula, (ceil(D/2),)
    angle = position / torch.pow(10000.0, two_i / d_model)  # (P, ceil(D/2))
    table = torch.zeros(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """The sinusoids of section 3.5, for any number of positions. No parameters: the table is computed when a longer
    input first needs it (at least twice as long), and kept in a plain attribute (nothing to save or load)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self._table: torch.Tensor | None = None  # (P, D)

    def forward(self, position_ids: torch.Tensor, num_positions: int) -> torch.Tensor:
        # position_ids: (B, T), each < num_positions  ->  (B, T, D)
        table = self._table
        if table is None or table.shape[0] < num_positions or table.device != position_ids.device:
            length = max(num_positions, 64 if table is None else 2 * table.shape[0])
            table = self._table = sinusoidal_position_encoding(length, self.d_model).to(position_ids.device)
        return table[position_ids]


class RotaryEmbedding(nn.Module):
    """Rotary positions (RoPE, Su et al. 2021), instead of adding PE: each query and key of a self-attention turns
    its dimension pairs ``(j, j + Dh/2)`` by the angle ``pos * theta^(-2j/Dh)``, so that their dot product depends on
    how far apart two positions are, not on where they are."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # position_ids: (B, T)  ->  cos, sin: (B, 1, T, Dh), the same for every head
        two_j = torch.arange(0, self.head_dim, 2, dtype=torch.float32, device=position_ids.device)
        inv_freq = self.theta ** (-two_j / self.head_dim)  # (Dh/2,)
        angle = position_ids[..., None].float() * inv_freq  # (B, T, Dh/2)
        angle = torch.cat((angle, angle), dim=-1)[:, None]  # (B, 1, T, Dh)
        return angle.cos(), angle.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Turn ``x`` (B, H, T, Dh) by the angles of :class:`RotaryEmbedding` (their cosines and sines, (B, 1, T, Dh))."""
    return (x * cos + _rotate_half(x) * sin).to(x.dtype)


# --------------------------------------------------------------------------------------------------------------------
# 3.4 Embeddings
# --------------------------------------------------------------------------------------------------------------------


def apply_dropout(dropout: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """``dropout(x)``; not the paper but a speed-up: where dropout is the identity (inference, ``p = 0``) the module is
    not called at all, which saves a call on every sub-layer of every decoding step."""
    return dropout(x) if dropout.training and dropout.p > 0 else x


class Embeddings(nn.Module):
    """The input of a stack (sections 3.4, 3.5, 5.4): ``Dropout(Embedding(x) * sqrt(d_model) + PE)``.

    ``word_embeddings`` is the learned token table; ``position_embeddings`` the sinusoids, or a learned table
    (``position_embedding_type="learned"``), or nothing with rotary positions, which act inside attention.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.position_embedding_type = config.position_embedding_type
        if config.position_embedding_type == "learned":
            self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.d_model)
        elif config.position_embedding_type == "sinusoidal":
            self.position_embeddings = SinusoidalPositionalEncoding(config.d_model)
        else:
            self.position_embeddings = None
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids: torch.Tensor | None, position_ids: torch.Tensor,
                inputs_embeds: torch.Tensor | None = None, num_positions: int | None = None) -> torch.Tensor:
        # input_ids, position_ids: (B, T), or inputs_embeds: rows of the table (B, T, D)  ->  (B, T, D);
        # num_positions: the adapter's bound on the position ids (with a cache, past + T), so that the sinusoid table
        # is sized without reading the ids from the device; None: T
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        x = inputs_embeds * self.embed_scale
        if self.position_embedding_type == "learned":
            x = x + self.position_embeddings(position_ids)
        elif self.position_embedding_type == "sinusoidal":
            table_length = num_positions or position_ids.shape[-1]
            x = x + self.position_embeddings(position_ids, table_length).to(x.dtype)
        return apply_dropout(self.dropout, x)


# --------------------------------------------------------------------------------------------------------------------
# 3.2 Attention
# --------------------------------------------------------------------------------------------------------------------


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, may_attend: MayAttend = None,
              dropout: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention (section 3.2.1): ``softmax(Q K^T / sqrt(d_k)) V``, for all heads at once.

    query: (B, H, T, Dh); key, value: (B, H, S, Dh); may_attend: True where query t may attend to key s. Returns the
    output (B, H, T, Dh) and the attention weights (B, H, T, S), each row a probability distribution over the keys.
    """
    scores = torch.matmul(query, key.transpose(-1, -2)) * query.shape[-1] ** -0.5  # (B, H, T, S)
    if may_attend is not None:  # "masking out": the most negative finite number (a row that sees nothing: not NaN)
        scores = scores.masked_fill(~may_attend, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)  # (B, H, T, S)
    if dropout > 0:
        weights = nn.functional.dropout(weights, p=dropout)
    return torch.matmul(weights, value), weights  # (B, H, T, Dh)


class MultiHeadAttention(nn.Module):
    """Multi-head attention (section 3.2.2): ``Concat(head_1, ..., head_h) W^O``, ``head_i = Attention(Q W_i^Q,
    K W_i^K, V W_i^V)``. One class for the paper's three uses (3.2.3): encoder self-attention, masked decoder
    self-attention, and encoder-decoder attention, whose keys and values come from the encoder output (``memory``).
    """

    def __init__(self, config: TransformerConfig, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads  # d_k = d_v = d_model / h
        self.dropout = config.attention_dropout  # on the attention weights
        bias = config.attention_bias and config.bias  # bias=False: no bias anywhere (Cramming)
        self.q_proj = nn.Linear(config.d_model, config.d_model, bias=bias)  # W^Q of every head, side by side
        self.k_proj = nn.Linear(config.d_model, config.d_model, bias=bias)  # W^K
        self.v_proj = nn.Linear(config.d_model, config.d_model, bias=bias)  # W^V
        self.out_proj = nn.Linear(config.d_model, config.d_model, bias=bias)  # W^O

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        # (B, L, D) -> (B, L, H, Dh) -> (B, H, L, Dh)
        return x.view(*x.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)

    def keys_values(self, memory: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``K = memory W^K`` (turned by rotary positions, if any) and ``V = memory W^V``: (B, H, S, Dh) each. A method
        of its own because the adapter overrides it to keep generate()'s keys and values of earlier steps."""
        key = self.split_heads(self.k_proj(memory))
        value = self.split_heads(self.v_proj(memory))
        return (key if rotary is None else apply_rotary(key, *rotary)), value

    def kernel(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: MayAttend,
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention formula for all heads: (B, T, H, Dh) and the weights (B, H, T, S). A method of its own because
        the adapter overrides it to run fused kernels (sdpa, flex attention) instead of the formula."""
        output, weights = attention(query, key, value, mask, self.dropout if self.training else 0.0)
        return output.transpose(1, 2), weights

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: MayAttend,
                rotary: tuple[torch.Tensor, torch.Tensor] | None = None, **cache) -> tuple[torch.Tensor, torch.Tensor]:
        # x: (B, T, D), where the queries come from; memory: (B, S, D), where the keys and values come from (x itself
        # in self-attention); cache: empty here, the adapter's generate() cache for its keys_values
        query = self.split_heads(self.q_proj(x))  # (B, H, T, Dh)
        if rotary is not None:
            query = apply_rotary(query, *rotary)
        key, value = self.keys_values(memory, rotary, **cache)  # (B, H, S, Dh)
        output, weights = self.kernel(query, key, value, mask)  # (B, T, H, Dh), (B, H, T, S)
        return self.out_proj(output.reshape(*x.shape[:-1], -1)), weights  # concatenate the heads: (B, T, D)


# --------------------------------------------------------------------------------------------------------------------
# 3.3 Feed-forward network, 3.1 residual connection and layer normalisation
# --------------------------------------------------------------------------------------------------------------------


class FeedForward(nn.Module):
    """Position-wise feed-forward network (section 3.3): ``FFN(x) = max(0, x W1 + b1) W2 + b2`` (or GELU)."""

    def __init__(self, config: TransformerConfig, ffn_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, ffn_dim, bias=config.bias)  # W1, b1 (bias=False: x W1, as in Cramming)
        self.activation = nn.ReLU() if config.activation_function == "relu" else nn.GELU()
        self.activation_dropout = nn.Dropout(config.activation_dropout)
        self.fc2 = nn.Linear(ffn_dim, config.d_model, bias=config.bias)  # W2, b2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(x)  # (B, T, d_ff)
        if isinstance(self.activation, nn.ReLU) and not hidden.requires_grad:  # not the paper but a memory saving:
            hidden = hidden.relu_()  # in place, no second (B, T, d_ff) tensor (under autograd backward would copy it)
        else:
            hidden = self.activation(hidden)  # max(0, .)
        return self.fc2(apply_dropout(self.activation_dropout, hidden))  # (B, T, D)


class Residual(nn.Module):
    """The residual connection around every sub-layer (sections 3.1, 5.4): ``LayerNorm(x + Dropout(Sublayer(x)))``;
    with ``pre_layer_norm``, ``x + Dropout(Sublayer(LayerNorm(x)))`` (more stable to train)."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.pre_layer_norm = config.pre_layer_norm
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:
        if self.pre_layer_norm:
            return x + apply_dropout(self.dropout, sublayer(self.layer_norm(x)))
        return self.layer_norm(x + apply_dropout(self.dropout, sublayer(x)))


# --------------------------------------------------------------------------------------------------------------------
# 3.1 Encoder and decoder
# --------------------------------------------------------------------------------------------------------------------


class EncoderLayer(nn.Module):
    """Encoder layer (section 3.1): multi-head self-attention, then the feed-forward network, each in a residual."""

    attention_class = MultiHeadAttention  # the adapter's subclass adds transformers' kernels

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attn = self.attention_class(config, config.encoder_attention_heads)
        self.self_attn_residual = Residual(config)
        self.feed_forward = FeedForward(config, config.encoder_ffn_dim)
        self.feed_forward_residual = Residual(config)

    def forward(self, x: torch.Tensor, mask: MayAttend, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
                ) -> torch.Tensor:
        # x: (B, S, D); mask: which source positions each may attend to  ->  (B, S, D)
        x = self.self_attn_residual(x, lambda h: self.self_attn(h, h, mask, rotary)[0])
        return self.feed_forward_residual(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Decoder layer (section 3.1): masked self-attention, attention over the encoder output, feed-forward network."""

    attention_class = MultiHeadAttention  # the adapter's subclass adds transformers' kernels and generate()'s cache

    def __init__(self, config: TransformerConfig):
        super().__init__()
        heads = config.decoder_attention_heads
        self.self_attn = self.attention_class(config, heads)
        self.self_attn_residual = Residual(config)
        self.cross_attn = self.attention_class(config, heads)
        self.cross_attn_residual = Residual(config)
        self.feed_forward = FeedForward(config, config.decoder_ffn_dim)
        self.feed_forward_residual = Residual(config)

    def forward(self, x: torch.Tensor, memory: torch.Tensor, self_mask: MayAttend, memory_mask: MayAttend,
                rotary: tuple[torch.Tensor, torch.Tensor] | None = None, **cache) -> torch.Tensor:
        # x: (B, T, D); memory: (B, S, D) the encoder output; cache: empty here, the adapter's for both attentions
        x = self.self_attn_residual(x, lambda h: self.self_attn(h, h, self_mask, rotary, **cache)[0])
        x = self.cross_attn_residual(x, lambda h: self.cross_attn(h, memory, memory_mask, **cache)[0])
        return self.feed_forward_residual(x, self.feed_forward)


class Encoder(nn.Module):
    """The encoder (section 3.1): the embedded source through N identical layers (then, pre-LN, a LayerNorm)."""

    layer_class = EncoderLayer  # the adapter's subclass adds gradient checkpointing

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config  # the adapter reads it
        self.embeddings = Embeddings(config)
        head_dim = config.d_model // config.encoder_attention_heads
        rope = config.position_embedding_type == "rope"
        self.rotary = RotaryEmbedding(head_dim, config.rope_theta) if rope else None
        self.layers = nn.ModuleList(self.layer_class(config) for _ in range(config.encoder_layers))
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.pre_layer_norm else None

    def forward(self, input_ids: torch.Tensor | None, position_ids: torch.Tensor, mask: MayAttend,
                inputs_embeds: torch.Tensor | None = None) -> torch.Tensor:
        # input_ids, position_ids: (B, S); mask: padding_mask(attention_mask)  ->  (B, S, D)
        x = self.embeddings(input_ids, position_ids, inputs_embeds)
        rotary = self.rotary(position_ids) if self.rotary is not None else None
        for layer in self.layers:
            x = layer(x, mask, rotary)
        return x if self.layer_norm is None else self.layer_norm(x)


class Decoder(nn.Module):
    """The decoder (section 3.1): the embedded target through N identical layers that also attend to the encoder
    output (``memory``); it predicts token i + 1 from tokens up to i (:func:`causal_mask`)."""

    layer_class = DecoderLayer  # the adapter's subclass adds gradient checkpointing

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config  # the adapter reads it
        self.embeddings = Embeddings(config)
        head_dim = config.d_model // config.decoder_attention_heads
        rope = config.position_embedding_type == "rope"
        self.rotary = RotaryEmbedding(head_dim, config.rope_theta) if rope else None
        self.layers = nn.ModuleList(self.layer_class(config) for _ in range(config.decoder_layers))
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.pre_layer_norm else None

    def forward(self, input_ids: torch.Tensor | None, memory: torch.Tensor, self_mask: MayAttend,
                memory_mask: MayAttend, position_ids: torch.Tensor, inputs_embeds: torch.Tensor | None = None,
                num_positions: int | None = None, **cache) -> torch.Tensor:
        # input_ids, position_ids: (B, T); memory: (B, S, D); self_mask: padding & causal (B, 1, T, T);
        # memory_mask: the source's padding_mask (B, 1, 1, S)  ->  (B, T, D); num_positions and cache: the
        # adapter's (see Embeddings and MultiHeadAttention)
        x = self.embeddings(input_ids, position_ids, inputs_embeds, num_positions)
        rotary = self.rotary(position_ids) if self.rotary is not None else None
        for layer in self.layers:
            x = layer(x, memory, self_mask, memory_mask, rotary, **cache)
        return x if self.layer_norm is None else self.layer_norm(x)


def positions_skipping_padding(attention_mask: torch.Tensor) -> torch.Tensor:
    """Each token's position, (B, S) -> (B, S): the number of real tokens before it, so that padding (0 in the mask;
    not in the paper) on either side never moves a sentence. Example: ``[[0, 0, 1, 1, 1]] -> [[0, 0, 0, 1, 2]]``."""
    return (attention_mask.bool().long().cumsum(-1) - 1).clamp(min=0)


def padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Padding is never attended to: a (B, S) mask of 1 (a token) and 0 (padding) -> may attend, (B, 1, 1, S)."""
    return attention_mask.bool()[:, None, None, :]


def causal_mask(query_length: int, key_length: int, device: torch.device | None = None) -> torch.Tensor:
    """The decoder's mask (section 3.2.3): position i may attend to positions up to i, not to the future,
    (1, 1, T, S). With S - T earlier positions already decoded, query i is position S - T + i.

    Example: ``causal_mask(3, 3)[0, 0]`` is ``[[1, 0, 0], [1, 1, 0], [1, 1, 1]]`` (as booleans).
    """
    seen = torch.ones(query_length, key_length, dtype=torch.bool, device=device).tril(key_length - query_length)
    return seen[None, None]  # (1, 1, T, S)


# --------------------------------------------------------------------------------------------------------------------
# 3.4 Output: the pre-softmax linear transformation; teacher forcing
# --------------------------------------------------------------------------------------------------------------------


def pre_softmax_linear(config: TransformerConfig) -> nn.Linear:
    """The projection of the decoder output to one logit per token (section 3.4), (B, T, D) -> (B, T, V); its weight
    matrix is the token embedding table (``tie_word_embeddings``), as in the paper."""
    return nn.Linear(config.d_model, config.vocab_size, bias=False)


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing: the decoder reads the target shifted one step right, after a start token (``-100``, the
    loss's "ignore", becomes padding). Example: ``[[5, 6, 2]] -> [[1, 5, 6]]`` with start token 1."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


# --------------------------------------------------------------------------------------------------------------------
# Figure 1: the whole model
# --------------------------------------------------------------------------------------------------------------------


class Transformer(nn.Module):
    """Figure 1: the encoder reads the source once; the decoder reads the target so far and the encoder's output; the
    pre-softmax linear turns each decoder vector into one score (logit) per token of the vocabulary.

    The parameter names are a checkpoint's without its ``model.`` prefix (``encoder.*``, ``decoder.*``, ``lm_head``),
    so saved weights load by name: ``load_state_dict({name.removeprefix("model."): weight ...}, strict=False)``, where
    only the tied copies of the token table are missing (they are the same tensor).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.lm_head = pre_softmax_linear(config)
        table = self.encoder.embeddings.word_embeddings  # the source's token embeddings, (V, D)
        if config.tie_word_embeddings:  # section 3.4: both embeddings and the pre-softmax linear share one matrix
            self.lm_head.weight = self.decoder.embeddings.word_embeddings.weight = table.weight

    def encode(self, source: torch.Tensor, source_mask: torch.Tensor | None = None) -> torch.Tensor:
        # source: (B, S) token ids; source_mask: (B, S), 1 for a token and 0 for padding (None: no padding)
        if source_mask is None:
            return self.encoder(source, torch.arange(source.shape[1], device=source.device).expand_as(source), None)
        return self.encoder(source, positions_skipping_padding(source_mask), padding_mask(source_mask))  # (B, S, D)

    def decode(self, memory: torch.Tensor, source_mask: torch.Tensor | None, target: torch.Tensor) -> torch.Tensor:
        # memory: (B, S, D) the encoder output; target: (B, T) the tokens so far, the start token first  ->  (B, T, D)
        length = target.shape[1]
        positions = torch.arange(length, device=target.device).expand_as(target)  # (B, T)
        memory_mask = None if source_mask is None else padding_mask(source_mask)  # (B, 1, 1, S)
        return self.decoder(target, memory, causal_mask(length, length, target.device), memory_mask, positions)

    def forward(self, source: torch.Tensor, target: torch.Tensor, source_mask: torch.Tensor | None = None,
                ) -> torch.Tensor:
        # source: (B, S); target: (B, T), the decoder's input (teacher forcing: shift_tokens_right(labels))
        return self.lm_head(self.decode(self.encode(source, source_mask), source_mask, target))  # logits (B, T, V)

    @torch.no_grad()
    def greedy_decode(self, source: torch.Tensor, source_mask: torch.Tensor | None = None,
                      max_new_tokens: int = 20) -> torch.Tensor:
        """Write the output one token at a time, each time the most likely one (the annotated Transformer's
        ``greedy_decode``): (B, S) -> (B, 1 + at most ``max_new_tokens``), the start token first, as ``generate()``
        returns it. A sentence that has written ``</s>`` gets padding after it; the loop stops when all have. Each step
        runs the decoder on the whole target again (``generate()`` keeps the earlier steps' keys and values instead).

        Example: ``model.greedy_decode(ids)[0]`` is ``[1, 412, 9, ..., 2]`` (``<s>`` ... ``</s>``).
        """
        config = self.config
        memory = self.encode(source, source_mask)  # (B, S, D): the encoder runs once
        target = torch.full((source.shape[0], 1), config.decoder_start_token_id, device=source.device)  # (B, 1)
        finished = torch.zeros(source.shape[0], dtype=torch.bool, device=source.device)  # (B,)
        for _ in range(max_new_tokens):
            logits = self.lm_head(self.decode(memory, source_mask, target)[:, -1])  # the last position: (B, V)
            next_token = logits.argmax(dim=-1).masked_fill(finished, config.pad_token_id)  # (B,)
            target = torch.cat([target, next_token[:, None]], dim=1)  # (B, T + 1)
            finished |= next_token == config.eos_token_id
            if finished.all():
                break
        return target
