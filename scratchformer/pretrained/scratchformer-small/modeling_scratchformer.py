"""Scratchformer as a transformers model: the adapter around the paper's Transformer (``paper_scratchformer.py``,
read it first), whose classes it subclasses, so parameter names and checkpoints are the paper file's. It adds the
one input guard, transformers' attention kernels and their masks, generate()'s key/value cache, hidden states and
attention weights by forward hooks, and the task heads (map: docs/architecture.md, "The model core").
``save_pretrained`` copies this file and its siblings next to the weights (remote code): it imports only torch,
transformers and those siblings. Shapes in comments: B batch, T target, S source length, D d_model, V vocabulary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import numbers
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import transformers

# Hub users run this file with their transformers: name the floor (5.4, pyproject.toml) before an import below fails
# with a bare "cannot import name ..." (4.x). Standard library and transformers.__version__ only.
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
from transformers.utils.generic import can_return_tuple

from .card_scratchformer import push_with_model_card
from .configuration_scratchformer import ScratchformerConfig
from .paper_scratchformer import (
    Decoder,
    DecoderLayer,
    Embeddings,
    Encoder,
    EncoderLayer,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    positions_skipping_padding,
    pre_softmax_linear,
    shift_tokens_right,
)

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

logger = logging.get_logger(__name__)

# ------------------------------------- the input guard: what enters the encoder or the decoder; the cache's two names


def _check_input(stack: nn.Module, kernel: str, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
                 attention_mask: torch.Tensor | None, cache: EncoderDecoderCache | None = None,
                 encoder_hidden_states: torch.Tensor | None = None, encoder_attention_mask: torch.Tensor | None = None,
                 ) -> tuple[int, int, torch.device]:
    """The model's one input guard: what torch would fail on obscurely (a CUDA device assert names nothing) or
    compute wrong in silence. Returns the batch size, the length and the device of the input."""
    config, side = stack.config, "decoder" if isinstance(stack, Decoder) else "encoder"
    prefix = "decoder_" if side == "decoder" else ""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError(f"pass exactly one of {prefix}input_ids or {prefix}inputs_embeds to the {side}")
    if input_ids is not None:
        _check_ids(f"{prefix}input_ids", input_ids, config.vocab_size)
    else:
        _check_embeds(f"{prefix}inputs_embeds", inputs_embeds, stack)
    given = input_ids if input_ids is not None else inputs_embeds
    (batch, length), later_step = given.shape[:2], cache is not None and bool(cache.is_updated.get(0, False))
    if cache is not None and cache.is_compileable:  # every slot of a static cache is a key (_static_cache_layout)
        keys = cache.self_attention_cache.get_mask_sizes(length, 0)[0]
        if attention_mask is None or attention_mask.dim() != 4:
            _check_mask(f"{prefix}attention_mask", attention_mask, batch, (keys,))
        elif attention_mask.shape[-2:] != (length, keys):  # the 4-D mask generate() makes
            raise ValueError(f"decoder_attention_mask must have shape (batch, {keys}) or (batch, 1, {length}, {keys}) "
                             f"with a static cache of {keys} slots, got {tuple(attention_mask.shape)}")
    else:  # with a growing cache, a decoder mask covers the new tokens or all of them
        keys = length + (cache.get_seq_length() if cache is not None else 0)
        _check_mask(f"{prefix}attention_mask", attention_mask, batch, (length, keys))
    if config.position_embedding_type == "learned" and keys > config.max_position_embeddings:
        raise ValueError(f"the {side} input has {keys} tokens but learned positions stop at max_position_embeddings="
                         f"{config.max_position_embeddings}; shorten it (tokenizer truncation=True, or generate fewer "
                         "tokens) or use sinusoidal or rope positions")
    _check_kernel(config, side, kernel, given.device)
    if side == "decoder":
        if encoder_hidden_states is None or encoder_hidden_states.shape[0] != batch:
            raise ValueError(f"the decoder inputs have batch size {batch} and need encoder_hidden_states of that "
                             "batch (run the encoder first)")
        _check_mask("encoder attention_mask", encoder_attention_mask, batch, (encoder_hidden_states.shape[1],),
                    values=not later_step)  # the same mask at every decoding step: its values were checked
    return batch, length, given.device


def _check_kernel(config: ScratchformerConfig, side: str, kernel: str, device: torch.device) -> None:
    """flex attention's GPU kernel needs a head dimension of at least 16 (it fails deep inside compilation)."""
    heads = getattr(config, f"{side}_attention_heads")
    if kernel == "flex_attention" and device.type not in ("cpu", "mps", "meta") and config.d_model // heads < 16:
        raise ValueError(f"flex_attention on {device.type} needs a head dimension of at least 16 (torch's kernel "
                         f"there), but this {side} has d_model {config.d_model} / {heads} heads = "
                         f"{config.d_model // heads}: use attn_implementation='sdpa', or fewer heads")


def _check_ids(name: str, ids: torch.Tensor, vocab_size: int) -> None:
    """Token ids are a non-empty ``(batch, length)`` tensor, each in ``0..vocab_size - 1`` (a float or bool tensor:
    torch's embedding names the dtypes it takes)."""
    if not isinstance(ids, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}; "
                         f"call the tokenizer with return_tensors='pt'")
    if ids.dim() != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise ValueError(f"{name} must have shape (batch, sequence_length), not empty, got shape {tuple(ids.shape)}; "
                         f"for a single sequence use {name}[None]")
    _check_values(ids, lambda: ((ids >= 0) & (ids < vocab_size)).all(),
                  f"{name} has token ids outside 0..{vocab_size - 1} (the vocabulary has {vocab_size} tokens); was it "
                  "made by a different tokenizer?", lambda: f" Its ids span [{int(ids.min())}, {int(ids.max())}].")


def _check_values(tensor: torch.Tensor, ok: Callable[[], torch.Tensor], message: str,
                  detail: Callable[[], str] = str) -> None:
    """Unless ``ok()``, ``ValueError(message + detail())`` on the CPU, a device-side assert on an accelerator (the
    host never waits for the device), nothing under compile or on meta: the one place that reads input values."""
    if torch.compiler.is_compiling() or tensor.device.type == "meta":
        return
    if tensor.device.type != "cpu":
        torch._assert_async(ok(), message)
    elif not ok():
        raise ValueError(message + detail())


def _check_embeds(name: str, embeds: torch.Tensor, stack: nn.Module) -> None:
    """Embeddings are ``(batch, length, d_model)`` floats of the model's dtype (or any float under autocast)."""
    d_model, dtype = stack.config.d_model, stack.embeddings.word_embeddings.weight.dtype
    if not isinstance(embeds, torch.Tensor) or embeds.dim() != 3 or embeds.shape[-1] != d_model or not embeds.numel():
        shape = tuple(embeds.shape) if isinstance(embeds, torch.Tensor) else type(embeds).__name__
        raise ValueError(f"{name} must have shape (batch, sequence_length, d_model={d_model}), not empty, got {shape}")
    if embeds.dtype != dtype and not (embeds.is_floating_point() and torch.is_autocast_enabled(embeds.device.type)):
        raise ValueError(f"{name} has dtype {embeds.dtype} but the model computes in {dtype}: convert them with "
                         f"{name}.to({dtype}) (or run under torch.autocast)")


def _check_mask(name: str, mask: torch.Tensor | None, batch: int, lengths: tuple[int, ...], values: bool = True,
                ) -> None:
    """A padding mask is ``(batch, length)`` of 1 (a real token) and 0 (padding), or booleans; 0.5, 2 or -1 mean
    nothing, so they are refused rather than read as ``mask.bool()``. ``values=False``: the shape only."""
    if mask is None:
        return
    if not isinstance(mask, torch.Tensor) or mask.dim() != 2 or mask.shape[0] != batch or mask.shape[1] not in lengths:
        shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        expected = " or ".join(f"({batch}, {n})" for n in dict.fromkeys(lengths))
        raise ValueError(f"{name} must have shape {expected} to match the input ids, got {shape}")
    if values and mask.dtype != torch.bool:
        _check_values(mask, lambda: ((mask == 0) | (mask == 1)).all(),
                      f"{name} must hold only 1 (a real token) and 0 (padding), or booleans",
                      lambda: f"; it holds {sorted({float(v) for v in mask.unique()[:6].tolist()})}")


# What the Trainer (and some generate() versions) pass that this model has no use for: it reads positions from the cache.
_HARMLESS_KWARGS = frozenset({"num_items_in_batch", "cache_position"})


def _warn_ignored(model: nn.Module, kwargs: dict) -> None:
    """Say which keyword arguments ``forward`` took and did not use: an argument that a new transformers version
    renames (as 5.24 renamed the cache) must not be dropped in silence."""
    if ignored := sorted(set(kwargs) - _HARMLESS_KWARGS):
        logger.warning_once(f"{type(model).__name__}.forward ignores {', '.join(ignored)}: it has no such argument")


def _flag(value: bool | None, config: ScratchformerConfig, name: str) -> bool:
    """An ``output_*`` / ``use_cache`` argument, or the config's value where it is ``None``."""
    return bool(value) if value is not None else bool(getattr(config, name, False))


# transformers 5.24 renamed the key/value cache ``past_key_values`` -> ``cache`` (outputs, generate(), forward). This
# file travels with checkpoints and runs on both sides: inside it the cache is ``cache``; ``forward`` takes either.
CACHE_NAME = "cache" if "cache" in {field.name for field in dataclasses.fields(Seq2SeqLMOutput)} else "past_key_values"


def _one_cache(cache: Cache | None, past_key_values: Cache | None, model: nn.Module | None = None) -> Cache | None:
    """The key/value cache given under either name; from 5.24 on, ``past_key_values`` to a ``model`` warns as
    transformers' own models do (their ``FutureWarning``)."""
    if past_key_values is not None and model is not None and CACHE_NAME == "cache":
        def forward(self: nn.Module, **kwargs) -> None:  # what the warning names: "<model class>.forward"
            """Nothing: transformers' ``deprecate_kwarg`` around it warns (not on ``forward``: its signature)."""
        deprecate_kwarg("past_key_values", "6.0.0", additional_message="Use `cache` instead.")(forward)(
            model, past_key_values=past_key_values)
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("pass the key/value cache once, as cache= or as past_key_values= (the older name), not both")
    cache = cache if cache is not None else past_key_values
    if cache is not None and not isinstance(cache, EncoderDecoderCache):
        raise ValueError(f"the key/value cache must be a transformers EncoderDecoderCache (the decoder's self-attention "
                         f"and cross-attention caches), got {type(cache).__name__}; pass none with use_cache=True "
                         "to start one")
    return cache


# ----------------------------- masks: the one place a "may attend" mask takes a kernel's form; output recording


class KernelMask(NamedTuple):
    """A "may attend" mask in the form one kernel reads: made once per stack call, passed on unchanged."""

    kernel: str  # the attention implementation that runs: "eager" (the paper's formula), "sdpa", "flex_attention"...
    mask: torch.Tensor | BlockMask | None  # None: every key may be attended to (or, with is_causal, every earlier key)
    is_causal: bool = False  # sdpa only: apply the causal mask itself


def _render(kernel: str, may_attend: torch.Tensor | None, batch: int, query_length: int) -> KernelMask:
    """A "may attend" mask ``(B or 1, 1, T or 1, S)`` in the form ``kernel`` reads: the boolean itself for the eager
    formula and sdpa; for flex attention a ``BlockMask``, with which it skips whole blocks of masked keys."""
    if may_attend is not None and kernel == "flex_attention":
        return KernelMask(kernel, _flex_block_mask(may_attend, batch, query_length))
    return KernelMask(kernel, may_attend)


def _flex_block_mask(may_attend: torch.Tensor, batch: int, query_length: int) -> BlockMask:
    """flex attention's ``BlockMask`` of a mask ``(B or 1, 1, T or 1, S)``, made for every row and query: torch
    2.13's CPU flex fails on a tensor mask in a ``score_mod`` and on one-row masks (docs/performance.md)."""
    from torch.nn.attention.flex_attention import create_block_mask

    allowed = may_attend.expand(batch, 1, query_length, -1)  # (B, 1, T, S)

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return allowed[b, 0, q, k]

    return create_block_mask(mask_mod, batch, None, query_length, allowed.shape[-1], device=may_attend.device)


def _mask_for(kernel: str, padding: torch.Tensor | None, batch: int, query_length: int, key_length: int,
              device: torch.device, *, causal: bool) -> KernelMask:
    """The padding (and, for decoder self-attention, causal) mask of one attention without a cache or with a growing
    one, in ``kernel``'s form: ``None`` where nothing is masked, sdpa's own ``is_causal`` where it can."""
    if (padding is not None and padding.device.type == "cpu" and not torch.compiler.is_compiling()
            and bool(padding.all())):
        padding = None  # nothing is padded (checked on the CPU only, where it costs no synchronisation)
    causal = causal and query_length > 1  # a single new token may see every key
    if padding is None and not causal:
        return KernelMask(kernel, None)
    if padding is None and kernel == "sdpa" and key_length == query_length:
        return KernelMask(kernel, None, is_causal=True)
    may_attend = padding_mask(padding) if padding is not None else None  # (B, 1, 1, S)
    if causal:
        future = causal_mask(query_length, key_length, device)  # (1, 1, T, S)
        may_attend = future if may_attend is None else may_attend & future  # (B or 1, 1, T, S)
    return _render(kernel, may_attend, batch, query_length)


def _dynamic_cache_layout(kernel: str, attention_mask: torch.Tensor | None, cache: EncoderDecoderCache | None,
                          batch: int, length: int, device: torch.device) -> tuple[torch.Tensor, KernelMask, int]:
    """Positions ``(B, T)``, the self-attention mask and the number of keys ``S`` for no cache or a growing one:
    the keys are the ``past`` cached ones plus these ``T``."""
    past = cache.get_seq_length() if cache is not None else 0
    total = past + length
    if attention_mask is not None and attention_mask.shape[1] == length and past:
        attention_mask = None  # a mask of the new tokens only says nothing about the cached ones
    position_ids = _position_ids(attention_mask, batch, length, past, device)
    return position_ids, _mask_for(kernel, attention_mask, batch, length, total, device, causal=True), total


def _static_cache_layout(kernel: str, attention_mask: torch.Tensor | None, cache: EncoderDecoderCache, batch: int,
                         length: int, device: torch.device) -> tuple[torch.Tensor, KernelMask, int]:
    """Positions ``(B, T)``, the self-attention mask and ``S`` for a static cache of ``S`` slots, with fixed shapes
    and no host synchronisation (docs/performance.md): query ``i`` may attend to a slot at or before ``past + i``,
    which masks the empty slots and the future alike (section 3.2.3)."""
    past = cache.get_seq_length()  # 0-d tensor once the cache is filled, 0 before
    total = cache.self_attention_cache.get_mask_sizes(length, 0)[0]  # S, a Python int
    query_positions = torch.arange(length, device=device) + past  # (T,)
    may_attend = (torch.arange(total, device=device)[None, :] <= query_positions[:, None])[None, None]  # (1, 1, T, S)
    if attention_mask is not None and attention_mask.dim() == 2:
        may_attend = may_attend & padding_mask(attention_mask)
    elif attention_mask is not None:  # generate()'s 4-D mask, True or 0 where a query may attend
        may_attend = may_attend & (attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0)
    return query_positions.expand(batch, length), _render(kernel, may_attend, batch, length), total


def _position_ids(padding_mask: torch.Tensor | None, batch: int, length: int, past_length: int,
                  device: torch.device) -> torch.Tensor:
    """Positions of the current tokens, ``(B, T)``. With a padding mask, padding does not count: a left-padded
    sentence gets the same positions as the sentence alone, so padding never changes the real tokens' outputs."""
    if padding_mask is None:
        return torch.arange(past_length, past_length + length, device=device).expand(batch, length)
    return positions_skipping_padding(padding_mask)[:, -length:]  # of (B, past + T) or (B, T)


@contextlib.contextmanager
def _recording(stack: nn.Module, output_hidden_states: bool | None, output_attentions: bool,
               ) -> Iterator[dict[str, list]]:
    """Forward hooks that collect, during one call of ``stack``, the hidden states and attention weights asked for
    (transformers' ``capture_outputs`` differs between 5.4 and 5.24: docs/architecture.md)."""
    recorded: dict[str, list] = {}
    hooks = []

    def record(name: str, module: nn.Module, index: int | None = None) -> None:
        store = recorded.setdefault(name, [])
        hooks.append(module.register_forward_hook(
            lambda _module, _inputs, output: store.append(output if index is None else output[index])))

    if _flag(output_hidden_states, stack.config, "output_hidden_states"):
        for module in (stack.embeddings, *stack.layers):
            record("hidden_states", module)
    if output_attentions:
        for layer in stack.layers:
            record("attentions", layer.self_attn, 1)
            if hasattr(layer, "cross_attn"):
                record("cross_attentions", layer.cross_attn, 1)
    try:
        yield recorded
    finally:
        for hook in hooks:
            hook.remove()


def _recorded(recorded: dict[str, list], last_hidden_state: torch.Tensor) -> dict[str, tuple]:
    """The recorded outputs as tuples; the last hidden state is the stack's output (pre-LN: after its LayerNorm)."""
    outputs = {name: tuple(values) for name, values in recorded.items()}
    if "hidden_states" in outputs:
        outputs["hidden_states"] = (*outputs["hidden_states"][:-1], last_hidden_state)
    return outputs


# ------------------ the paper's attention, layers and stacks, with transformers' kernels, cache and checkpointing


class ScratchformerAttention(MultiHeadAttention):
    """The paper's multi-head attention, with the kernels of transformers' attention interface (``sdpa`` by default,
    ``flex_attention``, or ``eager``: the paper's formula) and the key/value cache of ``generate()``."""

    layer_idx = 0  # set by the decoder: where the cache keeps this layer's keys and values
    is_cross_attention = False  # set by the decoder for its encoder-decoder attentions

    def keys_values(self, memory: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
                    cache: EncoderDecoderCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The paper's keys and values, through the cache: self-attention appends this step's and gets them all back;
        encoder-decoder attention projects the encoder output once (step 1) and reuses it, as it does not change."""
        if cache is None:
            return super().keys_values(memory, rotary)
        if not self.is_cross_attention:
            return cache.self_attention_cache.update(*super().keys_values(memory, rotary), self.layer_idx)
        if cache.is_updated.get(self.layer_idx):
            layer = cache.cross_attention_cache.layers[self.layer_idx]
            return layer.keys, layer.values  # (B, H, S, Dh)
        cache.is_updated[self.layer_idx] = True
        return cache.cross_attention_cache.update(*super().keys_values(memory), self.layer_idx)

    def kernel(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               mask: KernelMask | torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The kernel ``mask`` was rendered for; a plain "may attend" tensor (or ``None``) runs the paper's formula."""
        if not isinstance(mask, KernelMask):
            mask = KernelMask("eager", mask)
        if mask.kernel == "eager":
            return super().kernel(query, key, value, mask.mask)
        attend: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(mask.kernel, None)
        return attend(self, query, key, value, mask.mask, is_causal=mask.is_causal, scaling=self.head_dim**-0.5,
                      dropout=self.dropout if self.training else 0.0)


class ScratchformerEncoderLayer(GradientCheckpointingLayer, EncoderLayer):
    """The paper's encoder layer, with transformers' gradient checkpointing and attention kernels."""

    attention_class = ScratchformerAttention


class ScratchformerDecoderLayer(GradientCheckpointingLayer, DecoderLayer):
    """The paper's decoder layer, with transformers' gradient checkpointing, attention kernels and cache."""

    attention_class = ScratchformerAttention


class ScratchformerEncoder(Encoder):
    """The paper's encoder with input checks, positions that skip padding, masks for the kernel and the outputs
    transformers callers ask for (``output_hidden_states``, ``output_attentions``, ``return_dict``)."""

    layer_class = ScratchformerEncoderLayer

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
    ) -> BaseModelOutput:
        """input_ids, attention_mask: (B, S); ``attention_mask`` is 1 for real tokens and 0 for padding."""
        config = self.config
        output_attentions = _flag(output_attentions, config, "output_attentions")
        kernel = "eager" if output_attentions else config._attn_implementation  # only eager makes weights
        batch, length, device = _check_input(self, kernel, input_ids, inputs_embeds, attention_mask)
        mask = _mask_for(kernel, attention_mask, batch, length, length, device, causal=False)
        position_ids = _position_ids(attention_mask, batch, length, 0, device)

        with _recording(self, output_hidden_states, output_attentions) as recorded:
            hidden_states = super().forward(input_ids, position_ids, mask, inputs_embeds)
        return BaseModelOutput(last_hidden_state=hidden_states, **_recorded(recorded, hidden_states))


class ScratchformerDecoder(Decoder):
    """The paper's decoder, as the encoder above, with ``generate()``'s key/value cache: a growing ``DynamicCache``
    (the default) or a preallocated ``StaticCache`` (:func:`_static_cache_layout`)."""

    layer_class = ScratchformerDecoderLayer

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        for index, layer in enumerate(self.layers):  # the cache keeps each layer's keys and values at its index
            layer.self_attn.layer_idx = layer.cross_attn.layer_idx = index
            layer.cross_attn.is_cross_attention = True

    def _cache_for(self, cache: EncoderDecoderCache | None, use_cache: bool) -> EncoderDecoderCache | None:
        """The cache this call fills: the one given, a new one, or none under gradient checkpointing (which runs
        each layer again in the backward pass and would fill it twice)."""
        if use_cache and self.training and torch.is_grad_enabled() and self.layers[0].gradient_checkpointing:
            return None
        if use_cache and cache is None:  # filled as it grows (DynamicCache(config=...) copies the config every call)
            return EncoderDecoderCache(DynamicCache(), DynamicCache())
        return cache

    @can_return_tuple
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
        cache: EncoderDecoderCache | None = None,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """input_ids: (B, T) the tokens of this step (only the new ones when a cache is given);
        attention_mask: (B, T) or (B, past + T) decoder padding; encoder_hidden_states: (B, S, D);
        encoder_attention_mask: (B, S); cache (or past_key_values, its name before transformers 5.24): the keys and
        values of the earlier steps."""
        config = self.config
        use_cache = _flag(use_cache, config, "use_cache")
        cache = self._cache_for(_one_cache(cache, past_key_values), use_cache)
        output_attentions = _flag(output_attentions, config, "output_attentions")
        kernel = "eager" if output_attentions else config._attn_implementation  # only eager makes weights
        batch, length, device = _check_input(self, kernel, input_ids, inputs_embeds, attention_mask, cache,
                                             encoder_hidden_states, encoder_attention_mask)
        layout = _static_cache_layout if cache is not None and cache.is_compileable else _dynamic_cache_layout
        position_ids, self_mask, total = layout(kernel, attention_mask, cache, batch, length, device)
        source_mask = _mask_for(kernel, encoder_attention_mask, batch, length, encoder_hidden_states.shape[1], device,
                                causal=False)

        with _recording(self, output_hidden_states, output_attentions) as recorded:
            hidden_states = super().forward(input_ids, encoder_hidden_states, self_mask, source_mask, position_ids,
                                            inputs_embeds, num_positions=total, cache=cache)
        return BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=hidden_states,
                                                         **{CACHE_NAME: cache if use_cache else None},
                                                         **_recorded(recorded, hidden_states))


# ------------------------------------------------------------------------------ pre-trained model base and policies


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


# safetensors' names of the floating-point dtypes: every weight of a Transformer is one of them.
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})


def safetensors_problem(folder: str | os.PathLike) -> str | None:
    """Why ``folder`` has no weights we may load, or ``None``: the one place of the safetensors-only rule and of
    float weights (``*.weight``, ``*.bias``: an ``int32`` one would load silently converted), read from the headers."""
    names = os.listdir(folder)
    if "model.safetensors" not in names and "model.safetensors.index.json" not in names:
        pickles = sorted(name for name in names if os.path.splitext(name)[1] in PICKLE_SUFFIXES)
        detail = f" (it has {', '.join(pickles)}: pickled weights are never loaded)" if pickles else ""
        return (f"Scratchformer loads weights from safetensors only, and {folder} has no model.safetensors{detail}. "
                "Unpickling a pytorch_model.bin can run arbitrary code: convert the checkpoint where you trust it "
                "(load it, then save_pretrained writes safetensors).")
    files, headers = ["model.safetensors"] if "model.safetensors" in names else [], {}
    try:
        if not files:
            with open(os.path.join(folder, "model.safetensors.index.json"), encoding="utf-8") as handle:
                files = sorted(set(json.load(handle)["weight_map"].values()))
        for file in files:
            with open(os.path.join(folder, file), "rb") as handle:
                size = int.from_bytes(handle.read(8), "little")
                headers[file] = dict(json.loads(handle.read(size)) if 0 < size <= 100_000_000 else {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # an unreadable index or header: transformers' own error, or the integrity checks, name it
    for file, header in headers.items():
        odd = sorted((name, str(entry.get("dtype"))) for name, entry in header.items() if isinstance(entry, dict)
                     and entry.get("dtype") not in FLOAT_DTYPES and name.rsplit(".", 1)[-1] in ("weight", "bias"))
        if odd:
            more = f" and {len(odd) - 1} more" if len(odd) > 1 else ""
            return (f"{os.path.join(folder, file)} holds weights that are not floating-point numbers ({odd[0][0]}: "
                    f"{odd[0][1]}{more}): they would load silently converted. Save the model again with float "
                    "weights (model.float().save_pretrained(...))")
    return None


class ScratchformerPreTrainedModel(PreTrainedModel):
    """Weight initialisation and the Hugging Face plumbing shared by all Scratchformer models."""

    config_class = ScratchformerConfig
    config: ScratchformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["ScratchformerEncoderLayer", "ScratchformerDecoderLayer"]
    _skip_keys_device_placement = ["past_key_values", "cache"]  # the cache's name before and from transformers 5.24
    _supports_sdpa = True
    _supports_attention_backend = True
    _supports_flex_attn = True  # our masks become BlockMasks (_flex_block_mask)

    def post_init(self) -> None:
        """Initialise and tie, then list the tied copies as never saved (one tensor per tie is): ``Trainer`` then
        re-ties them on ``resume_from_checkpoint`` instead of warning that they are "missing"."""
        super().post_init()
        self._keys_to_ignore_on_save = set(self.all_tied_weights_keys) or None

    _auto_classes_also_served = ("AutoModel",)  # auto_map entries a saved folder gets besides its own class

    def __init__(self, config: ScratchformerConfig, *args, **kwargs):
        config.validate_values()  # once, before anything is built: an assignment (config.d_model = 30) is not checked
        super().__init__(config, *args, **kwargs)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.base_model.encoder.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        """The encoder's token table, and the decoder's where there is one and ``tie_word_embeddings`` shares it."""
        self.base_model.encoder.embeddings.word_embeddings = value
        if self.config.tie_word_embeddings and hasattr(self.base_model, "decoder"):
            self.base_model.decoder.embeddings.word_embeddings = value

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as usual, with our ``auto_map`` only (``AutoModel`` too; no foreign entry: unreviewed code), through
        a temporary folder moved into place, so a failed save leaves the earlier one whole. Weights get
        ``config.json``'s permissions (safetensors issue #782); a path that is a file raises (transformers logs)."""
        import shutil
        import tempfile

        if os.path.isfile(save_directory):
            raise NotADirectoryError(f"cannot save the model into {save_directory}: it is a file, not a folder")
        ours = {key: value for key, value in (getattr(self.config, "auto_map", None) or {}).items()
                if AUTO_MAP.get(key) == value}
        self.config.auto_map = {**ours, **{key: AUTO_MAP[key] for key in self._auto_classes_also_served}}
        if not kwargs.get("is_main_process", True):  # writes nothing
            return super().save_pretrained(save_directory, *args, **kwargs)
        os.makedirs(save_directory, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".saving-", dir=save_directory)
        try:
            saved = super().save_pretrained(staging, *args, **kwargs)
            written = sorted(os.listdir(staging))
            config_file = os.path.join(staging, "config.json")
            mode = os.stat(config_file).st_mode & 0o777 if os.path.isfile(config_file) else None
            for name in written:
                if name.endswith(".safetensors") and mode is not None:
                    os.chmod(os.path.join(staging, name), mode)
                os.replace(os.path.join(staging, name), os.path.join(save_directory, name))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if any(name.endswith(".safetensors") for name in written):
            for name in os.listdir(save_directory):
                if (name not in written and re.fullmatch(r"model.*?-\d{5}-of-\d{5}\.(safetensors|bin)", name)
                        and os.path.isfile(os.path.join(save_directory, name))):
                    os.remove(os.path.join(save_directory, name))  # a shard of an earlier save
        return saved

    def push_to_hub(self, repo_id: str, **kwargs):
        """Upload as transformers does, but a repo without a ``README.md`` gets our short card (``card_scratchformer``,
        which travels with this file) instead of transformers' empty template."""
        return push_with_model_card(self, repo_id, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """Load as usual, from safetensors only (a pickle is never opened unless ``use_safetensors=False``), with an
        error that names an unreadable weights file."""
        kwargs.setdefault("use_safetensors", True)
        if (kwargs["use_safetensors"] and pretrained_model_name_or_path is not None  # None: weights as state_dict=
                and os.path.isdir(pretrained_model_name_or_path)):
            problem = safetensors_problem(pretrained_model_name_or_path)
            if problem:
                raise OSError(problem)
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        except Exception as error:
            source = str(pretrained_model_name_or_path)
            if type(error).__name__ == "SafetensorError":  # header or size check failed: truncated or corrupted
                names = sorted(name for name in os.listdir(source) if name.endswith(".safetensors")) if (
                    os.path.isdir(source)) else ["model.safetensors"]
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


def mean_over_labelled(total: torch.Tensor, labels: torch.Tensor,
                       num_items_in_batch: int | torch.Tensor | None = None) -> torch.Tensor:
    """A loss summed over the labelled positions (``labels != -100``) divided by their number (0 when none), or by
    the Trainer's ``num_items_in_batch``, so that gradient accumulation gives one big batch's gradient."""
    if num_items_in_batch is None:
        count = (labels != -100).sum()
    else:
        count = torch.as_tensor(num_items_in_batch, device=total.device)
    return total / count.clamp(min=1)


def _token_loss(logits: torch.Tensor, labels: torch.Tensor,
                num_items_in_batch: int | torch.Tensor | None) -> torch.Tensor:
    """The mean cross-entropy of ``logits`` (B, L, C) against ``labels`` (B, L), ``-100`` where nothing is predicted:
    the loss of every head that predicts ids (LM, masked LM, token classification)."""
    if not isinstance(labels, torch.Tensor) or labels.shape != logits.shape[:2]:
        shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
        raise ValueError(f"labels must be a tensor of shape {tuple(logits.shape[:2])}, one id (or -100) per "
                         f"position of the output, got {shape}")
    _check_labels(labels, logits.shape[-1], ignored=-100)
    labels = labels.to(logits.device).reshape(-1)
    total = nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels, ignore_index=-100,
                                        reduction="sum")
    return mean_over_labelled(total, labels, num_items_in_batch)


# ------------------------------------------------------------------------------------------------------------ models


class ScratchformerModel(ScratchformerPreTrainedModel):
    """The bare encoder-decoder (Figure 1 of the paper, without the final linear + softmax). With
    ``tie_word_embeddings`` (default) the encoder and decoder read one shared token table."""

    _tied_weights_keys = {"decoder.embeddings.word_embeddings.weight": "encoder.embeddings.word_embeddings.weight"}
    _keys_to_ignore_on_load_unexpected = [r"(^|\.)lm_head\."]

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.encoder = ScratchformerEncoder(config)
        self.decoder = ScratchformerDecoder(config)
        self.post_init()

    @can_return_tuple
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
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        """Encode the source (unless ``encoder_outputs`` are given) and decode. Without decoder inputs, the
        decoder reads the source shifted right (as BART does), which makes the bare model usable on one text."""
        _warn_ignored(self, kwargs)
        cache = _one_cache(cache, past_key_values, self)
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True)
        elif not isinstance(encoder_outputs, BaseModelOutput):  # a tuple (last_hidden_state, hidden_states, attentions)
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        if decoder_input_ids is None and decoder_inputs_embeds is None and input_ids is not None:  # checked by now
            decoder_input_ids = shift_tokens_right(input_ids, self.config.pad_token_id,
                                                   self.config.decoder_start_token_id)
        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids, attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state, encoder_attention_mask=attention_mask,
            cache=cache, inputs_embeds=decoder_inputs_embeds, use_cache=use_cache,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True)
        return Seq2SeqModelOutput(
            **{CACHE_NAME: getattr(decoder_outputs, CACHE_NAME)},
            last_hidden_state=decoder_outputs.last_hidden_state,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class ScratchformerForConditionalGeneration(ScratchformerPreTrainedModel, GenerationMixin):
    """The encoder-decoder with the pre-softmax linear projection (section 3.4): ``labels`` give the loss and, shifted
    right, the decoder inputs; ``generate()`` comes from ``GenerationMixin``."""

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embeddings.word_embeddings.weight"}
    _auto_classes_also_served = ("AutoModel", "AutoModelForMaskedLM")  # the encoder + this LM head = fill-mask

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.model = ScratchformerModel(config)
        self.lm_head = pre_softmax_linear(config)
        self.post_init()

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def generate(self, *args, **kwargs):
        """``GenerationMixin.generate``, after what only this model's sizes decide (:func:`_check_generation`)."""
        base = kwargs.get("generation_config") or self.generation_config
        _check_generation({**base.to_dict(), **{key: value for key, value in kwargs.items() if hasattr(base, key)}},
                          self.config)
        return super().generate(*args, **kwargs)

    def create_masks_for_generate(self, config, inputs_embeds, attention_mask, *args, **kwargs):
        """``generate()``'s 4-D decoder mask for a static cache: none without a decoder mask, as the decoder masks the
        empty slots and the future itself (:func:`_static_cache_layout`), with no host work per step."""
        if attention_mask is None:
            return None
        from transformers.masking_utils import create_masks_for_generate

        return create_masks_for_generate(config, inputs_embeds, attention_mask, *args, **kwargs)

    @can_return_tuple
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
        cache: EncoderDecoderCache | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        """``labels`` give the mean cross-entropy over the labelled target tokens (see :func:`mean_over_labelled`
        for ``num_items_in_batch``)."""
        _warn_ignored(self, kwargs)
        cache = _one_cache(cache, past_key_values, self)
        if labels is not None:
            if not isinstance(labels, torch.Tensor) or labels.dim() != 2:  # before they are shifted into the decoder
                raise ValueError("labels must be a (batch, target_length) tensor of token ids, -100 where ignored")
            use_cache = False  # teacher forcing: the whole target at once
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask, encoder_outputs=encoder_outputs, cache=cache,
            inputs_embeds=inputs_embeds, decoder_inputs_embeds=decoder_inputs_embeds, use_cache=use_cache,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V)
        loss = _token_loss(logits, labels, num_items_in_batch) if labels is not None else None
        # the model's outputs (the cache under this transformers version's name), with the logits for the last state
        return Seq2SeqLMOutput(loss=loss, logits=logits,
                               **{name: value for name, value in outputs.items() if name != "last_hidden_state"})


# generate() reads the signature of forward at every decoding step of a model registered for remote code
# (docs/performance.md): stored once, inspect.signature becomes a lookup. The signature is unchanged.
ScratchformerForConditionalGeneration.forward.__signature__ = inspect.signature(
    ScratchformerForConditionalGeneration.forward)


class ScratchformerEncoderModel(ScratchformerPreTrainedModel):
    """The encoder alone: contextual embeddings (``last_hidden_state``), the class behind ``AutoModel`` as in
    DistilBERT. A full encoder-decoder checkpoint loads into it (its decoder and LM head are not needed)."""

    _keys_to_ignore_on_load_unexpected = [r"(^|\.)decoder\.", r"(^|\.)lm_head\."]

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.encoder = ScratchformerEncoder(config)
        self.post_init()

    @property
    def embeddings(self) -> Embeddings:
        """The input embedding layer (``embeddings.word_embeddings`` is the learned table), as in BERT/DistilBERT."""
        return self.encoder.embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        _warn_ignored(self, kwargs)
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                            output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                            return_dict=True)


# ------------------------------------ task heads on the encoder (as DistilBERT and BART have them); generate()'s checks


def mean_over_tokens(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The sentence vector: the mean of the encoder output over the real tokens, ``(B, S, D) -> (B, D)``, the same
    alone or in a padded batch (the pooling of the card's snippet and the sentence-transformers export)."""
    if attention_mask is None:
        return hidden_states.mean(dim=1)
    mask = attention_mask.bool().unsqueeze(-1).to(hidden_states.dtype)  # (B, S, 1)
    return (hidden_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)


# generate() settings that are token ids of this model's vocabulary
_GENERATION_TOKEN_IDS = ("eos_token_id", "pad_token_id", "bos_token_id", "decoder_start_token_id",
                         "forced_bos_token_id", "forced_eos_token_id")


def _check_generation(settings: dict, config: ScratchformerConfig) -> None:
    """Refuse, before the encoder runs, what only this model's sizes decide and transformers fails on obscurely or
    silently: a token id outside the vocabulary, more beams than tokens, a length past learned positions."""
    for name in _GENERATION_TOKEN_IDS:
        ids = settings.get(name)
        for token in ids if isinstance(ids, (list, tuple)) else [ids]:
            if isinstance(token, numbers.Integral) and not 0 <= token < config.vocab_size:
                raise ValueError(f"generate: {name}={ids!r} is outside the vocabulary: token ids are in "
                                 f"[0, {config.vocab_size})")
    beams = settings.get("num_beams")
    if isinstance(beams, numbers.Real) and beams > config.vocab_size:
        raise ValueError(f"generate: num_beams={beams:,} is more than the {config.vocab_size:,} tokens of the "
                         "vocabulary: beam search keeps that many different continuations, and the first step has "
                         "only one per token; ask for fewer beams")
    new_tokens = settings.get("max_new_tokens")  # else max_length, which counts the start token
    length = new_tokens + 1 if isinstance(new_tokens, numbers.Real) else settings.get("max_length")
    if (config.position_embedding_type == "learned" and isinstance(length, numbers.Real)
            and length > config.max_position_embeddings):
        raise ValueError(f"generate: up to {length} decoder tokens, but learned positions stop at "
                         f"max_position_embeddings={config.max_position_embeddings}: ask for fewer new tokens")


def _check_labels(labels: torch.Tensor, num_labels: int, ignored: int | None = None) -> None:
    """Class labels (a token id for an LM head) are integers in ``0..num_labels-1`` (or ``ignored``): cross-entropy
    fails obscurely otherwise (a device assert on a GPU)."""
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"labels must be integer class ids in 0..{num_labels - 1}, got dtype {labels.dtype}")
    ok = (labels >= 0) & (labels < num_labels)
    if ignored is not None:
        ok |= labels == ignored
    _check_values(labels, ok.all, f"labels must be class ids in 0..{num_labels - 1} ({num_labels} classes: num_labels, "
                  "or an LM head's vocabulary)" + (f" or {ignored}" if ignored is not None else ""),
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
    """The loss for ``config.problem_type``, chosen (and stored) as transformers does when it is not set, once the
    labels have the shape and values that loss reads (MSE would broadcast a wrong shape in silence)."""
    num_labels, batch = config.num_labels, logits.shape[0]
    if config.problem_type is None:
        if num_labels == 1:
            config.problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            config.problem_type = "single_label_classification"
        else:
            config.problem_type = "multi_label_classification"
    problem, labels = config.problem_type, labels.to(logits.device)
    shapes = {"single_label_classification": [(batch,), (batch, 1)],
              "regression": [(batch,), (batch, 1)] if num_labels == 1 else [(batch, num_labels)],
              "multi_label_classification": [(batch, num_labels)]}.get(problem)
    if shapes is None:
        raise ValueError(f"problem_type={problem!r} is not one of 'regression', 'single_label_classification', "
                         "'multi_label_classification'")
    if tuple(labels.shape) not in shapes:
        raise ValueError(f"labels have shape {tuple(labels.shape)}; {problem} with num_labels={num_labels} needs "
                         f"{' or '.join(map(str, shapes))}: one target per text of the batch")
    if problem == "single_label_classification":
        _check_labels(labels, num_labels)
        return nn.functional.cross_entropy(logits.float().view(-1, num_labels), labels.view(-1))
    values = labels.float()
    ok = torch.isfinite(values) if problem == "regression" else (values >= 0) & (values <= 1)
    _check_values(labels, ok.all, "labels must be finite numbers " + ("(regression targets)" if problem ==
                  "regression" else "in [0, 1] (the probability of each label)"),
                  lambda: f"; {int((~ok).sum())} of {ok.numel()} are not, e.g. {values[~ok][0].item()}")
    if problem == "regression":
        return nn.functional.mse_loss(logits.float().reshape(values.shape), values)
    return nn.functional.binary_cross_entropy_with_logits(logits.float(), values)


class ScratchformerEncoderWithHead(ScratchformerPreTrainedModel):
    """What the task heads share: the encoder (``self.model``) and the forward (encode, the head's ``logits``, its
    ``loss``). A full encoder-decoder checkpoint loads into it; the head starts random, as BERT's does."""

    _keys_to_ignore_on_load_unexpected = [r"(^|\.)decoder\.", r"(^|\.)lm_head\."]
    output_class: type = TokenClassifierOutput

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = ScratchformerEncoderModel(config)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ):
        """labels: what the head's ``loss`` reads; ``num_items_in_batch``: see :func:`mean_over_labelled`."""
        _warn_ignored(self, kwargs)
        encoded = self.model(input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds,
                             output_attentions=output_attentions, output_hidden_states=output_hidden_states,
                             return_dict=True)
        logits = self.logits(encoded.last_hidden_state, attention_mask)
        loss = self.loss(logits, labels, num_items_in_batch) if labels is not None else None
        return self.output_class(loss=loss, logits=logits, hidden_states=encoded.hidden_states,
                                 attentions=encoded.attentions)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch) -> torch.Tensor:
        """labels: ``(B, S)`` ids, ``-100`` where there is nothing to predict; their mean cross-entropy."""
        return _token_loss(logits, labels, num_items_in_batch)


class ScratchformerForSequenceClassification(ScratchformerEncoderWithHead):
    """The encoder with a sentence-level classification (or regression) head, for ``text-classification``: the mean
    of the last layer over the real tokens (no ``[CLS]`` is trained), then :class:`ScratchformerClassificationHead`."""

    output_class = SequenceClassifierOutput
    # The loss is a mean over the texts of the batch (MSE, or cross-entropy), with no per-token count to pass: the
    # Trainer then divides each micro-batch's loss by their number, which is what gradient accumulation needs.
    accepts_loss_kwargs = False

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.classifier = ScratchformerClassificationHead(config)
        self.post_init()

    def logits(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self.classifier(mean_over_tokens(hidden_states, attention_mask))  # (B, S, D) -> (B, num_labels)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch) -> torch.Tensor:
        return sequence_classification_loss(logits, labels, self.config)


class ScratchformerForTokenClassification(ScratchformerEncoderWithHead):
    """The encoder with one label per token (tagging, named entities), for ``token-classification``; ``labels`` of
    ``-100`` (padding, special tokens) are left out of the loss."""

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.dropout = nn.Dropout(_classifier_dropout(config))
        self.classifier = nn.Linear(config.d_model, config.num_labels)
        self.post_init()

    def logits(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self.classifier(self.dropout(hidden_states))  # (B, S, D) -> (B, S, num_labels)


class ScratchformerForMaskedLM(ScratchformerEncoderWithHead):
    """The encoder with the tied output projection, for ``fill-mask``: the weights the encoder's masked-token loss
    trains (``train --encoder-mlm-weight``), so a full checkpoint loads with nothing new to learn."""

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embeddings.word_embeddings.weight"}
    _keys_to_ignore_on_load_unexpected = [r"(^|\.)decoder\."]
    output_class = MaskedLMOutput

    def __init__(self, config: ScratchformerConfig):
        super().__init__(config)
        self.lm_head = pre_softmax_linear(config)
        self.post_init()

    def logits(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self.lm_head(hidden_states)  # (B, S, D) -> (B, S, V)


__all__ = ["ScratchformerEncoderModel", "ScratchformerForConditionalGeneration", "ScratchformerForMaskedLM",
           "ScratchformerForSequenceClassification", "ScratchformerForTokenClassification", "ScratchformerModel",
           "ScratchformerPreTrainedModel"]
