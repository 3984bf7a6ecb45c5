"""BART's text-infilling noise (Lewis et al. 2020, section 2.2): the denoising objective's corruption of a text.

- :func:`text_infilling` noises one token sequence;
- :class:`DataCollatorForTextInfilling` turns clean token ids into training batches: the encoder reads the noised
  text, the decoder rebuilds the original.
"""

from __future__ import annotations

import functools
import math
import numbers
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import DataError


def text_infilling(ids: Sequence[int], mask_token_id: int, rng: np.random.Generator, mask_ratio: float = 0.3,
                   poisson_lambda: float = 3.0) -> list[int]:
    """BART text infilling of one token sequence (without its final ``</s>``): Poisson span lengths covering
    ``ceil(mask_ratio * n)`` tokens, each span of length >= 1 one ``<mask>``, spans never touching; each length-0
    span inserts a ``<mask>`` (docs/training.md, "Objectives")."""
    check_noise(mask_ratio, poisson_lambda)
    n = len(ids)
    if n == 0 or mask_ratio <= 0:
        return list(ids)
    lengths = _span_lengths(math.ceil(mask_ratio * n), poisson_lambda, rng)
    spans = [length for length in lengths if length > 0]
    zero_length = len(lengths) - len(spans)
    while spans and n - sum(spans) < len(spans) - 1:  # too short to keep the spans apart
        spans.pop()
    out = _replace_spans(list(ids), spans, mask_token_id, rng)
    inserts = min(zero_length, sum(spans) - len(spans))  # never longer than the original
    if inserts > 0:
        for where in sorted(rng.integers(0, len(out) + 1, size=inserts).tolist(), reverse=True):
            out.insert(where, mask_token_id)
    return out


def check_noise(mask_ratio: float, poisson_lambda: float, **probabilities: float) -> None:
    """The noise's numbers: finite, ``mask_ratio`` (and each of ``probabilities``) in [0, 1) and ``poisson_lambda``
    above 0 (with 0, every span would be empty and the spans would never cover what is to be masked)."""
    for name, value in (("mask_ratio", mask_ratio), ("poisson_lambda", poisson_lambda), *probabilities.items()):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"{name}={value!r} must be a finite number")
        if name != "poisson_lambda" and not 0.0 <= value < 1.0:
            raise ValueError(f"{name}={value} must be in [0, 1)")
    if not poisson_lambda > 0:
        raise ValueError(f"poisson_lambda={poisson_lambda} must be positive")


def _span_lengths(to_mask: int, poisson_lambda: float, rng: np.random.Generator) -> list[int]:
    """Poisson(``poisson_lambda``) span lengths drawn until they cover ``to_mask`` tokens, the last one cut to fit
    exactly (lengths of 0 included: each will insert a ``<mask>``)."""
    lengths: list[int] = []
    total = 0
    while total < to_mask:
        length = int(rng.poisson(poisson_lambda))
        lengths.append(length)
        total += length
    lengths[-1] -= total - to_mask
    return lengths


def _replace_spans(ids: list[int], spans: list[int], mask_token_id: int, rng: np.random.Generator) -> list[int]:
    """``ids`` with spans of the given lengths, placed at random and never touching, each replaced by one mask."""
    k, masked = len(spans), sum(spans)
    if not k:
        return ids
    # gaps between spans: g_0 >= 0, g_1..g_{k-1} >= 1, g_k >= 0, summing to the n - masked kept tokens
    free = len(ids) - masked - (k - 1)
    bars = np.sort(rng.choice(free + k, size=k, replace=False))
    gaps = np.diff(np.concatenate(([-1], bars))) - 1
    gaps[1:] += 1
    out: list[int] = []
    pos = 0
    for gap, length in zip(gaps.tolist(), spans):
        out.extend(ids[pos:pos + gap])
        out.append(mask_token_id)
        pos += gap + length
    out.extend(ids[pos:])
    return out


@dataclass
class DataCollatorForTextInfilling:
    """Batches for denoising: ``input_ids`` (noised), ``attention_mask``, ``labels`` (clean, -100 padded) and
    ``decoder_input_ids`` (the Trainer's label smoothing takes ``labels`` out of the model's inputs). The noise is a
    function of ``(seed, epoch, token ids)`` only, so a resumed run sees the same batches; ``epoch`` comes from
    :class:`~scratchformer.training.callbacks.EpochCallback` or from a feature's own ``"epoch"`` (a stream's pass)."""

    pad_token_id: int
    mask_token_id: int
    eos_token_id: int
    decoder_start_token_id: int
    mask_ratio: float = 0.3
    poisson_lambda: float = 3.0
    seed: int = 0
    epoch: int = 0
    pad_to_multiple_of: int | None = None
    crop_pairs: bool = False  # also two clean windows of each long text, for --contrastive-weight
    encoder_mlm_probability: float = 0.0  # > 0: also a BERT-masked copy of each text, for --encoder-mlm-weight
    vocab_size: int | None = None  # with encoder_mlm_probability: the ids a random replacement is drawn from ...
    special_ids: tuple[int, ...] = ()  # ... except these
    mlm_whole_words: bool = False  # the masked copy chooses whole words (--encoder-mlm-whole-words) ...
    word_pieces: Any = None  # ... as the tokenizer's encoder_mlm.WordPieces tell them

    def __post_init__(self):
        """Refuse noise that would never end or mask past the text (:func:`check_noise`), and settings missing
        their companion; the ids and the seed are numpy's and torch's to check."""
        check_noise(self.mask_ratio, self.poisson_lambda, encoder_mlm_probability=self.encoder_mlm_probability)
        if self.encoder_mlm_probability > 0 and self.vocab_size is None:
            raise ValueError("encoder_mlm_probability > 0 needs vocab_size (the ids random replacements come from)")
        if self.mlm_whole_words and self.word_pieces is None:
            raise ValueError("mlm_whole_words needs word_pieces (where the tokenizer's words begin)")

    @classmethod
    def from_tokenizer(cls, tokenizer, decoder_start_token_id: int, **kwargs) -> DataCollatorForTextInfilling:
        if tokenizer.mask_token_id is None:
            raise DataError("the tokenizer has no <mask> token; text infilling needs one")
        if kwargs.get("mlm_whole_words"):
            from .encoder_mlm import word_pieces

            kwargs["word_pieces"] = word_pieces(tokenizer)
        return cls(pad_token_id=tokenizer.pad_token_id, mask_token_id=tokenizer.mask_token_id,
                   eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=decoder_start_token_id,
                   vocab_size=len(tokenizer), special_ids=tuple(sorted(set(tokenizer.all_special_ids))), **kwargs)

    def rng_for(self, ids: Sequence[int], epoch: int | None = None, *stream: int) -> np.random.Generator:
        """The noise's random stream of ``ids`` (``stream``: another one of the same text, apart from it)."""
        key = zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes())
        return np.random.default_rng([self.seed, self.epoch if epoch is None else epoch, key, len(ids), *stream])

    def crop_rng(self, ids: Sequence[int], epoch: int | None = None) -> np.random.Generator:
        """The windows' own random stream (a function of the same things as the noise, but apart from it: adding
        the windows leaves the noise of every text as it was)."""
        return self.rng_for(ids, epoch, 1)

    @functools.cached_property
    def ordinary_ids(self) -> np.ndarray:
        """The ids that are not special tokens, sorted: what a masked copy may choose, and draw random tokens from."""
        return np.setdiff1d(np.arange(self.vocab_size or 0), np.asarray(self.special_ids, dtype=np.int64))

    def mlm_rng(self, ids: Sequence[int], epoch: int | None = None) -> np.random.Generator:
        """The masked copy's own random stream (apart from the noise and the windows, as :meth:`crop_rng`)."""
        return self.rng_for(ids, epoch, 2)

    def noise(self, ids: Sequence[int], epoch: int | None = None) -> list[int]:
        ids = list(ids)
        body, tail = (ids[:-1], ids[-1:]) if ids and ids[-1] == self.eos_token_id else (ids, [])
        return text_infilling(body, self.mask_token_id, self.rng_for(ids, epoch), self.mask_ratio,
                              self.poisson_lambda) + tail

    def _pad(self, rows: list[list[int]], value: int):
        import torch

        width = max(len(r) for r in rows)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        out = torch.full((len(rows), width), value, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        return out

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        clean = [list(f["input_ids"]) for f in features]
        noised = [self.noise(ids, f.get("epoch")) for ids, f in zip(clean, features)]
        input_ids = self._pad(noised, self.pad_token_id)
        attention_mask = self._pad([[1] * len(r) for r in noised], 0)
        labels = self._pad(clean, -100)
        decoder_input_ids = labels.new_full(labels.shape, self.pad_token_id)
        decoder_input_ids[:, 0] = self.decoder_start_token_id
        decoder_input_ids[:, 1:] = labels[:, :-1].masked_fill(labels[:, :-1] == -100, self.pad_token_id)
        batch = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "labels": labels,
            "decoder_input_ids": decoder_input_ids,
        }
        if self.crop_pairs:
            batch.update(self._crops(clean, features))
        if self.encoder_mlm_probability > 0:
            batch.update(self._masked_copies(clean, features))
        return batch

    def _crops(self, clean: list[list[int]], features: list[dict[str, Any]]) -> dict[str, Any]:
        """Two windows of each text that is long enough (:mod:`scratchformer.training.contrastive`)."""
        from .contrastive import crop_pair, crops_batch

        pairs = []
        for ids, feature in zip(clean, features):
            body = ids[:-1] if ids and ids[-1] == self.eos_token_id else ids
            pair = crop_pair(body, self.crop_rng(ids, feature.get("epoch")))
            if pair is not None:
                pairs.append(pair)
        return crops_batch(pairs, self.eos_token_id, self.pad_token_id)

    def _masked_copies(self, clean: list[list[int]], features: list[dict[str, Any]]) -> dict[str, Any]:
        """A BERT-masked copy of each text (:mod:`scratchformer.training.encoder_mlm`)."""
        from .encoder_mlm import mask_tokens, mlm_batch

        words = self.word_pieces if self.mlm_whole_words else None
        copies = [mask_tokens(ids, self.mlm_rng(ids, feature.get("epoch")), self.encoder_mlm_probability,
                              self.mask_token_id, self.ordinary_ids, words) for ids, feature in zip(clean, features)]
        return mlm_batch(clean, [c for c, _ in copies], [p for _, p in copies], self.pad_token_id)
