"""Texts in, hidden states out: :class:`TextEncoder` tokenizes (with character offsets), truncates, batches by length
and runs the encoder."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch

from ..errors import ScratchformerError, quoted

PROGRESS_MIN_TEXTS = 100  # show a progress bar by default from this many texts on


@dataclass
class Encoded:
    """One tokenized text: its ids, the character span of each token, and which tokens are special."""

    text: str
    input_ids: list[int]
    offsets: list[tuple[int, int]] | None  # character span per token; None from a slow tokenizer; (0, 0) if special
    special: list[bool]
    token_type_ids: list[int] | None
    truncated: bool  # the text was longer than the maximum and was cut


def encoder_of(model: torch.nn.Module) -> torch.nn.Module:
    """The module whose hidden states are the embeddings: the encoder of a model whose forward takes decoder inputs,
    else the model itself (``BertModel.get_encoder()`` would return the bare layer stack)."""
    takes_decoder_inputs = "decoder_input_ids" in inspect.signature(model.forward).parameters
    return model.get_encoder() if takes_decoder_inputs else model


def default_max_length(model: torch.nn.Module, tokenizer: Any) -> int | None:
    """The most tokens a text may have: the smaller of the tokenizer's ``model_max_length`` and, for a learned
    position table, the config's ``max_position_embeddings``; ``None`` when neither says."""
    candidates = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
        candidates.append(tok_max)
    config = getattr(model, "config", None)
    uses_table = getattr(config, "position_embedding_type", "absolute") not in ("sinusoidal", "rope")
    pos_max = getattr(config, "max_position_embeddings", None)
    if uses_table and isinstance(pos_max, int) and pos_max > 0:
        candidates.append(pos_max)
    return min(candidates) if candidates else None


def _encoded_texts(enc: Any, texts: Sequence[str], fast: bool) -> list[Encoded]:
    """One :class:`Encoded` per text from a batch encoding. With truncation a long text has overflow rows (the
    cut-off rest); they only mark their text as truncated."""
    rows = enc.get("overflow_to_sample_mapping", list(range(len(texts))))
    result: list[Encoded | None] = [None] * len(texts)
    for row, sample in enumerate(rows):
        if result[sample] is not None:  # an overflow row
            result[sample].truncated = True
            continue
        result[sample] = Encoded(
            text=texts[sample],
            input_ids=list(enc["input_ids"][row]),
            offsets=[tuple(o) for o in enc["offset_mapping"][row]] if fast else None,
            special=[bool(s) for s in enc["special_tokens_mask"][row]],
            token_type_ids=list(enc["token_type_ids"][row]) if "token_type_ids" in enc else None,
            truncated=False,
        )
    return result


def _padded(rows: list[list[int]], pad: int) -> torch.Tensor:
    """``(len(rows), longest)`` long tensor, right-padded with ``pad``."""
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(row, dtype=torch.long) for row in rows], batch_first=True,
                                           padding_value=pad)


class TextEncoder:
    """Tokenize texts and run them through ``model``'s encoder in length-sorted batches, under ``no_grad`` in
    ``eval()``; texts over ``max_length`` tokens are cut with a warning (``long_inputs="error"``: refused)."""

    def __init__(self, model: torch.nn.Module, tokenizer: Any, *, batch_size: int = 32, max_length: int | None = None,
                 long_inputs: Literal["truncate", "error"] = "truncate", progress: bool | None = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ScratchformerError(f"batch_size={batch_size!r} must be a positive integer")
        if long_inputs not in ("truncate", "error"):
            raise ScratchformerError(f"long_inputs={long_inputs!r} must be 'truncate' or 'error'")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.long_inputs = long_inputs
        self.progress = progress
        self.encoder = encoder_of(model)
        self._takes_token_type_ids = "token_type_ids" in inspect.signature(self.encoder.forward).parameters
        self.max_length = max_length if max_length is not None else default_max_length(model, tokenizer)

    def tokens(self, ids: Sequence[int]) -> list[str]:
        """The token strings of ``ids`` (``'Ġbank'``, ``'##s'``, ``'bank</w>'``...)."""
        return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def tokenize(self, texts: Sequence[str]) -> list[Encoded]:
        """Tokenize ``texts``; texts over ``max_length`` are cut with a warning or refused."""
        if not texts:  # a fast tokenizer fails on an empty batch with a bare IndexError
            return []
        fast = bool(getattr(self.tokenizer, "is_fast", False))
        options: dict[str, Any] = dict(return_special_tokens_mask=True, return_offsets_mapping=fast)
        if self.max_length is not None and fast:
            options.update(truncation=True, max_length=self.max_length, return_overflowing_tokens=True)
        encoded = _encoded_texts(self.tokenizer(list(texts), **options), texts, fast)
        # a slow tokenizer cannot truncate here: its texts are measured after tokenizing
        too_long = [i for i, e in enumerate(encoded) if e.truncated or (
            e.offsets is None and self.max_length is not None and len(e.input_ids) > self.max_length)]
        if too_long:
            self._report_long_texts(texts, too_long, fast)
        return encoded

    def _report_long_texts(self, texts: Sequence[str], too_long: list[int], fast: bool) -> None:
        first = too_long[0]
        message = (f"{len(too_long)} text(s) are longer than the model's maximum of {self.max_length} tokens, e.g. "
                   f"text {first} ({quoted(texts[first], 60)})")
        if not fast:
            raise ScratchformerError(f"{message}; shorten them (only fast tokenizers can be truncated here)")
        if self.long_inputs == "error":
            raise ScratchformerError(f"{message}; shorten them, or use long_inputs='truncate' to cut them")
        warnings.warn(f"{message}; they were truncated to {self.max_length} tokens (max_length= moves the cut)",
                      stacklevel=4)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def forward(self, batch: list[Encoded], output_attentions: bool = False) -> Any:
        """One right-padded batch through the encoder, with all hidden states (and attentions if asked)."""
        pad_id = self.tokenizer.pad_token_id
        input_ids = _padded([e.input_ids for e in batch], 0 if pad_id is None else pad_id)
        inputs = {"input_ids": input_ids, "attention_mask": _padded([[1] * len(e.input_ids) for e in batch], 0)}
        if self._takes_token_type_ids and all(e.token_type_ids is not None for e in batch):
            inputs["token_type_ids"] = _padded([e.token_type_ids for e in batch], 0)
        inputs = {name: tensor.to(self.device) for name, tensor in inputs.items()}
        with torch.no_grad():
            return self.encoder(**inputs, output_hidden_states=True, output_attentions=output_attentions,
                                return_dict=True)

    def map(self, texts: Sequence[str], keep: Callable[[int, Encoded, torch.Tensor], Any]) -> list[Any]:
        """``keep(i, encoded, hidden)`` for each text ``i``, in the order of ``texts``, with ``hidden`` that text's
        ``(num_layers + 1, num_tokens, hidden_size)`` states without padding."""
        from tqdm.auto import tqdm

        results: list[Any] = [None] * len(texts)
        show = self.progress if self.progress is not None else len(texts) >= PROGRESS_MIN_TEXTS
        with tqdm(total=len(texts), desc="embedding", unit="text", disable=not show) as bar:
            for index, batch, hidden in self.batches(texts):
                for b, i in enumerate(index):
                    results[i] = keep(i, batch[b], hidden[b, :, : len(batch[b].input_ids)])
                bar.update(len(index))
        return results

    def batches(self, texts: Sequence[str]) -> Iterator[tuple[list[int], list[Encoded], torch.Tensor]]:
        """The texts run longest first, ``batch_size`` at a time: ``(indices into texts, their Encoded, (batch,
        num_layers + 1, tokens, hidden_size) padded hidden states)``."""
        encoded = self.tokenize(texts)
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].input_ids))
        for start in range(0, len(order), self.batch_size):
            index = order[start : start + self.batch_size]
            batch = [encoded[i] for i in index]
            yield index, batch, self._hidden_states(batch)

    def _hidden_states(self, batch: list[Encoded]) -> torch.Tensor:
        """``(batch, num_layers + 1, tokens, hidden_size)`` float32 on the CPU."""
        output = self.forward(batch)
        if not output.hidden_states:
            raise ScratchformerError(f"{type(self.encoder).__name__} returned no hidden_states; embeddings per layer "
                                     "need a model that supports output_hidden_states=True")
        return torch.stack(output.hidden_states, dim=1).float().cpu()
