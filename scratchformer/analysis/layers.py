"""What a layer number stands for: ``"learned"`` (the table row), ``0`` (the embedding-layer output) or ``k`` (layer
``k``'s output; negative counts from the last)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch

from ..errors import ScratchformerError

LEARNED = "learned"
Layer = int | Literal["learned"]
_LAYER_COUNT_FIELDS = ("encoder_layers", "num_hidden_layers", "n_layers", "num_layers")  # config names, in order


def describe_layer(layer: Layer, num_layers: int) -> str:
    """A human description of what ``layer`` means (for tables, JSON and plot labels)."""
    if layer == LEARNED:
        return "learned input embedding (raw row of get_input_embeddings(); same vector in every sentence)"
    if layer == 0:
        return ("embedding-layer output hidden_states[0] (input to layer 1: token embedding plus any position encoding "
                "the model adds there, e.g. none with rotary positions; not learned)")
    if layer == num_layers:
        return f"contextual, layer {layer} of {num_layers} (last_hidden_state)"
    return f"contextual, layer {layer} of {num_layers}"


def layer_kind(layer: Layer) -> str:
    """``"learned"``, ``"embedding_output"`` (layer 0) or ``"contextual"``."""
    if layer == LEARNED:
        return "learned"
    return "embedding_output" if layer == 0 else "contextual"


def count_layers(model: torch.nn.Module) -> int:
    """Number of layers of the model's (encoder) stack, read from its config."""
    config = model.config
    for name in _LAYER_COUNT_FIELDS:
        value = getattr(config, name, None)
        if isinstance(value, int):
            return value
    raise ScratchformerError(f"cannot tell the number of layers of {type(model).__name__} from its config "
                             f"(none of {', '.join(_LAYER_COUNT_FIELDS)} is set)")


def resolve_layer(layer: Layer, num_layers: int) -> Layer:
    """Check ``layer`` and turn a negative index into a non-negative one (``-1`` -> ``num_layers``)."""
    if layer == LEARNED:
        return LEARNED
    n = num_layers
    if isinstance(layer, bool) or not isinstance(layer, int) or not -(n + 1) <= layer <= n:
        raise ScratchformerError(
            f"layer={layer!r} is out of range for a model with {n} layers: use 'learned' (the raw embedding "
            f"table), 0 (embedding-layer output), 1..{n} (layer outputs) or a negative index (-1 = last)"
        )
    return layer % (n + 1)


def resolve_layers(layers: Layer | Sequence[Layer], num_layers: int) -> list[Layer]:
    """One layer or a list of layers, each checked and made non-negative."""
    return [resolve_layer(x, num_layers) for x in ([layers] if isinstance(layers, (int, str)) else layers)]


def input_embedding_table(model: torch.nn.Module) -> torch.Tensor:
    """The learned input embedding matrix ``(vocab_size, hidden_size)``; an error if the model has none."""
    try:
        return model.get_input_embeddings().weight
    except (NotImplementedError, AttributeError) as error:
        raise ScratchformerError(
            f"{type(model).__name__} has no input embedding table ({type(error).__name__}: {error}); learned "
            "embeddings need a model whose get_input_embeddings() returns an nn.Embedding") from error


def vectors_at(model: torch.nn.Module, input_ids: list[int], hidden: torch.Tensor, layer: Layer) -> torch.Tensor:
    """``(num_tokens, hidden_size)`` vectors of one text at a resolved ``layer``: from its ``(num_layers + 1,
    num_tokens, hidden_size)`` hidden states, or for ``"learned"`` from the embedding table."""
    if layer == LEARNED:
        table = input_embedding_table(model)
        return table[torch.tensor(input_ids, device=table.device)].detach().float().cpu()
    return hidden[layer]


def is_contextual(layer: Any, num_layers: int) -> bool:
    """Whether ``layer`` (resolved or negative) is the output of a layer, not the learned table or layer 0."""
    return isinstance(layer, int) and not isinstance(layer, bool) and (
        1 <= layer <= num_layers or -num_layers <= layer <= -1)
