"""A word-level self-contrast loss on the encoder (MirrorWiC, Liu et al. 2021): two views of one word occurrence
must find each other among the batch's (docs/training.md, "Objectives"). Every choice is drawn from a stream of
``(seed, epoch, the text's ids)`` of its own, so a resumed run sees the same views."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .contrastive import info_nce
from .encoder_mlm import WordPieces, word_pieces
from .noise import DataCollatorForTextInfilling

WINDOW_TOKENS = (8, 32)  # the length range of the context window around a word, in tokens (sentence-sized)
MIN_LETTERS = 3  # shorter words ("a", "of", "to") carry no sense to learn
MAX_PIECES = 8  # longer words (numbers, names spelled byte by byte) are left out
WORD_KEYS = ("word_input_ids", "word_attention_mask", "word_token_mask")
_STREAM = 3  # the collator's random stream of these views (0: noise, 1: windows, 2: masked copies)
# one odd 64-bit multiplier per piece position (and one more for the end): a word's key is a hash of its ids
_MULTIPLIERS = np.random.default_rng(20211).integers(1, 2**62, size=MAX_PIECES + 1, dtype=np.uint64) * 2 + 1


@dataclass(frozen=True, eq=False)
class WordTable:
    """Per vocabulary id: the tokenizer's word pieces and how many letters each token spells (0 for special
    tokens)."""

    pieces: WordPieces
    letters: np.ndarray  # (vocab,) int

    def words(self, ids: np.ndarray, row_starts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, lengths)`` of the words of ``ids`` that may be chosen (a word begins at every row start)."""
        starts = self.pieces.word_starts(ids)
        if row_starts is not None:
            starts[row_starts] = True
        first = np.flatnonzero(starts)
        lengths = np.diff(np.append(first, len(ids)))
        letters = np.add.reduceat(self.letters[ids], first) if len(first) else np.zeros(0, dtype=np.int64)
        keep = (letters >= MIN_LETTERS) & (lengths <= MAX_PIECES) & self.pieces.wordlike[ids[first]]
        return first[keep], lengths[keep]


def word_table(tokenizer) -> WordTable:
    """The :class:`WordTable` of a byte-level BPE ``tokenizer``."""
    texts = [tokenizer.convert_tokens_to_string([token]) for token in tokenizer.convert_ids_to_tokens(
        list(range(len(tokenizer))))]
    special = set(tokenizer.all_special_ids)
    letters = np.array([0 if i in special else sum(c.isalpha() for c in text) for i, text in enumerate(texts)])
    return WordTable(word_pieces(tokenizer), letters)


def word_keys(ids: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A 64-bit key per word, the same for every occurrence of the same pieces (a hash; collisions are as rare as
    in any 64-bit hash)."""
    keys = _MULTIPLIERS[lengths].copy()  # the end marker: words of different lengths differ
    for k in range(MAX_PIECES):
        inside = lengths > k
        keys[inside] += ids[starts[inside] + k].astype(np.uint64) * _MULTIPLIERS[k]
    return keys


@dataclass(eq=False)
class WordIndex:
    """Every occurrence of the words that occur more than ``occurrences`` times in the training texts, grouped by
    word: where ``--word-contrast-occurrences`` draws the other occurrences of a chosen word from."""

    ids: np.ndarray  # every training token, the texts one after another
    row_starts: np.ndarray  # (texts + 1,) where each text begins in ``ids``
    keys: np.ndarray  # (words,) sorted word keys
    offsets: np.ndarray  # (words + 1,) the occurrences of word w are ``starts[offsets[w]:offsets[w + 1]]``
    starts: np.ndarray  # where each occurrence begins in ``ids``
    lengths: np.ndarray  # its pieces

    @classmethod
    def build(cls, texts: Iterable[Sequence[int]], table: WordTable, occurrences: int) -> WordIndex:
        rows = [np.asarray(t, dtype=np.int64) for t in texts]
        row_starts = np.cumsum([0] + [len(r) for r in rows])
        ids = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        starts, lengths = table.words(ids, row_starts[:-1][np.diff(row_starts) > 0])  # (an empty text has none)
        keys = word_keys(ids, starts, lengths)
        unique, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        frequent = counts > occurrences  # the anchor's own occurrence is one of them
        order = np.argsort(inverse, kind="stable")
        order = order[frequent[inverse[order]]]
        offsets = np.concatenate([[0], np.cumsum(counts[frequent])])
        return cls(ids.astype(np.int32), row_starts, unique[frequent], offsets, starts[order], lengths[order])

    def word_of(self, keys: np.ndarray) -> np.ndarray:
        """The index of each key's word, or -1 where the word is not in the index."""
        where = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        found = (self.keys[where] == keys) if len(self.keys) else np.zeros(len(keys), dtype=bool)
        return np.where(found, where, -1)

    def draw(self, word: int, count: int, rng: np.random.Generator) -> list[tuple[np.ndarray, int, int]]:
        """``count`` different occurrences of ``word``, each as ``(its text, start, end)``."""
        first, end = self.offsets[word], self.offsets[word + 1]
        out = []
        for i in first + rng.choice(end - first, size=count, replace=False):
            start = int(self.starts[i])
            row = int(np.searchsorted(self.row_starts, start, side="right")) - 1
            text = self.ids[self.row_starts[row]:self.row_starts[row + 1]].astype(np.int64)
            at = start - int(self.row_starts[row])
            out.append((text, at, at + int(self.lengths[i])))
        return out


def context_window(length: int, start: int, end: int, rng: np.random.Generator) -> tuple[int, int]:
    """``(first, last + 1)`` of a random window of :data:`WINDOW_TOKENS` tokens (at most ``length``) that holds the
    word at ``start..end - 1``."""
    low, high = WINDOW_TOKENS
    size = max(min(int(rng.integers(low, high + 1)), length), end - start)
    first = int(rng.integers(max(0, end - size), min(start, length - size) + 1))
    return first, first + size


def erase_span(ids: list[int], start: int, end: int, fraction: float, mask_token_id: int,
               rng: np.random.Generator) -> list[int]:
    """``ids`` with one span of ``round(fraction x len(ids))`` tokens (at least 1 when ``fraction`` > 0) replaced
    by ``<mask>`` one for one, all before the word at ``start..end - 1`` or all after it, never touching it. Where
    neither side has room for the span, the longer side is erased whole."""
    n = len(ids)
    size = max(1, round(fraction * n)) if fraction > 0 else 0
    left, right = start, n - end
    if size == 0 or left + right == 0:
        return list(ids)
    if size > max(left, right):
        size = max(left, right)
    places = list(range(0, left - size + 1)) + list(range(end, n - size + 1))
    first = places[int(rng.integers(len(places)))]
    return ids[:first] + [mask_token_id] * size + ids[first + size:]


def views_batch(views: list[tuple[list[int], list[int], int, int]], eos_token_id: int, pad_token_id: int
                ) -> dict[str, torch.Tensor]:
    """The encoder's inputs for the two views of each occurrence: rows ``a_0 .. a_(N-1), b_0 .. b_(N-1)``, each
    followed by ``</s>``; ``word_token_mask`` marks the word's tokens (the ones pooled)."""
    rows = [(a, start, end) for a, _, start, end in views] + [(b, start, end) for _, b, start, end in views]
    width = max((len(r) for r, _, _ in rows), default=0) + 1
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    token_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (r, start, end) in enumerate(rows):
        input_ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        input_ids[i, len(r)] = eos_token_id
        attention_mask[i, :len(r) + 1] = 1
        token_mask[i, start:end] = True
    return {"word_input_ids": input_ids, "word_attention_mask": attention_mask, "word_token_mask": token_mask}


@dataclass
class WordContrastCollator(DataCollatorForTextInfilling):
    """:class:`~scratchformer.training.noise.DataCollatorForTextInfilling` that also adds the two views of one word
    occurrence per text (or of ``occurrences`` occurrences per chosen word). The denoising
    batch, the windows and the masked copies are exactly the parent's."""

    word_table: WordTable | None = None
    word_erase: float = 0.2  # the share of a window erased as one span, in each view
    erase_word: bool = False  # also erase the word itself in the second view
    occurrences: int = 1  # occurrences of each chosen word in a batch (> 1 needs word_index)
    word_index: WordIndex | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.word_table is None or (self.occurrences > 1 and self.word_index is None):
            raise ValueError("WordContrastCollator needs word_table, and word_index for occurrences > 1")

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().__call__(features)
        views: list[tuple[list[int], list[int], int, int]] = []
        for feature in features:
            if len(views) >= len(features):  # about one occurrence per text, whatever the grouping
                break
            ids = list(feature["input_ids"])
            rng = self.rng_for(ids, feature.get("epoch"), _STREAM)
            for text, start, end in self._occurrences(ids, rng):
                views.append(self._two_views(text, start, end, rng))
        batch.update(views_batch(views, self.eos_token_id, self.pad_token_id))
        return batch

    def _occurrences(self, ids: list[int], rng: np.random.Generator) -> list[tuple[np.ndarray, int, int]]:
        """One word of the text, and with ``occurrences`` > 1 that many occurrences of it (the text's own first);
        none when the text has no word to choose."""
        body = np.asarray(ids[:-1] if ids and ids[-1] == self.eos_token_id else ids, dtype=np.int64)
        starts, lengths = self.word_table.words(body)
        if self.occurrences > 1 and len(starts):
            known = self.word_index.word_of(word_keys(body, starts, lengths)) >= 0
            starts, lengths = starts[known], lengths[known]
        if not len(starts):
            return []
        pick = int(rng.integers(len(starts)))
        start, end = int(starts[pick]), int(starts[pick] + lengths[pick])
        if self.occurrences == 1:
            return [(body, start, end)]
        word = int(self.word_index.word_of(word_keys(body, starts[pick:pick + 1], lengths[pick:pick + 1]))[0])
        found = [(body, start, end)]
        for text, other_start, other_end in self.word_index.draw(word, self.occurrences, rng):
            text = text[:-1] if len(text) and text[-1] == self.eos_token_id else text
            if len(found) < self.occurrences and not (other_start == start and np.array_equal(text, body)):
                found.append((text, other_start, other_end))  # not the chosen occurrence itself
        return found

    def _two_views(self, text: np.ndarray, start: int, end: int, rng: np.random.Generator
                   ) -> tuple[list[int], list[int], int, int]:
        """The window around the word and its two views, with the word's place in them."""
        first, last = context_window(len(text), start, end, rng)
        window, start, end = text[first:last].tolist(), start - first, end - first
        a = erase_span(window, start, end, self.word_erase, self.mask_token_id, rng)
        b = erase_span(window, start, end, self.word_erase, self.mask_token_id, rng)
        if self.erase_word:
            b[start:end] = [self.mask_token_id] * (end - start)
        return a, b, start, end


@dataclass
class WordContrastLoss:
    """The loss of the module docstring (an :class:`~scratchformer.training.encoder_losses.EncoderLoss`, logged as
    ``word_contrast_loss``)."""

    weight: float
    temperature: float = 0.05
    name = "word_contrast"
    keys = WORD_KEYS

    def __call__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The symmetric InfoNCE of one micro-batch's occurrences, or ``None`` with fewer than two (no negative)."""
        count = batch["word_input_ids"].shape[0] // 2
        if count < 2:
            return None
        hidden = model.get_encoder()(input_ids=batch["word_input_ids"],
                                     attention_mask=batch["word_attention_mask"]).last_hidden_state  # (2N, T, d)
        weights = batch["word_token_mask"].unsqueeze(-1).to(hidden.dtype)  # (2N, T, 1)
        words = (hidden * weights).sum(1) / weights.sum(1)  # (2N, d): every word has >= 1 token
        a, b = words.split(count)
        return (info_nce(a, b, self.temperature) + info_nce(b, a, self.temperature)) / 2


def word_contrast_parts(options, tokenizer, train_ds) -> dict[str, Any]:
    """The collator's settings for ``--word-contrast-*`` (its class and keyword arguments), and the
    :class:`WordIndex` of ``train_ds`` when ``--word-contrast-occurrences`` is above 1."""
    table = word_table(tokenizer)
    index = None
    if options.word_contrast_occurrences > 1:
        texts = (ids for rows in train_ds.iter(batch_size=4096) for ids in rows["input_ids"])
        index = WordIndex.build(texts, table, options.word_contrast_occurrences)
    return dict(word_table=table, word_erase=options.word_contrast_erase, erase_word=options.word_contrast_erase_word,
                occurrences=options.word_contrast_occurrences, word_index=index)
