"""``scratchformer senses``: how well each layer's word vectors tell a lemma's WordNet senses apart (the scores:
docs/embeddings.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DataError, ScratchformerError
from ..files import write_json
from .extractor import load_extractor, model_list
from .layers import LEARNED, describe_layer
from .output import check_output_folder, output_folder
from .results import LayerScore, SenseReport, sense_score_verdict
from .sense_data import (
    MAX_OCCURRENCES_PER_GROUP,
    MAX_PAIRS_PER_GROUP,
    SenseExample,
    group_examples,
    pairs_within,
    read_senses_tsv,
    sample_members,
)


def roc_auc(labels: Any, scores: Any) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (Mann-Whitney U, ties count one half)."""
    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise ScratchformerError(f"ROC-AUC needs both classes; got {n_pos} positive and {n_neg} negative pairs")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based rank, ties share their mean rank
    ranks = average_rank[inverse]
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


PAIR_BLOCK = 4096  # pairs whose cosines are computed at once: memory ~ PAIR_BLOCK x hidden, whatever the data
NN_BLOCK_ELEMENTS = 1 << 22  # similarity entries computed at once in the 1-NN search
SENSES_JSON, SENSES_PLOT = "senses.json", "senses_auc_per_layer.png"  # what run_senses writes into its folder


def pair_cosines(vectors: torch.Tensor, pair_a: np.ndarray, pair_b: np.ndarray, block: int = PAIR_BLOCK,
                 ) -> np.ndarray:
    """The cosine of every pair of rows of ``vectors`` ``(occurrences, hidden)``, computed ``block`` pairs at a time
    (never a ``(pairs, hidden)`` tensor), rounded to 1e-10 so that identical vectors are exact ties."""
    unit = torch.nn.functional.normalize(vectors, dim=-1)
    a, b = torch.from_numpy(pair_a), torch.from_numpy(pair_b)
    out = np.empty(len(pair_a), dtype=np.float64)
    for start in range(0, len(pair_a), block):
        stop = start + block
        out[start:stop] = (unit[a[start:stop]] * unit[b[start:stop]]).sum(-1).numpy()
    return out.round(10)


def nn_chance(groups: list[list[int]], senses: list[Any]) -> list[float]:
    """Per occurrence: the chance that a random other occurrence of its group has its sense."""
    chance = []
    for members in groups:
        counts = Counter(senses[i] for i in members)
        chance += [(counts[senses[i]] - 1) / (len(members) - 1) for i in members]
    return chance


def nn_correct(unit: torch.Tensor, groups: list[list[int]], senses: list[Any]) -> np.ndarray:
    """For each occurrence (``False`` outside the groups), whether its nearest other occurrence in its group has its
    sense; queries go in blocks, so a big group never needs its whole similarity matrix at once."""
    correct = np.zeros(len(unit), dtype=bool)
    for members in groups:
        idx = torch.tensor(members)
        rows = max(1, NN_BLOCK_ELEMENTS // len(members))
        for start in range(0, len(members), rows):
            query = idx[start:start + rows]
            sim = unit[query] @ unit[idx].T  # (rows, members)
            sim[torch.arange(len(query)), torch.arange(start, start + len(query))] = -torch.inf  # not itself
            nearest = idx[sim.argmax(dim=1)]
            correct[query.numpy()] = [senses[int(n)] == senses[int(i)] for i, n in zip(query, nearest)]
    return correct


def nn_accuracy(unit: torch.Tensor, groups: list[list[int]], senses: list[Any]) -> float:
    """Share of the groups' occurrences whose nearest other occurrence in their group has their sense."""
    members = [i for group in groups for i in group]
    return float(nn_correct(unit, groups, senses)[members].mean())


def group_roc_aucs(same: np.ndarray, cosines: np.ndarray, pair_group: np.ndarray, groups: int) -> np.ndarray:
    """The ROC-AUC of each of ``groups`` groups over its own pairs (``pair_group`` gives each pair's group); NaN for
    a group whose pairs are not of both kinds."""
    scores = np.full(groups, np.nan)
    order = np.argsort(pair_group, kind="stable")
    starts = np.flatnonzero(np.diff(pair_group[order])) + 1  # where the next group's pairs begin in ``order``
    for inside in np.split(order, starts):
        if len(inside) and same[inside].any() and not same[inside].all():
            scores[pair_group[inside[0]]] = roc_auc(same[inside], cosines[inside])
    return scores


def within_group_roc_auc(same: np.ndarray, cosines: np.ndarray, pair_group: np.ndarray) -> float:
    """The mean ROC-AUC over the groups whose pairs (``pair_group`` gives each pair's group) are of both kinds."""
    scores = group_roc_aucs(same, cosines, pair_group, int(pair_group.max()) + 1 if len(pair_group) else 0)
    return float(np.nanmean(scores)) if np.isfinite(scores).any() else float("nan")


def scorable_groups(examples: list[SenseExample], group_by: str = "lemma") -> list[list[int]]:
    """The groups of :func:`~scratchformer.analysis.sense_data.group_examples`, checked to give pairs of both
    kinds (same sense and different sense): ROC-AUC needs both. Needs no model."""
    groups = group_examples(examples, group_by)
    if not groups:
        raise DataError(f"no lemma occurs twice in the data (grouped by {group_by}): there are no pairs to score")
    pair_a, pair_b = pairs_within(groups)
    same = sum(examples[a].sense == examples[b].sense for a, b in zip(pair_a.tolist(), pair_b.tolist()))
    if same == 0 or same == len(pair_a):
        raise DataError(f"the data gives {same} same-sense and {len(pair_a) - same} different-sense pairs; the "
                        "scores need both: use more rows or lemma groups (--max-groups)")
    return groups


@dataclass
class ScoredPairs:
    """What the scores are computed over: the occurrences used (indices into the examples), their groups and senses
    (indices into ``used``), and the pairs within the groups with their kind and group."""

    used: list[int]
    groups: list[list[int]]
    senses: list[Any]
    pair_a: np.ndarray
    pair_b: np.ndarray
    same: np.ndarray  # (pairs,) bool: the two occurrences have the same sense
    group_of: np.ndarray  # (used,) each occurrence's group
    sampled_groups: int  # groups cut to MAX_OCCURRENCES_PER_GROUP occurrences

    @property
    def pair_group(self) -> np.ndarray:
        """``(pairs,)`` each pair's group."""
        return self.group_of[self.pair_a]

    @classmethod
    def of(cls, examples: list[SenseExample], group_by: str = "lemma") -> ScoredPairs:
        """A group with more than :data:`MAX_OCCURRENCES_PER_GROUP` occurrences on a seeded sample of that many."""
        groups = scorable_groups(examples, group_by)
        sampled = sum(len(members) > MAX_OCCURRENCES_PER_GROUP for members in groups)
        groups = sample_members(groups, MAX_OCCURRENCES_PER_GROUP)
        used = sorted(i for members in groups for i in members)
        position = {i: k for k, i in enumerate(used)}
        groups = [[position[i] for i in members] for members in groups]  # indices into ``used`` from here on
        senses = [examples[i].sense for i in used]
        pair_a, pair_b = pairs_within(groups)
        codes = np.unique(np.array([str(sense) for sense in senses]), return_inverse=True)[1]
        group_of = np.empty(len(used), dtype=np.int64)
        for g, members in enumerate(groups):
            group_of[members] = g
        return cls(used, groups, senses, pair_a, pair_b, codes[pair_a] == codes[pair_b], group_of, sampled)


def _word_vectors(extractor: Any, examples: list[SenseExample], layers: list[Any], pooling: str,
                  ) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """``(occurrences, layers, hidden)`` float64 word vectors, and each occurrence's token ids."""
    results = extractor.word_embeddings([(ex.sentence, (ex.start, ex.end)) for ex in examples], layers=layers,
                                        pooling=pooling)
    vectors = torch.stack([torch.stack([w.vector for w in per_layer]) for per_layer in results]).double()
    return vectors, [tuple(per_layer[0].location.token_ids) for per_layer in results]


def _layer_score(layer: Any, num_layers: int, raw: torch.Tensor, centred: torch.Tensor, p: ScoredPairs) -> LayerScore:
    """Scores of one layer from its ``(occurrences, hidden)`` raw and mean-centred word vectors."""
    cosines = pair_cosines(raw, p.pair_a, p.pair_b)
    return LayerScore(
        layer=layer,
        description=describe_layer(layer, num_layers),
        roc_auc=roc_auc(p.same, cosines),
        nn_accuracy=nn_accuracy(torch.nn.functional.normalize(raw, dim=-1), p.groups, p.senses),
        roc_auc_centred=roc_auc(p.same, pair_cosines(centred, p.pair_a, p.pair_b)),
        roc_auc_within_group=within_group_roc_auc(p.same, cosines, p.pair_group),
    )


def evaluate_senses(
    extractor: Any,
    examples: list[SenseExample],
    *,
    pooling: str = "mean",
    group_by: str = "lemma",
    model_label: str | None = None,
    data_label: str = "",
) -> SenseReport:
    """Score ``extractor`` (an :class:`~scratchformer.analysis.extractor.EmbeddingExtractor`) on word-sense pairs;
    a group with more than :data:`MAX_OCCURRENCES_PER_GROUP` occurrences on a seeded sample of that many."""
    scored = ScoredPairs.of(examples, group_by)
    used, groups, same, pair_a, pair_b = scored.used, scored.groups, scored.same, scored.pair_a, scored.pair_b
    layers = [LEARNED, *range(extractor.num_layers + 1)]
    raw, token_ids = _word_vectors(extractor, [examples[i] for i in used], layers, pooling)  # (used, layers, hidden)
    centred = raw - raw.mean(dim=0, keepdim=True)
    chance = nn_chance(groups, scored.senses)
    scores = [_layer_score(layer, extractor.num_layers, raw[:, k], centred[:, k], scored)
              for k, layer in enumerate(layers)]
    # each occurrence's sentence as one vector: the last layer's mean over its own tokens (no special tokens, as
    # in a word's vector)
    sentences = extractor.sentence_embeddings([examples[i].sentence for i in used], pooling="mean", layer=-1,
                                              exclude_special_tokens=True)
    sentence_cosines = pair_cosines(sentences.vectors.double(), pair_a, pair_b)
    return SenseReport(
        model=model_label or extractor.model_name,
        data=data_label,
        pooling=pooling,
        group_by=group_by,
        examples=len(used),
        groups=len(groups),
        pairs=len(pair_a),
        same_sense_pairs=int(same.sum()),
        different_sense_pairs=int((~same).sum()),
        nn_queries=len(chance),
        nn_chance=float(np.mean(chance)),
        learned_identical_token_pairs=sum(token_ids[a] == token_ids[b] for a, b in zip(pair_a, pair_b)),
        max_pairs_per_group=MAX_PAIRS_PER_GROUP,
        subsampled_groups=sum(len(m) * (len(m) - 1) // 2 > MAX_PAIRS_PER_GROUP for m in groups),
        max_occurrences_per_group=MAX_OCCURRENCES_PER_GROUP,
        sampled_groups=scored.sampled_groups,
        sentence_roc_auc=roc_auc(same, sentence_cosines),
        sentence_roc_auc_within_group=within_group_roc_auc(same, sentence_cosines, scored.pair_group),
        layers=scores,
        verdict=sense_score_verdict(scores),
    )


def first_groups(examples: list[SenseExample], group_by: str, max_groups: int | None) -> list[SenseExample]:
    """The occurrences of the first ``max_groups`` lemma groups (all of them for ``None``; 0 or -1 would keep none,
    or all but the last, in silence)."""
    if max_groups is not None and max_groups < 1:
        raise ScratchformerError(f"--max-groups {max_groups!r} must be a positive integer (or left out for all)")
    if max_groups is None:
        return examples
    keep = {i for members in group_examples(examples, group_by)[:max_groups] for i in members}
    return [ex for i, ex in enumerate(examples) if i in keep]


def run_senses(
    data: str | Path,
    models: list[str],
    *,
    output: str | Path = "outputs/senses",
    pooling: str = "mean",
    group_by: str = "lemma",
    batch_size: int = 64,
    max_groups: int | None = None,
    quiet: bool = False,
) -> list[SenseReport]:
    """Evaluate each model on ``data``; write ``senses.json`` and ``senses_auc_per_layer.png`` into ``output``.
    Options, data and output folder are checked before any model loads."""
    from .plots import plot_senses

    models = model_list(models)
    if not models:
        raise ScratchformerError("no model to evaluate: give --model (a folder, a Hub id, 'minilm' or 'small')")
    examples = first_groups(read_senses_tsv(data), group_by, max_groups)
    used = [examples[i] for i in ScoredPairs.of(examples, group_by).used]
    out = check_output_folder(output, models, [data], writes=(SENSES_JSON, SENSES_PLOT))  # made when it is written
    loaded_models = [load_extractor(source, batch_size=batch_size, texts=[ex.sentence for ex in examples])
                     for source in models]
    for loaded in loaded_models:  # a word past a model's positions is found before the first model's work
        loaded.extractor.check_words([(ex.sentence, (ex.start, ex.end)) for ex in used],
                                     where=lambda q, label=loaded.label: f"{data}:{used[q].line} ({label})")
    reports = []
    for loaded in loaded_models:
        reports.append(evaluate_senses(loaded.extractor, examples, pooling=pooling, group_by=group_by,
                                       model_label=loaded.label, data_label=str(data)))
        if not quiet:
            print(reports[-1].table(), end="\n\n")
    write_json(output_folder(out) / SENSES_JSON, [r.as_dict() for r in reports])
    plot_senses(reports, out / SENSES_PLOT)
    if not quiet:
        for report in reports:
            print(f"{report.model}: {report.verdict}")
        print(f"wrote {out / SENSES_JSON} and {out / SENSES_PLOT}")
    return reports
