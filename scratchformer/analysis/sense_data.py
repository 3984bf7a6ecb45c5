"""The word-sense data: a TSV of occurrences, read and checked row by row (a bad row is a ``DataError`` naming the
file and line), grouped by lemma, and the pairs within each group."""

from __future__ import annotations

import csv
import gzip
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import files
from ..errors import DataError, ScratchformerError, StorageError, quoted
from .words import is_word_character

REQUIRED_COLUMNS = ("lemma", "pos", "synset", "start", "end", "sentence")
GROUP_BY = ("lemma", "lemma_pos")
MAX_PAIRS_PER_GROUP = 20_000  # a lemma with more pairs is scored on a random sample of this many (seeded)
MAX_OCCURRENCES_PER_GROUP = 2_000  # the same for occurrences: its 1-NN search compares each with every other
_EXPECTED = f"a tab-separated UTF-8 file whose header has the columns {' '.join(REQUIRED_COLUMNS)} (gloss optional)"


@dataclass
class SenseExample:
    """One occurrence of a lemma: ``sentence[start:end]`` is the word, ``synset`` its sense."""

    lemma: str
    pos: str
    synset: str
    start: int
    end: int
    sentence: str
    line: int  # line number in the file (header = line 1)

    @property
    def word(self) -> str:
        return self.sentence[self.start : self.end]

    @property
    def sense(self) -> tuple[str, str]:
        """``(pos, synset)``: WordNet synset ids are only unique within one part of speech."""
        return self.pos, self.synset


def read_senses_tsv(path: str | Path) -> list[SenseExample]:
    """Read and check a word-sense TSV (its format: docs/embeddings.md); blank lines are skipped."""
    files.check_file(path, DataError)  # empty, a loop of symbolic links, a named pipe, a device: said as such
    path = Path(path)
    if not path.is_file():
        raise DataError(f"word-sense data {str(path)!r} not found or not a file; expected {_EXPECTED}")
    rows = csv.reader(utf8_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = _header(path, next(rows, None))
    examples = [_example(path, line, row, header) for line, row in enumerate(rows, start=2)
                if any(cell.strip() for cell in row)]
    if not examples:
        raise DataError(f"{path}: no data rows after the header; expected one row per occurrence")
    return examples


def utf8_lines(path: Path) -> Iterator[str]:
    """The file's lines without their ends, decoded one by one so that a bad byte is reported with its line (a BOM
    is dropped; gzip for ``.gz``); a file that cannot be read is a :class:`DataError`."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with files.reading(path), opener(path, "rb") as handle:  # a permission denied names the file and the user
            for number, raw in enumerate(handle, start=1):
                try:
                    yield raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as error:
                    raise DataError(f"{path}:{number}: not UTF-8 text (byte {raw[error.start]:#04x} at column "
                                    f"{error.start + 1}); save the file as UTF-8") from None
    except StorageError:
        raise
    except (OSError, EOFError) as error:  # a truncated or non-gzip .gz
        raise DataError(f"{path}: cannot read the file ({error})") from error


def _header(path: Path, header: list[str] | None) -> list[str]:
    """The column names of the header row; every required column must be there."""
    if not header or not any(cell.strip() for cell in header):
        raise DataError(f"{path}: the file is empty; expected {_EXPECTED}")
    header = [cell.strip() for cell in header]
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; the header has {header}. Expected {_EXPECTED}")
    return header


def _example(path: Path, line: int, row: list[str], header: list[str]) -> SenseExample:
    """One checked data row."""
    where = f"{path}:{line}"
    if len(row) < len(header):
        raise DataError(f"{where}: {len(row)} field(s) where the header has {len(header)}: {row!r} "
                        "(fields are separated by tabs)")
    cell = dict(zip(header, row))
    try:
        start, end = int(cell["start"]), int(cell["end"])
    except ValueError:
        raise DataError(f"{where}: start={cell['start']!r} and end={cell['end']!r} must be integers "
                        "(character positions in the sentence)") from None
    _check_span(where, cell["sentence"], start, end)
    for name in ("lemma", "pos", "synset"):
        if not cell[name].strip():
            raise DataError(f"{where}: the {name} column is empty")
    return SenseExample(lemma=cell["lemma"].strip(), pos=cell["pos"].strip(), synset=cell["synset"].strip(),
                        start=start, end=end, sentence=cell["sentence"], line=line)


def _check_span(where: str, sentence: str, start: int, end: int) -> None:
    where = f"{where}: span {start}-{end}"
    if not 0 <= start < end <= len(sentence):
        raise DataError(f"{where} does not fit the {len(sentence)}-character sentence {quoted(sentence)}")
    target = sentence[start:end]
    if target != target.strip():
        raise DataError(f"{where} selects {quoted(target)}, which starts or ends with whitespace, in {quoted(sentence)}")
    if (start > 0 and is_word_character(sentence[start - 1])) or (end < len(sentence) and is_word_character(sentence[end])):
        raise DataError(f"{where} selects {quoted(target)}, which starts or ends inside a word of {quoted(sentence)} "
                        "(off by one?)")


def group_examples(examples: list[SenseExample], group_by: str = "lemma") -> list[list[int]]:
    """Indices of the occurrences of each lemma (or lemma + part of speech), groups of two or more only."""
    if group_by not in GROUP_BY:
        raise ScratchformerError(f"group_by={group_by!r} must be one of {GROUP_BY}")
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[(ex.lemma, ex.pos) if group_by == "lemma_pos" else (ex.lemma,)].append(i)
    return [members for members in groups.values() if len(members) >= 2]


def pairs_within(groups: list[list[int]], max_pairs_per_group: int = MAX_PAIRS_PER_GROUP, seed: int = 0,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of members of the same group, as two parallel index arrays: every pair of a group, or past
    ``max_pairs_per_group`` pairs a seeded sample of that many, so that nothing grows with the square of a group."""
    rng = np.random.default_rng(seed)
    firsts, seconds = [], []
    for members in groups:
        n = len(members)
        if n * (n - 1) // 2 <= max_pairs_per_group:
            pairs = np.stack(np.triu_indices(n, 1), axis=1)  # every (i < j), in order
        else:
            pairs = _sample_pairs(n, max_pairs_per_group, rng)
        ids = np.asarray(members, dtype=np.int64)
        firsts.append(ids[pairs[:, 0]])
        seconds.append(ids[pairs[:, 1]])
    empty = np.zeros(0, dtype=np.int64)
    return (np.concatenate(firsts) if firsts else empty), (np.concatenate(seconds) if seconds else empty)


def sample_members(groups: list[list[int]], most: int, seed: int = 0) -> list[list[int]]:
    """Each group as it is, or, with more than ``most`` members, a seeded random sample of ``most`` of them (in
    their order): what is scored of a lemma is bounded, however often it occurs."""
    rng = np.random.default_rng(seed)
    return [members if len(members) <= most else sorted(rng.choice(members, size=most, replace=False).tolist())
            for members in groups]


def _sample_pairs(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct pairs ``(i < j)`` of ``range(n)``, uniformly at random, in O(count) memory."""
    chosen = np.zeros((0, 2), dtype=np.int64)
    while len(chosen) < count:
        draws = rng.integers(0, n, size=(2 * count, 2))
        draws = np.sort(draws[draws[:, 0] != draws[:, 1]], axis=1)
        chosen = np.unique(np.concatenate([chosen, draws]), axis=0)
    return chosen[rng.permutation(len(chosen))[:count]]
