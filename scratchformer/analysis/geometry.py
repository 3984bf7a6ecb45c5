"""The embedding-geometry measures of Ethayarajh (EMNLP 2019) on tensors, raw and standardised, and their report
(the measures and where they follow the author's code: docs/embeddings.md, "The measures")."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .sense_data import pairs_within

MAX_PAIRS_PER_WORD = 1000  # the author's num_samples: every pair up to this many, a seeded sample beyond
MEV_MIN_OCCURRENCES = 5  # MEV only for words seen at least this often (and the author's min_count)
ZERO_VARIANCE = 1e-12  # relative: below this share of the mean squared norm, a word's vectors count as identical
BLOCK_ELEMENTS = 1 << 23  # numbers of one block of padded word occurrences (64 MB in float64), whatever the data

# (model, layer, value, what): kawine/contextual's published values (docs/embeddings.md), marked on the plots
REFERENCE_VALUES = {
    "anisotropy_baseline": [("BERT-base", 0, 0.105, "layer 0"), ("BERT-base", 11, 0.675, "layer 11, highest"),
                            ("BERT-base", 12, 0.477, "layer 12, last"), ("GPT-2", 0, 0.611, "layer 0"),
                            ("GPT-2", 12, 0.978, "layer 12, last")],
    "intra_sentence_similarity": [("BERT-base", 0, 0.435, "layer 0"), ("BERT-base", 11, 0.87, "layer 11, highest"),
                                  ("BERT-base", 12, 0.776, "layer 12, last")],
    "self_similarity": [("static embedding", None, 1.0, "by construction")],
    "mev": [("static embedding", None, 1.0, "by construction")],
}


def reference_note(measure: str) -> str:
    """What the dotted grey lines of ``measure``'s plot are: published values, or a static embedding's 1 (the
    author's repository publishes no aggregate self-similarity or MEV)."""
    if any(layer is not None for _, layer, _, _ in REFERENCE_VALUES[measure]):
        return "dotted grey: published values (kawine/contextual, 12-layer models)"
    return "dotted grey: a static embedding, 1 by construction (no published value)"


MEASURES = ("self_similarity", "intra_sentence_similarity", "mev", "anisotropy_baseline")
MEASURE_NAMES = {"self_similarity": "self-similarity", "intra_sentence_similarity": "intra-sentence similarity",
                 "mev": "maximum explainable variance (MEV)", "anisotropy_baseline": "anisotropy baseline"}
# What ``scratchformer geometry`` writes into its folder, and ``compare --html`` reads back from its own
GEOMETRY_JSON, WORDS_CSV = "geometry.json", "geometry_words.csv"
PLOT_FILES = {measure: f"geometry_{measure}.png" for measure in MEASURES}


def unit(x: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` scaled to length 1 (a zero row stays zero)."""
    return torch.nn.functional.normalize(x.double(), dim=-1)


def mean_pairwise_cosine(vectors: torch.Tensor) -> float:
    """The mean cosine over all pairs ``i < j`` of the rows of ``(n, dims)`` ``vectors``, in O(n) memory:
    ``(|sum of unit vectors|^2 - n) / (n (n - 1))``. ``nan`` for fewer than two rows."""
    n = vectors.shape[0]
    if n < 2:
        return float("nan")
    u = unit(vectors)
    total = u.sum(dim=0)
    return float(((total @ total) - (u * u).sum()) / (n * (n - 1)))


def intra_sentence_similarity(words: torch.Tensor, sizes: list[int] | None = None) -> torch.Tensor:
    """Mean cosine between each word of a sentence and the sentence's mean word vector: ``(..., words, dims)`` ->
    ``(...)``; with ``sizes``, several sentences of ``sizes[k]`` words one after another -> ``(..., sentences)``."""
    x = words.double()
    if sizes is None:
        return torch.nn.functional.cosine_similarity(x, x.mean(dim=-2, keepdim=True), dim=-1).mean(dim=-1)
    count = torch.tensor(sizes, dtype=torch.float64)
    sentence = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes, dtype=torch.long))
    means = x.new_zeros(*x.shape[:-2], len(sizes), x.shape[-1]).index_add_(-2, sentence, x) / count[:, None]
    cosines = torch.nn.functional.cosine_similarity(x, means.index_select(-2, sentence), dim=-1)
    return cosines.new_zeros(*x.shape[:-2], len(sizes)).index_add_(-1, sentence, cosines) / count


def mev(vectors: torch.Tensor, counts: torch.Tensor | None = None) -> torch.Tensor:
    """Share of the variance of ``(..., n, dims)`` centred occurrence vectors that their first principal component
    explains (scikit-learn's ``PCA(n_components=1)``) -> ``(...)``; ``counts`` marks the rest of each row as padding.
    Identical vectors score 1: one static vector replaces them exactly."""
    x = vectors.double()
    if counts is None:
        centred = x - x.mean(dim=-2, keepdim=True)
    else:
        kept = (torch.arange(x.shape[-2]) < counts[..., None]).to(x.dtype)[..., None]  # (..., n, 1)
        x = x * kept
        centred = (x - x.sum(dim=-2, keepdim=True) / counts[..., None, None].to(x.dtype)) * kept
    small_side = centred @ centred.mT if centred.shape[-2] <= centred.shape[-1] else centred.mT @ centred
    first = torch.linalg.eigvalsh(small_side)[..., -1]  # ascending: the last is the first component's variance
    total = (centred * centred).sum(dim=(-2, -1))
    scale = (x * x).sum(dim=(-2, -1)).clamp_min(1e-300)
    identical = total <= ZERO_VARIANCE * scale
    return torch.where(identical, torch.ones_like(total), first / total.clamp_min(1e-300))


def word_measures(vectors: torch.Tensor, groups: list[list[int]], pair_a: np.ndarray, pair_b: np.ndarray,
                  pair_word: np.ndarray, transform: Any = None, block: int = BLOCK_ELEMENTS,
                  progress: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row and word of ``(rows, occurrences, dims)`` ``vectors``: the self-similarity (mean cosine of its pairs)
    and the MEV (``nan`` below :data:`MEV_MIN_OCCURRENCES`), ``(rows, words)`` each. Words go a block of about
    ``block`` numbers at a time, so that memory does not grow with the data; ``transform`` standardises each block."""
    rows, dims = vectors.shape[0], vectors.shape[-1]
    place = np.zeros(vectors.shape[1], dtype=np.int64)  # an occurrence's place among its word's occurrences
    for group in groups:
        place[group] = np.arange(len(group))
    cosines = np.zeros((rows, len(pair_a)))
    word_mev = np.full((rows, len(groups)), np.nan)
    order = sorted(range(len(groups)), key=lambda w: len(groups[w]))  # words of similar counts share a block
    slot_in_block = np.zeros(len(groups), dtype=np.int64)
    start = 0
    while start < len(order):
        stop = start + 1  # ascending counts: the block's last word is its widest
        while stop < len(order) and rows * (stop + 1 - start) * len(groups[order[stop]]) * dims <= block:
            stop += 1
        words = order[start:stop]
        widest = len(groups[words[-1]])
        counts = torch.tensor([len(groups[w]) for w in words])
        index = torch.tensor([groups[w] + [groups[w][0]] * (widest - len(groups[w])) for w in words])  # padded
        x = vectors[:, index.flatten()].double()
        if transform is not None:
            x = transform(x)
        x = x.reshape(rows, len(words), widest, dims) * (torch.arange(widest) < counts[:, None])[..., None]
        unit_x = unit(x)
        slot_in_block[words] = np.arange(len(words))
        mine = np.flatnonzero(np.isin(pair_word, words))
        gram = unit_x @ unit_x.mT  # (rows, words, n, n): the cosine of every pair of a word's occurrences
        cosines[:, mine] = gram[:, torch.from_numpy(slot_in_block[pair_word[mine]]),
                                torch.from_numpy(place[pair_a[mine]]), torch.from_numpy(place[pair_b[mine]])].numpy()
        big = torch.nonzero(counts >= MEV_MIN_OCCURRENCES).flatten()
        if len(big):
            word_mev[:, np.asarray(words)[big.numpy()]] = mev(x[:, big], counts[big].expand(rows, -1)).numpy()
        if progress is not None:
            progress.update(len(words))
        start = stop
    count = np.bincount(pair_word, minlength=len(groups))
    with np.errstate(invalid="ignore", divide="ignore"):
        word_self = np.stack([np.bincount(pair_word, weights=c, minlength=len(groups)) for c in cosines]) / count
    return word_self, word_mev


def word_pairs(groups: list[list[int]], max_pairs: int = MAX_PAIRS_PER_WORD, seed: int = 0,
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of occurrences of each word (``groups[w]``: its rows): every pair up to ``max_pairs``, a seeded sample
    of that many beyond. Returns ``(pair_a, pair_b, pair_word)``."""
    pair_a, pair_b = pairs_within(groups, max_pairs, seed)
    counts = [min(len(g) * (len(g) - 1) // 2, max_pairs) for g in groups]
    return pair_a, pair_b, np.repeat(np.arange(len(groups)), counts)


class Standardiser:
    """Per-dimension mean and standard deviation of each row's vectors, accumulated over a sample, then
    ``(x - mean) / std`` (a dimension without variance is only centred)."""

    def __init__(self, rows: int, dims: int) -> None:
        self.count = 0
        self.total = torch.zeros(rows, dims, dtype=torch.float64)
        self.squares = torch.zeros(rows, dims, dtype=torch.float64)

    def add(self, vectors: torch.Tensor) -> None:
        """Add ``(rows, n, dims)`` vectors (n occurrences at every row)."""
        x = vectors.double()
        self.count += x.shape[1]
        self.total += x.sum(dim=1)
        self.squares += (x * x).sum(dim=1)

    @property
    def mean(self) -> torch.Tensor:
        return self.total / max(self.count, 1)

    @property
    def std(self) -> torch.Tensor:
        variance = (self.squares / max(self.count, 1) - self.mean ** 2).clamp_min(0)
        std = variance.sqrt()
        return torch.where(std > 1e-12 * (self.mean.abs() + 1), std, torch.ones_like(std))

    def fit(self, vectors: torch.Tensor) -> Standardiser:
        """Estimate from ``(rows, n, dims)`` vectors at once (small samples: scripts/senses_standardised.py)."""
        self.add(vectors)
        return self

    def __call__(self, vectors: torch.Tensor, row: int | None = None) -> torch.Tensor:
        """``vectors`` standardised: ``(rows, n, dims)`` with every row's statistics, or ``(n, dims)`` of ``row``."""
        mean, std = self.mean, self.std
        if row is not None:
            return (vectors.double() - mean[row]) / std[row]
        return (vectors.double() - mean[:, None]) / std[:, None]


@dataclass
class GeometryRow:
    """The measures of one row: ``layer`` is ``"learned"`` (the table), 0 (embedding-layer output) or k."""

    layer: int | str
    kind: str
    description: str
    self_similarity: float
    intra_sentence_similarity: float
    mev: float
    anisotropy_baseline: float
    mev_baseline: float  # first-PC share of the baseline's random occurrences, what MEV is adjusted by
    self_similarity_adjusted: float
    intra_sentence_similarity_adjusted: float
    mev_adjusted: float
    # the same after per-dimension standardisation (None when it was switched off)
    self_similarity_standardised: float | None = None
    intra_sentence_similarity_standardised: float | None = None
    mev_standardised: float | None = None
    anisotropy_baseline_standardised: float | None = None
    mev_baseline_standardised: float | None = None
    self_similarity_adjusted_standardised: float | None = None
    intra_sentence_similarity_adjusted_standardised: float | None = None
    mev_adjusted_standardised: float | None = None
    note: str = ""


def geometry_row(layer: int | str, kind: str, description: str, raw: dict[str, float],
                 standardised: dict[str, float] | None, note: str = "") -> GeometryRow:
    """A row from the four measures plus ``mev_baseline`` (``raw``, and ``standardised`` or ``None``), with the
    adjusted values: self- and intra-sentence similarity minus the anisotropy baseline, MEV minus its baseline."""

    def adjusted(values: dict[str, float]) -> dict[str, float]:
        return {"self_similarity_adjusted": values["self_similarity"] - values["anisotropy_baseline"],
                "intra_sentence_similarity_adjusted": values["intra_sentence_similarity"]
                - values["anisotropy_baseline"],
                "mev_adjusted": values["mev"] - values["mev_baseline"]}

    fields: dict[str, Any] = {**raw, **adjusted(raw)}
    if standardised is not None:
        fields.update({f"{name}_standardised": value
                       for name, value in {**standardised, **adjusted(standardised)}.items()})
    return GeometryRow(layer=layer, kind=kind, description=description, note=note, **fields)


@dataclass
class GeometryReport:
    """The geometry of one model on one data set: one :class:`GeometryRow` per row (learned, 0, 1..N)."""

    model: str
    source: str
    data: str
    num_layers: int
    sentences: int
    words: int  # word types measured (at least min_occurrences occurrences, at most max_words of them)
    eligible_words: int  # word types with at least min_occurrences occurrences
    occurrences: int  # occurrence vectors kept for self-similarity and MEV
    pairs: int  # occurrence pairs behind the self-similarity
    mev_words: int  # words with at least MEV_MIN_OCCURRENCES occurrences
    intra_sentences: int  # sentences with at least two words
    baseline_sentences: int  # sentences sampled for the baseline and the standardisation
    truncated_sentences: int  # longer than the model's maximum: words past the cut left out
    identical_token_pairs: int  # pairs whose two occurrences have the same tokens (learned cosine exactly 1)
    settings: dict[str, Any] = field(default_factory=dict)
    random_init: bool = False
    rows: list[GeometryRow] = field(default_factory=list)
    word_rows: list[dict[str, Any]] = field(default_factory=list)  # the per-word CSV; not in the JSON

    @property
    def standardised(self) -> bool:
        return bool(self.rows) and self.rows[0].self_similarity_standardised is not None

    def as_dict(self) -> dict[str, Any]:
        payload = asdict(self)
        payload.pop("word_rows")
        return _finite(payload)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GeometryReport:
        """The report that :meth:`as_dict` (one entry of ``geometry.json``'s ``models``) describes."""
        return cls(**{**data, "rows": [GeometryRow(**_nan(row)) for row in data["rows"]]})

    def table(self) -> str:
        """The short table printed to the terminal."""
        s = self.settings
        lines = [
            f"model: {self.model}",
            f"data: {self.data}: {self.sentences:,} sentences; {self.words:,} of {self.eligible_words:,} words with "
            f">= {s.get('min_occurrences', '?')} occurrences ({self.occurrences:,} occurrences, {self.pairs:,} "
            f"pairs); MEV on {self.mev_words:,} words with >= {MEV_MIN_OCCURRENCES}; baseline: "
            f"{self.baseline_sentences:,} sampled sentences, one word each",
            *([f"{self.truncated_sentences:,} sentence(s) longer than the model's maximum: words past the cut are "
               "left out"] if self.truncated_sentences else []),
            "adjusted = measure - anisotropy baseline (MEV - the random words' MEV)"
            + ("; std = after per-dimension standardisation" if self.standardised else ""),
            f"{'layer':>8}  {'self':>6} {'intra':>6} {'MEV':>6} {'base':>6} | {'self-b':>6} {'intra-b':>7} "
            f"{'MEV-b':>6}" + (f" | std: {'self':>6} {'intra':>6} {'MEV':>6} {'base':>6} {'self-b':>6}"
                              if self.standardised else ""),
        ]
        for r in self.rows:
            line = (f"{r.layer!s:>8}  {r.self_similarity:6.3f} {r.intra_sentence_similarity:6.3f} {r.mev:6.3f} "
                    f"{r.anisotropy_baseline:6.3f} | {r.self_similarity_adjusted:6.3f} "
                    f"{r.intra_sentence_similarity_adjusted:7.3f} {r.mev_adjusted:6.3f}")
            if self.standardised:
                line += (f" |      {r.self_similarity_standardised:6.3f} {r.intra_sentence_similarity_standardised:6.3f}"
                         f" {r.mev_standardised:6.3f} {r.anisotropy_baseline_standardised:6.3f} "
                         f"{r.self_similarity_adjusted_standardised:6.3f}")
            lines.append(line)
        lines += [f"note: {r.note}" for r in self.rows if r.note]
        return "\n".join(lines)


def _finite(value: Any) -> Any:
    """``nan`` as ``None`` (JSON has no nan), recursively."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _nan(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON row back: ``None`` as ``nan`` for the measures that are always computed."""
    always = {*MEASURES, "mev_baseline", "self_similarity_adjusted", "intra_sentence_similarity_adjusted",
              "mev_adjusted"}
    return {k: float("nan") if v is None and k in always else v for k, v in row.items()}
