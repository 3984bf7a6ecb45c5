"""The data of the geometry study: its sentences, and which words and occurrences a run keeps (chosen without a
model, so that memory does not grow with the data)."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import files
from ..errors import DataError, ScratchformerError
from .sense_data import REQUIRED_COLUMNS, read_senses_tsv, utf8_lines
from .words import sentence_words

MIN_OCCURRENCES = 5  # the author's min_count
MAX_WORDS = 2000  # word types measured (a seeded sample of the eligible ones beyond)
MAX_OCCURRENCES = 50  # occurrences kept per word: 1,225 pairs, enough for the 1,000 sampled ones
SAMPLE_SENTENCES = 1000  # the author's num_samples: the baseline and standardisation sample
_POSITION_BITS = 20  # an occurrence is coded as sentence << bits | word position


@dataclass
class Sentences:
    """The distinct sentences of a data file, and what kind of file it was."""

    path: str
    format: str  # "tsv" (word-sense data) or "text" (one sentence a line)
    sentences: list[str]


def read_sentences(path: str | Path, max_sentences: int | None = None) -> Sentences:
    """The distinct sentences of ``path`` (the first ``max_sentences`` of them), those with at least one word.
    Raises :class:`~scratchformer.errors.DataError` for a missing, empty or non-UTF-8 file."""
    if max_sentences is not None and max_sentences < 2:  # 0 would read all, -1 all but the last, in silence
        raise ScratchformerError(f"--max-sentences {max_sentences!r} must be an integer >= 2 (or left out for all)")
    files.check_file(path, DataError)  # empty, a loop of symbolic links, a named pipe, a device: said as such
    path = Path(path)
    if not path.is_file():
        raise DataError(f"data {str(path)!r} not found or not a file; give a word-sense TSV (the format of "
                        "`scratchformer senses`) or a plain text file with one sentence a line")
    first = next((line for line in utf8_lines(path) if line.strip()), None)
    if first is None:
        raise DataError(f"{path}: the file is empty; give sentences, one a line, or a word-sense TSV")
    if set(REQUIRED_COLUMNS) <= {cell.strip() for cell in first.split("\t")}:
        kind, texts = "tsv", (example.sentence for example in read_senses_tsv(path))
    else:
        kind, texts = "text", (line.strip() for line in utf8_lines(path))
    sentences = [text for text in dict.fromkeys(texts) if sentence_words(text)]
    if not sentences:
        raise DataError(f"{path}: no line has a word (letters or digits); give sentences, one a line")
    return Sentences(str(path), kind, sentences[:max_sentences] if max_sentences else sentences)


@dataclass
class GeometryPlan:
    """What a run keeps: the words, where their kept occurrences are, and the baseline sample."""

    sentences: list[str]
    words: list[str]  # the word types measured
    counts: list[int]  # in how many sentences each occurs
    eligible: int  # word types with at least min_occurrences occurrences
    slot_word: np.ndarray  # the word (index into words) of each kept occurrence ("slot")
    slots: dict[int, list[tuple[int, int]]]  # sentence -> [(position among its words, slot)]
    sample: list[int]  # sentences of the baseline and standardisation sample (one word each)
    min_occurrences: int
    max_words: int
    max_occurrences: int
    seed: int

    @property
    def occurrences(self) -> int:
        return len(self.slot_word)


def plan_geometry(sentences: list[str], *, min_occurrences: int = MIN_OCCURRENCES, max_words: int = MAX_WORDS,
                  max_occurrences: int = MAX_OCCURRENCES, sample_sentences: int = SAMPLE_SENTENCES,
                  seed: int = 0) -> GeometryPlan:
    """Choose at most ``max_words`` words, ``max_occurrences`` of each, and the baseline sample (seeded); a
    :class:`~scratchformer.errors.DataError` when no word occurs in ``min_occurrences`` different sentences."""
    for name, value, least in (("--min-occurrences", min_occurrences, 2), ("--max-words", max_words, 1),
                               ("--max-occurrences", max_occurrences, 2), ("--sample-sentences", sample_sentences, 2)):
        if value < least:  # numpy's samplers would fail on a negative size, naming no option
            raise ScratchformerError(f"{name} {value!r} must be an integer >= {least}")
    words_of = [[w for w, _, _ in sentence_words(text)] for text in sentences]  # split once, used twice below
    counts: Counter = Counter()  # in order of first appearance (not a set's order, which changes per process)
    for words in words_of:
        counts.update(list(dict.fromkeys(words)))  # once per sentence
    eligible = [w for w, n in counts.items() if n >= min_occurrences]
    if not eligible:
        _no_words(counts, min_occurrences)
    rng = np.random.default_rng(seed)
    chosen = (eligible if len(eligible) <= max_words
              else [eligible[i] for i in sorted(rng.choice(len(eligible), max_words, replace=False))])
    index = {w: k for k, w in enumerate(chosen)}
    found: dict[int, list[int]] = defaultdict(list)  # word -> coded occurrences
    for s, words in enumerate(words_of):
        for w in dict.fromkeys(words):  # a word's first occurrence in the sentence
            if w in index:
                found[index[w]].append(s << _POSITION_BITS | words.index(w))
    slot_word, slots = [], defaultdict(list)
    for k in range(len(chosen)):
        coded = found[k]
        if len(coded) > max_occurrences:
            coded = [coded[i] for i in sorted(rng.choice(len(coded), max_occurrences, replace=False))]
        for code in coded:
            slots[code >> _POSITION_BITS].append((code & ((1 << _POSITION_BITS) - 1), len(slot_word)))
            slot_word.append(k)
    sample = sorted(rng.choice(len(sentences), min(sample_sentences, len(sentences)), replace=False).tolist())
    return GeometryPlan(sentences=sentences, words=chosen, counts=[counts[w] for w in chosen], eligible=len(eligible),
                        slot_word=np.asarray(slot_word, dtype=np.int64), slots=dict(slots), sample=sample,
                        min_occurrences=min_occurrences, max_words=max_words, max_occurrences=max_occurrences,
                        seed=seed)


def _no_words(counts: Counter, min_occurrences: int) -> None:
    most = counts.most_common(1)
    if not most or most[0][1] < 2:
        raise DataError("no word occurs in two different sentences: self-similarity compares a word's occurrences "
                        "across sentences; give more sentences that share words")
    word, n = most[0]
    raise DataError(f"no word occurs in {min_occurrences} different sentences (the most frequent, {word!r}, in {n}); "
                    f"give more sentences or lower --min-occurrences (at least 2)")
