"""``scratchformer geometry``: the measures of :mod:`~scratchformer.analysis.geometry` over a model, in two streaming
passes whose memory is bounded by the plan, not by the data (docs/embeddings.md)."""

from __future__ import annotations

import bisect
import csv
import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import files
from ..errors import ScratchformerError
from .encoding import PROGRESS_MIN_TEXTS, Encoded
from .extractor import EmbeddingExtractor, load_extractor, model_list, model_sources
from .geometry import (
    GEOMETRY_JSON,
    MAX_PAIRS_PER_WORD,
    MEV_MIN_OCCURRENCES,
    PLOT_FILES,
    REFERENCE_VALUES,
    WORDS_CSV,
    GeometryReport,
    Standardiser,
    geometry_row,
    intra_sentence_similarity,
    mean_pairwise_cosine,
    mev,
    word_measures,
    word_pairs,
)
from .geometry_data import (
    MAX_OCCURRENCES,
    MAX_WORDS,
    MIN_OCCURRENCES,
    SAMPLE_SENTENCES,
    GeometryPlan,
    plan_geometry,
    read_sentences,
)
from .layers import LEARNED, describe_layer, input_embedding_table, layer_kind
from .output import check_output_folder, output_folder
from .pooling import word_tokens_used
from .words import covering_tokens, words_kept

CHUNK = 512  # sentences tokenized at once: the token bookkeeping of a chunk is all that is held


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


@dataclass
class BatchWords:
    """The words of a batch of sentences, every row at once: sentence ``b``'s are ``vectors[:, starts[b] : starts[b +
    1]]``, at ``positions[b]`` among its words, made of the tokens ``groups[b]``."""

    vectors: torch.Tensor  # (rows, words, dims): rows = learned, 0, 1..N (no learned row without a fitting table)
    starts: list[int]
    positions: list[list[int]]
    groups: list[list[list[int]]]

    def sizes(self) -> list[int]:
        return [b - a for a, b in zip(self.starts, self.starts[1:])]


def batch_rows(batch: list[Encoded], hidden: torch.Tensor, pooling: str, table: torch.Tensor | None) -> BatchWords:
    """The words of ``batch`` (those not cut off, and covered by a token) pooled from ``hidden`` ``(batch, layers +
    1, tokens, dims)`` and the learned ``table`` in a few tensor operations for the whole batch; no learned row where
    the table does not fit the hidden states (ALBERT's is narrower)."""
    where: list[tuple[int, int]] = []  # (sentence in batch, token) of every pooled token
    word_of: list[int] = []  # and the word it goes into
    sizes: list[int] = []  # tokens pooled per word
    starts, positions, groups = [0], [], []
    for b, encoded in enumerate(batch):
        found = word_token_indices(encoded, [(start, end) for _, start, end in words_kept(encoded)])
        kept = [p for p, tokens in enumerate(found) if tokens]
        for p in kept:
            used = word_tokens_used(found[p], pooling)
            where += [(b, t) for t in used]
            word_of += [len(sizes)] * len(used)
            sizes.append(len(used))
        positions.append(kept)
        groups.append([found[p] for p in kept])
        starts.append(len(sizes))
    index = torch.tensor(where, dtype=torch.long).reshape(-1, 2)
    word = torch.tensor(word_of, dtype=torch.long)
    count = torch.tensor(sizes, dtype=torch.float32)[:, None]
    gathered = hidden[index[:, 0], :, index[:, 1]]  # (pooled tokens, layers + 1, dims)
    contextual = gathered.new_zeros(len(sizes), *gathered.shape[1:]).index_add_(0, word, gathered)
    vectors = (contextual / count[..., None]).transpose(0, 1)  # (layers + 1, words, dims)
    if table is not None and table.shape[1] == hidden.shape[-1]:
        ids = torch.tensor([batch[b].input_ids[t] for b, t in where], dtype=torch.long)
        tokens = table[ids.to(table.device)].detach().float().cpu()
        learned = tokens.new_zeros(len(sizes), tokens.shape[1]).index_add_(0, word, tokens) / count
        vectors = torch.cat([learned[None], vectors])
    return BatchWords(vectors.contiguous(), starts, positions, groups)


def stream_rows(extractor: EmbeddingExtractor, sentences: list[str], indices: list[int], pooling: str,
                visit: Callable[[list[int], list[Encoded], BatchWords], None], bar: Any) -> int:
    """Call ``visit(sentence numbers, encoded, words)`` with each forward batch's :func:`batch_rows`, a chunk at a
    time; returns how many were truncated (counted here, not warned per chunk)."""
    table = learned_table(extractor.model)
    truncated = 0
    for start in range(0, len(indices), CHUNK):
        part = indices[start : start + CHUNK]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*longer than the model's maximum")
            for order, batch, hidden in extractor.batches([sentences[s] for s in part]):
                visit([part[i] for i in order], batch, batch_rows(batch, hidden, pooling, table))
                truncated += sum(e.truncated for e in batch)
                bar.update(len(batch))
    return truncated


class _Accumulator:
    """What the two passes collect for one model."""

    def __init__(self, plan: GeometryPlan, standardise: bool) -> None:
        self.plan, self.standardise = plan, standardise
        self.baseline: list[torch.Tensor] = []  # (rows, sentences, dims) per batch of sampled sentences
        self.intra_sentences = 0
        self.valid = np.zeros(plan.occurrences, dtype=bool)  # False where the word was cut off or not covered
        self.tokens: list[tuple[int, ...]] = [()] * plan.occurrences
        self.store: torch.Tensor | None = None

    def _allocate(self, vectors: torch.Tensor) -> None:
        """Sized by the first batch's ``(rows, words, dims)``."""
        if self.store is not None:
            return
        rows, _, dims = vectors.shape
        self.stats = Standardiser(rows, dims)
        self.intra = torch.zeros(rows, dtype=torch.float64)
        self.intra_std = torch.zeros(rows, dtype=torch.float64)
        self.store = torch.zeros(rows, self.plan.occurrences, dims)  # the kept occurrences, every row

    def sample(self, sentences: list[int], batch: list[Encoded], words: BatchWords) -> None:
        """Pass 1: statistics for the standardisation, one random occurrence per sentence for the baseline."""
        self._allocate(words.vectors)
        self.stats.add(words.vectors)
        picks = [words.starts[b] + int(np.random.default_rng([self.plan.seed, s]).integers(size))
                 for b, (s, size) in enumerate(zip(sentences, words.sizes())) if size]
        self.baseline.append(words.vectors[:, picks])

    def sentence(self, sentences: list[int], batch: list[Encoded], words: BatchWords) -> None:
        """Pass 2: intra-sentence similarity (sentences of two words or more), and the occurrences the plan keeps."""
        self._allocate(words.vectors)
        sizes = [size for size in words.sizes() if size >= 2]
        if sizes:
            x = words.vectors[:, [k for a, b in zip(words.starts, words.starts[1:]) if b - a >= 2
                                  for k in range(a, b)]]
            self.intra += intra_sentence_similarity(x, sizes).sum(dim=-1)
            if self.standardise:
                self.intra_std += intra_sentence_similarity(self.stats(x), sizes).sum(dim=-1)
            self.intra_sentences += len(sizes)
        slots, columns = [], []
        for b, s in enumerate(sentences):
            where = {p: k for k, p in enumerate(words.positions[b])}
            for position, slot in self.plan.slots.get(s, ()):
                k = where.get(position)
                if k is not None:
                    slots.append(slot)
                    columns.append(words.starts[b] + k)
                    self.tokens[slot] = tuple(batch[b].input_ids[t] for t in words.groups[b][k])
        if slots:
            self.store[:, slots] = words.vectors[:, columns]
            self.valid[slots] = True


def measure_geometry(extractor: EmbeddingExtractor, plan: GeometryPlan, *, pooling: str = "mean",
                     standardise: bool = True, progress: bool | None = None, model_label: str | None = None,
                     source: str = "", data_label: str = "", random_init: bool = False) -> GeometryReport:
    """The geometry of ``extractor``'s model on the sentences of ``plan``, in two passes (docs/embeddings.md)."""
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
    if sum(b.shape[1] for b in acc.baseline) < 2:
        raise ScratchformerError("the baseline needs words from at least two sentences; give more sentences")
    return _report(acc, plan, num_layers, label=label, source=source, data_label=data_label, pooling=pooling,
                   truncated=truncated, random_init=random_init, progress=show)


def _measures(vectors: torch.Tensor, baseline: torch.Tensor, groups: list[list[int]],
              pairs: tuple[np.ndarray, np.ndarray, np.ndarray], intra: torch.Tensor,
              standardiser: Standardiser | None, bar: Any) -> tuple[list[dict[str, float]], np.ndarray, np.ndarray]:
    """Every row's measures from the kept occurrences, the baseline sample and the intra-sentence means (standardised
    first given a ``standardiser``), with the per-word self-similarity and MEV ``(rows, words)``."""
    rows = vectors.shape[0]
    word_self, word_mev = word_measures(vectors, groups, *pairs, transform=standardiser, progress=bar)
    base = baseline if standardiser is None else standardiser(baseline)
    base_mev = mev(base).numpy()
    values = [{"self_similarity": float(np.nanmean(word_self[r])),
               "intra_sentence_similarity": float(intra[r]),
               "mev": float(np.nanmean(word_mev[r])) if np.isfinite(word_mev[r]).any() else float("nan"),
               "anisotropy_baseline": mean_pairwise_cosine(base[r]),
               "mev_baseline": float(base_mev[r])} for r in range(rows)]
    return values, word_self, word_mev


def _report(acc: _Accumulator, plan: GeometryPlan, num_layers: int, *, label: str, source: str, data_label: str,
            pooling: str, truncated: int, random_init: bool, progress: bool = False) -> GeometryReport:
    """The rows, the per-word lines and the counts from what the two passes collected."""
    from tqdm.auto import tqdm

    slots: list[list[int]] = [[] for _ in plan.words]  # the kept occurrences of each word
    for slot in np.flatnonzero(acc.valid):
        slots[plan.slot_word[slot]].append(int(slot))
    words = [w for w, group in enumerate(slots) if len(group) >= 2]  # measured: two kept occurrences or more
    groups = [slots[w] for w in words]
    if not groups:
        raise ScratchformerError("no word has two occurrences left after truncation; give shorter sentences")
    pair_a, pair_b, pair_word = word_pairs(groups, MAX_PAIRS_PER_WORD, plan.seed)
    baseline = torch.cat(acc.baseline, dim=1)  # (rows, sampled sentences, dims)
    sentences = acc.intra_sentences or float("nan")  # no sentence of two words: no intra-sentence similarity
    pairs = (pair_a, pair_b, pair_word)
    with tqdm(total=len(groups) * (1 + acc.standardise), desc=f"measures: {label.split(' (')[0]}", unit="word",
              disable=not progress) as bar:
        raw, word_self, word_mev = _measures(acc.store, baseline, groups, pairs, acc.intra / sentences, None, bar)
        std = std_self = std_mev = None
        if acc.standardise:
            std, std_self, std_mev = _measures(acc.store, baseline, groups, pairs, acc.intra_std / sentences,
                                               acc.stats, bar)
    spelling = {tokens: k for k, tokens in enumerate(dict.fromkeys(acc.tokens))}
    spelled = np.array([spelling[tokens] for tokens in acc.tokens], dtype=np.int64)  # one number per spelling
    identical = int((spelled[pair_a] == spelled[pair_b]).sum())
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


WORD_FIELDS = ("model", "layer", "word", "occurrences", "kept", "pairs", "self_similarity",
               "self_similarity_standardised", "mev", "mev_standardised")


def geometry_payload(reports: list[GeometryReport], data: str, kind: str, sentences: int) -> dict[str, Any]:
    """What ``geometry.json`` holds: the data, the published reference values and, per model, its rows."""
    reference = {measure: [{"model": m, "layer": layer, "value": value, "what": what}
                           for m, layer, value, what in marks] for measure, marks in REFERENCE_VALUES.items()}
    return {"data": data, "format": kind, "sentences": sentences, "reference": reference,
            "models": [report.as_dict() for report in reports]}


def write_word_csv(path: Path, reports: list[GeometryReport]) -> Path:
    """The per-word measures of every model, one line per (model, layer, word), replacing an earlier file whole."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=WORD_FIELDS)
    writer.writeheader()
    for report in reports:
        writer.writerows(report.word_rows)
    return files.write_text(path, text.getvalue())


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
    """Measure each model (default: ours and MiniLM) on ``data`` and write the files into ``output``; options, data
    and folder are checked, and every model loaded, before any encoding."""
    models = model_list(models) or model_sources(None, include_defaults=True)  # MiniLM where installed
    data_set = read_sentences(data, max_sentences)
    plan = plan_geometry(data_set.sentences, min_occurrences=min_occurrences, max_words=max_words,
                         max_occurrences=max_occurrences, sample_sentences=sample_sentences, seed=seed)
    out = check_output_folder(output, models, [data], writes=(GEOMETRY_JSON, WORDS_CSV, *PLOT_FILES.values()))
    reports = []
    loaded_models = [load_extractor(source, batch_size=batch_size, texts=data_set.sentences[:SAMPLE_SENTENCES])
                     for source in models]  # every model loaded before any encoding: an unknown one fails at once
    for loaded in loaded_models:
        reports.append(measure_geometry(loaded.extractor, plan, pooling=pooling, standardise=standardise,
                                        progress=progress, model_label=loaded.label, source=loaded.source,
                                        data_label=Path(data).name, random_init=loaded.random_init))
        if not quiet:
            print(reports[-1].table(), end="\n\n")
    folder = output_folder(out)
    written = [files.write_json(folder / GEOMETRY_JSON,
                                geometry_payload(reports, str(data), data_set.format, len(plan.sentences))),
               write_word_csv(folder / WORDS_CSV, reports)]
    if plots:
        from .plots import plot_geometry

        written += plot_geometry(reports, folder).values()
    if not quiet:
        print(f"wrote {', '.join(str(p) for p in written)}")
    return reports
