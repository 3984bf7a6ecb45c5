"""``scratchformer geometry``: the measures of :mod:`~scratchformer.analysis.geometry` over a model, streamed.

A run makes two passes over the model, each sentence pooled into word vectors for every row at once (learned table,
embedding-layer output, every layer; a word's sub-tokens pooled as :func:`~scratchformer.analysis.pooling.pool_word`
does):

1. the baseline sample (:data:`~scratchformer.analysis.geometry_data.SAMPLE_SENTENCES` sentences): each row's
   per-dimension mean and standard deviation over all their word occurrences, and one occurrence per sentence
   for the anisotropy baseline;
2. every sentence: its intra-sentence similarity (raw and standardised, with the statistics of pass 1), and the
   occurrences that the plan keeps for self-similarity and MEV, written into one preallocated tensor.

Nothing else is kept, so memory is bounded by the plan (``max_words x max_occurrences`` vectors per row), not by the
number of sentences; sentences are tokenized a chunk at a time.
"""

from __future__ import annotations

import bisect
import csv
import io
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import files
from ..errors import ScratchformerError
from .encoding import PROGRESS_MIN_TEXTS, Encoded
from .extractor import EmbeddingExtractor, LoadedModel, load_extractor
from .geometry import (
    MAX_PAIRS_PER_WORD,
    MEASURES,
    MEV_MIN_OCCURRENCES,
    REFERENCE_VALUES,
    GeometryReport,
    Standardiser,
    geometry_row,
    intra_sentence_similarity,
    mean_pairwise_cosine,
    mev,
    self_similarities,
    word_pairs,
)
from .geometry_data import (
    MAX_OCCURRENCES,
    MAX_WORDS,
    MIN_OCCURRENCES,
    SAMPLE_SENTENCES,
    GeometryPlan,
    check_plan_options,
    plan_geometry,
    read_sentences,
)
from .layers import LEARNED, describe_layer, input_embedding_table, layer_kind, vectors_at
from .output import check_apart_from_inputs, check_output_folder, output_folder, write_json
from .pooling import check_word_pooling, word_tokens_used
from .words import covering_tokens, words_kept

CHUNK = 512  # sentences tokenized at once: the token bookkeeping of a chunk is all that is held
DEFAULT_MODELS = ["small", "minilm"]

# ----------------------------------------------------------------------------------------------------------------
# Word vectors of one sentence, every row at once
# ----------------------------------------------------------------------------------------------------------------


def word_token_indices(encoded: Encoded, spans: list[tuple[int, int]]) -> list[list[int]]:
    """The tokens covering each character span, as :func:`~scratchformer.analysis.words.covering_tokens` finds them
    (non-special tokens overlapping the span), in one sweep over the sentence instead of one per word."""
    kept = [(a, b, i) for i, ((a, b), special) in enumerate(zip(encoded.offsets, encoded.special))
            if not special and a < b]
    ends = [b for _, b, _ in kept]
    if any(x > y for x, y in zip(ends, ends[1:])):  # offsets out of order: ask covering_tokens word by word
        return [covering_tokens(encoded, start, end)[0] for start, end in spans]
    found = []
    for start, end in spans:
        j, tokens = bisect.bisect_right(ends, start), []  # the first token ending after the span starts
        while j < len(kept) and kept[j][0] < end:
            tokens.append(kept[j][2])
            j += 1
        found.append(tokens)
    return found


def learned_table(model: torch.nn.Module) -> torch.Tensor | None:
    """The input embedding table, or ``None`` when the model has none (then there is no learned row)."""
    try:
        return input_embedding_table(model)
    except ScratchformerError:
        return None


def sentence_rows(model: torch.nn.Module, encoded: Encoded, hidden: torch.Tensor, pooling: str,
                  ) -> tuple[list[int], list[list[int]], torch.Tensor]:
    """The sentence's words (those not cut off) as ``(positions, token indices, vectors)``: ``vectors`` is
    ``(rows, words, dims)``, rows = learned, 0, 1..N (no learned row for a model without a table as wide as its
    hidden states, such as ALBERT's); ``positions`` index the sentence's
    :func:`~scratchformer.analysis.words.sentence_words`. A word that no token covers is left out."""
    words = words_kept(encoded)
    groups = word_token_indices(encoded, [(start, end) for _, start, end in words])
    positions = [p for p, g in enumerate(groups) if g]
    used = [word_tokens_used(groups[p], pooling) for p in positions]
    weights = torch.zeros(len(used), hidden.shape[1])  # (words, tokens): the pooling as one matrix product
    for w, tokens in enumerate(used):
        weights[w, tokens] = 1.0 / len(tokens)
    contextual = weights @ hidden  # (layers + 1, words, dims)
    table = learned_table(model)
    if table is None or table.shape[1] != hidden.shape[-1]:
        return positions, [groups[p] for p in positions], contextual
    learned = weights @ vectors_at(model, encoded.input_ids, hidden, LEARNED)  # (words, dims)
    return positions, [groups[p] for p in positions], torch.cat([learned[None], contextual])


def stream_rows(extractor: EmbeddingExtractor, sentences: list[str], indices: list[int], pooling: str,
                visit: Callable[[int, Encoded, list[int], list[list[int]], torch.Tensor], None], bar: Any) -> int:
    """Run the sentences ``indices`` through the model a chunk at a time and call ``visit(sentence, encoded,
    positions, token indices, vectors)`` with each one's :func:`sentence_rows`; returns how many were truncated
    (their truncation warnings are counted here instead of repeated per chunk)."""
    encoder = extractor.text_encoder
    progress, encoder.progress = encoder.progress, False  # the caller's bar spans both passes
    truncated = 0
    try:
        for start in range(0, len(indices), CHUNK):
            part = indices[start : start + CHUNK]

            def keep(i: int, e: Encoded, hidden: torch.Tensor, part: list[int] = part) -> bool:
                positions, groups, vectors = sentence_rows(extractor.model, e, hidden, pooling)
                if positions:
                    visit(part[i], e, positions, groups, vectors)
                bar.update(1)
                return e.truncated

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=r".*longer than the model's maximum")
                truncated += sum(encoder.map([sentences[s] for s in part], keep))
    finally:
        encoder.progress = progress
    return truncated


# ----------------------------------------------------------------------------------------------------------------
# One model
# ----------------------------------------------------------------------------------------------------------------


class _Accumulator:
    """What the two passes collect for one model."""

    def __init__(self, plan: GeometryPlan, standardise: bool) -> None:
        self.plan, self.standardise = plan, standardise
        self.baseline: list[torch.Tensor] = []  # (rows, dims) per sampled sentence
        self.intra_sentences = 0
        self.valid = np.zeros(plan.occurrences, dtype=bool)  # False where the word was cut off or not covered
        self.tokens: list[tuple[int, ...]] = [()] * plan.occurrences
        self.store: torch.Tensor | None = None

    def _allocate(self, vectors: torch.Tensor) -> None:
        """Sized by the first sentence's ``(rows, words, dims)``."""
        if self.store is not None:
            return
        rows, _, dims = vectors.shape
        self.stats = Standardiser(rows, dims)
        self.intra = torch.zeros(rows, dtype=torch.float64)
        self.intra_std = torch.zeros(rows, dtype=torch.float64)
        self.store = torch.zeros(rows, self.plan.occurrences, dims)  # the kept occurrences, every row

    def sample(self, s: int, e: Encoded, positions: list[int], groups: list[list[int]], vectors: torch.Tensor,
               ) -> None:
        """Pass 1: statistics for the standardisation, one random occurrence for the baseline."""
        self._allocate(vectors)
        self.stats.add(vectors)
        pick = int(np.random.default_rng([self.plan.seed, s]).integers(len(positions)))
        self.baseline.append(vectors[:, pick].clone())

    def sentence(self, s: int, e: Encoded, positions: list[int], groups: list[list[int]], vectors: torch.Tensor,
                 ) -> None:
        """Pass 2: intra-sentence similarity, and the occurrences the plan keeps."""
        self._allocate(vectors)
        if len(positions) >= 2:
            self.intra += intra_sentence_similarity(vectors)
            if self.standardise:
                self.intra_std += intra_sentence_similarity(self.stats(vectors))
            self.intra_sentences += 1
        where = {p: k for k, p in enumerate(positions)}
        for position, slot in self.plan.slots.get(s, ()):
            k = where.get(position)
            if k is not None:
                self.store[:, slot] = vectors[:, k]
                self.valid[slot] = True
                self.tokens[slot] = tuple(e.input_ids[t] for t in groups[k])


def measure_geometry(extractor: EmbeddingExtractor, plan: GeometryPlan, *, pooling: str = "mean",
                     standardise: bool = True, progress: bool | None = None, model_label: str | None = None,
                     source: str = "", data_label: str = "", random_init: bool = False) -> GeometryReport:
    """The geometry of ``extractor``'s model on the sentences of ``plan`` (see the module docstring)."""
    check_word_pooling(pooling)
    num_layers = extractor.num_layers
    label = model_label or extractor.model_name
    acc = _Accumulator(plan, standardise)
    show = progress if progress is not None else len(plan.sample) + len(plan.sentences) >= PROGRESS_MIN_TEXTS
    from tqdm.auto import tqdm

    with tqdm(total=len(plan.sample) + len(plan.sentences), desc=f"geometry: {label.split(' (')[0]}", unit="text",
              disable=not show) as bar:
        stream_rows(extractor, plan.sentences, plan.sample, pooling, acc.sample, bar)
        truncated = stream_rows(extractor, plan.sentences, list(range(len(plan.sentences))), pooling, acc.sentence,
                                bar)
    if len(acc.baseline) < 2:
        raise ScratchformerError("the baseline needs words from at least two sentences; give more sentences")
    return _report(acc, plan, num_layers, label=label, source=source, data_label=data_label, pooling=pooling,
                   truncated=truncated, random_init=random_init)


def _word_groups(acc: _Accumulator, plan: GeometryPlan) -> tuple[list[int], list[list[int]]]:
    """The words with at least two kept occurrences, and their occurrences (slots)."""
    slots: list[list[int]] = [[] for _ in plan.words]
    for slot in np.flatnonzero(acc.valid):
        slots[plan.slot_word[slot]].append(int(slot))
    words = [w for w, group in enumerate(slots) if len(group) >= 2]
    return words, [slots[w] for w in words]


def _measures(vectors: torch.Tensor, baseline: torch.Tensor, groups: list[list[int]],
              pairs: tuple[np.ndarray, np.ndarray, np.ndarray], intra: torch.Tensor,
              standardiser: Standardiser | None) -> tuple[list[dict[str, float]], np.ndarray, np.ndarray]:
    """Every row's measures from the kept occurrences ``(rows, slots, dims)``, the baseline sample ``(rows, n,
    dims)`` and the intra-sentence means, standardised first when a ``standardiser`` is given; with the per-word
    self-similarity and MEV ``(rows, words)`` (MEV ``nan`` below :data:`MEV_MIN_OCCURRENCES`)."""
    rows = vectors.shape[0]
    prepare = standardiser if standardiser is not None else (lambda x, row=None: x)
    word_self = np.stack([self_similarities(vectors[r], *pairs, len(groups),
                                            transform=None if standardiser is None else partial(standardiser, row=r))
                          for r in range(rows)])
    word_mev = np.full((rows, len(groups)), np.nan)
    for w, group in enumerate(groups):
        if len(group) >= MEV_MIN_OCCURRENCES:
            word_mev[:, w] = mev(prepare(vectors[:, group])).numpy()
    base = prepare(baseline)
    base_mev = mev(base).numpy()
    values = [{"self_similarity": float(np.nanmean(word_self[r])),
               "intra_sentence_similarity": float(intra[r]),
               "mev": float(np.nanmean(word_mev[r])) if np.isfinite(word_mev[r]).any() else float("nan"),
               "anisotropy_baseline": mean_pairwise_cosine(base[r]),
               "mev_baseline": float(base_mev[r])} for r in range(rows)]
    return values, word_self, word_mev


def _report(acc: _Accumulator, plan: GeometryPlan, num_layers: int, *, label: str, source: str, data_label: str,
            pooling: str, truncated: int, random_init: bool) -> GeometryReport:
    """The rows, the per-word lines and the counts from what the two passes collected."""
    words, groups = _word_groups(acc, plan)
    if not groups:
        raise ScratchformerError("no word has two occurrences left after truncation; give shorter sentences")
    pair_a, pair_b, pair_word = word_pairs(groups, MAX_PAIRS_PER_WORD, plan.seed)
    baseline = torch.stack(acc.baseline, dim=1)  # (rows, sampled sentences, dims)
    sentences = acc.intra_sentences or float("nan")  # no sentence of two words: no intra-sentence similarity
    intra = acc.intra / sentences
    raw, word_self, word_mev = _measures(acc.store, baseline, groups, (pair_a, pair_b, pair_word), intra, None)
    std = std_self = std_mev = None
    if acc.standardise:
        intra_std = acc.intra_std / sentences
        std, std_self, std_mev = _measures(acc.store, baseline, groups, (pair_a, pair_b, pair_word), intra_std,
                                           acc.stats)
    identical = int(sum(acc.tokens[a] == acc.tokens[b] for a, b in zip(pair_a.tolist(), pair_b.tolist())))
    layers: list[Any] = [LEARNED, *range(num_layers + 1)][-acc.store.shape[0]:]  # without a learned row: 0..N
    learned_note = "learned row: self-similarity and MEV are 1 by construction for occurrences spelled with the same "
    learned_note += (f"tokens (here all {identical:,} pairs: one table row per word)" if identical == len(pair_a) else
                     f"tokens ({identical:,} of {len(pair_a):,} pairs here); a word spelled with other tokens in some "
                     "sentences (a byte-level BPE spells a sentence's first word without its leading space) lowers "
                     "the measured value")
    rows = [geometry_row(layer, layer_kind(layer), describe_layer(layer, num_layers), raw[r],
                         None if std is None else std[r], note=learned_note if layer == LEARNED else "")
            for r, layer in enumerate(layers)]
    word_rows = _word_rows(label, layers, plan, words, groups, pair_word, word_self, word_mev, std_self, std_mev)
    return GeometryReport(
        model=label, source=source, data=data_label, num_layers=num_layers, sentences=len(plan.sentences),
        words=len(groups), eligible_words=plan.eligible, occurrences=sum(len(g) for g in groups),
        pairs=len(pair_a), mev_words=sum(len(g) >= MEV_MIN_OCCURRENCES for g in groups),
        intra_sentences=acc.intra_sentences, baseline_sentences=baseline.shape[1], truncated_sentences=truncated,
        identical_token_pairs=identical, random_init=random_init, rows=rows, word_rows=word_rows,
        settings={"pooling": pooling, "standardise": acc.standardise, "min_occurrences": plan.min_occurrences,
                  "max_words": plan.max_words, "max_occurrences": plan.max_occurrences,
                  "max_pairs_per_word": MAX_PAIRS_PER_WORD, "mev_min_occurrences": MEV_MIN_OCCURRENCES,
                  "sample_sentences": len(plan.sample), "seed": plan.seed})


def _word_rows(label: str, layers: list[Any], plan: GeometryPlan, words: list[int], groups: list[list[int]],
               pair_word: np.ndarray, word_self: np.ndarray, word_mev: np.ndarray, std_self: np.ndarray | None,
               std_mev: np.ndarray | None) -> list[dict[str, Any]]:
    """One CSV row per (layer, word)."""
    pairs = np.bincount(pair_word, minlength=len(groups))

    def number(x: float) -> str:
        return "" if np.isnan(x) else f"{x:.6f}"

    rows = []
    for r, layer in enumerate(layers):
        for k, w in enumerate(words):
            rows.append({"model": label, "layer": layer, "word": plan.words[w], "occurrences": plan.counts[w],
                         "kept": len(groups[k]), "pairs": int(pairs[k]),
                         "self_similarity": number(word_self[r, k]), "mev": number(word_mev[r, k]),
                         "self_similarity_standardised": "" if std_self is None else number(std_self[r, k]),
                         "mev_standardised": "" if std_mev is None else number(std_mev[r, k])})
    return rows


# ----------------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------------

GEOMETRY_JSON, WORDS_CSV = "geometry.json", "geometry_words.csv"
WORD_FIELDS = ("model", "layer", "word", "occurrences", "kept", "pairs", "self_similarity",
               "self_similarity_standardised", "mev", "mev_standardised")


def check_options(models: list[str], pooling: str, batch_size: Any, max_sentences: Any) -> None:
    """What can be checked before reading data or loading a model."""
    if not models:
        raise ScratchformerError("no model: give --model (a folder, a Hub id, 'small' or 'minilm')")
    check_word_pooling(pooling)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ScratchformerError(f"--batch-size {batch_size!r} must be a positive integer (texts per forward pass)")
    if max_sentences is not None and (isinstance(max_sentences, bool) or not isinstance(max_sentences, int)
                                      or max_sentences < 2):
        raise ScratchformerError(f"--max-sentences {max_sentences!r} must be an integer >= 2 (or left out for all)")


def geometry_payload(reports: list[GeometryReport], data: str, kind: str, sentences: int) -> dict[str, Any]:
    """What ``geometry.json`` holds: the data, the published reference values and, per model, its rows."""
    reference = {measure: [{"model": m, "layer": layer, "value": value, "what": what}
                           for m, layer, value, what in marks] for measure, marks in REFERENCE_VALUES.items()}
    return {"data": data, "format": kind, "sentences": sentences, "reference": reference,
            "models": [report.as_dict() for report in reports]}


def load_geometry(path: str | Path) -> list[GeometryReport]:
    """The reports of a ``geometry.json``."""
    import json

    return [GeometryReport.from_dict(m) for m in json.loads(Path(path).read_text(encoding="utf-8"))["models"]]


def write_word_csv(path: Path, reports: list[GeometryReport]) -> Path:
    """The per-word measures of every model, one line per (model, layer, word), replacing an earlier file whole."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=WORD_FIELDS)
    writer.writeheader()
    for report in reports:
        writer.writerows(report.word_rows)
    return files.write_text(path, text.getvalue())


def _load_models(models: list[str], batch_size: int, texts: list[str]) -> list[LoadedModel]:
    """Every model loaded before any encoding, so that an unknown one fails at once."""
    return [load_extractor(source, batch_size=batch_size, texts=texts) for source in models]


def run_geometry(
    data: str | Path,
    models: list[str] | None = None,
    *,
    output: str | Path = "compare_output",
    min_occurrences: int = MIN_OCCURRENCES,
    max_words: int = MAX_WORDS,
    max_occurrences: int = MAX_OCCURRENCES,
    sample_sentences: int = SAMPLE_SENTENCES,
    max_sentences: int | None = None,
    pooling: str = "mean",
    standardise: bool = True,
    batch_size: int = 32,
    seed: int = 0,
    plots: bool = True,
    progress: bool | None = None,
    quiet: bool = False,
) -> list[GeometryReport]:
    """Measure each model on ``data``; write ``geometry.json``, ``geometry_words.csv`` and one PNG per measure into
    ``output``, and print a table per model unless ``quiet``. Options, data and the output folder are checked, and
    every model loaded, before any encoding."""
    models = list(models or DEFAULT_MODELS)
    check_options(models, pooling, batch_size, max_sentences)
    check_plan_options(min_occurrences, max_words, max_occurrences, sample_sentences)
    data_set = read_sentences(data, max_sentences)
    plan = plan_geometry(data_set.sentences, min_occurrences=min_occurrences, max_words=max_words,
                         max_occurrences=max_occurrences, sample_sentences=sample_sentences, seed=seed)
    out = check_output_folder(output)
    check_apart_from_inputs(out, models, [data], writes=(GEOMETRY_JSON, WORDS_CSV,
                                                         *(f"geometry_{m}.png" for m in MEASURES)))
    reports = []
    for loaded in _load_models(models, batch_size, data_set.sentences[:SAMPLE_SENTENCES]):
        reports.append(measure_geometry(loaded.extractor, plan, pooling=pooling, standardise=standardise,
                                        progress=progress, model_label=loaded.label, source=loaded.source,
                                        data_label=Path(data).name, random_init=loaded.random_init))
        if not quiet:
            print(reports[-1].table(), end="\n\n")
    folder = output_folder(out)
    written = [write_json(folder / GEOMETRY_JSON, geometry_payload(reports, str(data), data_set.format,
                                                                     len(plan.sentences))),
               write_word_csv(folder / WORDS_CSV, reports)]
    if plots:
        from .plots import plot_geometry

        written += plot_geometry(reports, folder).values()
    if not quiet:
        print(f"wrote {', '.join(str(p) for p in written)}")
    return reports
