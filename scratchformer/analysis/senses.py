"""Word-sense evaluation of contextual embeddings: does a model tell the senses of a word apart?

Data (:mod:`~scratchformer.analysis.sense_data`): occurrences of lemmas, each with its sense. Occurrences are grouped
by lemma; within a group, every pair of occurrences is a *same-sense* pair (same synset) or a *different-sense*
pair. A sense is the pair (part of speech, synset), because WordNet synset ids are only unique within one part of
speech. ``group_by="lemma_pos"`` pairs only occurrences with the same part of speech: a harder test, since
noun/verb pairs of one lemma are easy to tell apart.

Scores, for the learned embedding and for every layer's output:

- **ROC-AUC** of the cosine between the two occurrences' word vectors as a predictor of "same sense": 0.5 is
  chance, 1.0 means every same-sense pair is closer than every different-sense pair.
- **Within-group ROC-AUC**: the same ROC-AUC computed inside each group (lemma) on its own pairs, then averaged
  over the groups that have pairs of both kinds. The global ROC-AUC also rewards a model whose pairs of one lemma
  are all closer than those of another when that lemma happens to have more same-sense pairs; inside a group only
  the sense differs, so this one measures sense separation alone.
- **1-NN sense accuracy**: each occurrence takes the sense of its nearest other occurrence of the same lemma.
  Its chance level is the accuracy of picking a random other occurrence.
- **The sentence vector alone**: the same two ROC-AUCs for the mean of the last layer over each whole sentence,
  the word not singled out. Senses follow topics ("bank" near "river" or near "loan"), so a model can separate
  them through what the whole sentence is about; this line says how far that alone goes, and so how much the
  word's own vector adds. (all-MiniLM-L6-v2, trained to make mean-pooled sentence vectors, gets most of its score
  this way.)

The learned embedding is the same vector for a word in every sentence, so when both occurrences are the same
tokens its cosine is exactly 1 for same- and different-sense pairs alike: a score of 0.5 by construction. Its
measured AUC can differ slightly from 0.5 because inflected forms ("banks", "banked") are different tokens; the
report gives both the measured value and the number of pairs whose tokens are identical.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import DataError, ScratchformerError
from .extractor import load_extractor
from .layers import LEARNED, describe_layer
from .output import check_apart_from_inputs, check_output_folder, output_folder, write_json
from .pooling import check_word_pooling
from .sense_data import GROUP_BY, SenseExample, group_examples, read_senses_tsv

# ----------------------------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------------------------


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


MAX_PAIRS_PER_GROUP = 20_000  # a lemma with more pairs is scored on a random sample of this many (seeded)
# A lemma with more occurrences is scored on a random sample of this many (seeded): its 1-NN search compares every
# occurrence with every other, and each occurrence is a forward pass (50,000 of one lemma ran past 7 minutes).
MAX_OCCURRENCES_PER_GROUP = 2_000
PAIR_BLOCK = 4096  # pairs whose cosines are computed at once: memory ~ PAIR_BLOCK x hidden, whatever the data
NN_BLOCK_ELEMENTS = 1 << 22  # similarity entries computed at once in the 1-NN search
SENSES_JSON, SENSES_PLOT = "senses.json", "senses_auc_per_layer.png"  # what run_senses writes into its folder


def pairs_within(groups: list[list[int]], max_pairs_per_group: int = MAX_PAIRS_PER_GROUP, seed: int = 0,
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of members of the same group, as two parallel index arrays: every pair of a group (in
    ``itertools.combinations`` order), or, for a group with more than ``max_pairs_per_group`` pairs, that many
    distinct pairs drawn at random (seeded), so that memory and time never grow with the square of one lemma's
    occurrences (3,000 rows of one lemma are 4.5M pairs)."""
    rng = np.random.default_rng(seed)
    firsts, seconds = [], []
    for members in groups:
        n = len(members)
        if n * (n - 1) // 2 <= max_pairs_per_group:
            pairs = np.array(list(itertools.combinations(range(n), 2)), dtype=np.int64).reshape(-1, 2)
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
        counts: dict[Any, int] = {}
        for i in members:
            counts[senses[i]] = counts.get(senses[i], 0) + 1
        chance += [(counts[senses[i]] - 1) / (len(members) - 1) for i in members]
    return chance


def nn_accuracy(unit: torch.Tensor, groups: list[list[int]], senses: list[Any]) -> float:
    """Share of occurrences whose nearest other occurrence in their group (by cosine of the ``(occurrences,
    hidden)`` unit vectors) has their sense. Queries go in blocks, so a big group never needs its whole
    ``(members, members)`` similarity matrix at once."""
    correct = total = 0
    for members in groups:
        idx = torch.tensor(members)
        rows = max(1, NN_BLOCK_ELEMENTS // len(members))
        for start in range(0, len(members), rows):
            query = idx[start:start + rows]
            sim = unit[query] @ unit[idx].T  # (rows, members)
            sim[torch.arange(len(query)), torch.arange(start, start + len(query))] = -torch.inf  # not itself
            nearest = idx[sim.argmax(dim=1)]
            correct += sum(senses[int(n)] == senses[int(i)] for i, n in zip(query, nearest))
        total += len(members)
    return correct / total


# ----------------------------------------------------------------------------------------------------------------
# Reports
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class LayerScore:
    layer: int | str  # "learned" or the hidden_states index (0 = embedding-layer output)
    description: str
    roc_auc: float
    nn_accuracy: float
    # ROC-AUC after subtracting the layer's mean word vector (over all scored occurrences) before the cosine. It
    # removes the direction every vector shares (anisotropy), which inflates all cosines alike; not the headline.
    roc_auc_centred: float = float("nan")
    # The mean over groups (lemmas) of the ROC-AUC of each group's own pairs: sense separation alone, without the
    # differences between lemmas that the global ROC-AUC also rewards (nan in reports written before it existed).
    roc_auc_within_group: float = float("nan")


def within_group_roc_auc(same: np.ndarray, cosines: np.ndarray, pair_group: np.ndarray) -> float:
    """The mean ROC-AUC over the groups whose pairs (``pair_group`` gives each pair's group) are of both kinds."""
    order = np.argsort(pair_group, kind="stable")
    starts = np.flatnonzero(np.diff(pair_group[order])) + 1  # where the next group's pairs begin in ``order``
    scores = [roc_auc(same[inside], cosines[inside]) for inside in np.split(order, starts)
              if same[inside].any() and not same[inside].all()]
    return float(np.mean(scores)) if scores else float("nan")


@dataclass
class SenseReport:
    """Result of :func:`evaluate_senses` for one model."""

    model: str
    data: str
    pooling: str
    group_by: str
    examples: int  # occurrences in groups of at least two
    groups: int
    pairs: int
    same_sense_pairs: int
    different_sense_pairs: int
    nn_queries: int
    nn_chance: float
    learned_identical_token_pairs: int  # pairs where both occurrences are the same tokens: learned cosine 1.0
    learned_auc_by_construction: float = 0.5
    max_pairs_per_group: int = MAX_PAIRS_PER_GROUP
    subsampled_groups: int = 0  # groups scored on a random sample of max_pairs_per_group of their pairs
    max_occurrences_per_group: int = MAX_OCCURRENCES_PER_GROUP
    sampled_groups: int = 0  # groups scored on a random sample of max_occurrences_per_group of their occurrences
    # ROC-AUC and within-group ROC-AUC of the last layer's mean over the whole sentence (the word not singled out):
    # what the sentence's topic alone gives (nan in reports written before it existed)
    sentence_roc_auc: float = float("nan")
    sentence_roc_auc_within_group: float = float("nan")
    layers: list[LayerScore] = field(default_factory=list)
    verdict: str = ""  # "context separates senses: yes (last layer ROC-AUC 0.712 > embedding output 0.620; ...)"

    @property
    def last_layer(self) -> LayerScore:
        return self.layers[-1]

    @property
    def best_layer(self) -> LayerScore:
        return max((s for s in self.layers if s.layer != "learned"), key=lambda s: s.roc_auc)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SenseReport:
        """The report that :meth:`as_dict` (one entry of a ``senses.json``) describes."""
        return cls(**{**data, "layers": [LayerScore(**layer) for layer in data["layers"]]})

    def table(self) -> str:
        lines = [
            f"model: {self.model}",
            f"data: {self.data} ({self.examples} occurrences in {self.groups} groups by {self.group_by}; "
            f"{self.pairs} pairs: {self.same_sense_pairs} same-sense, {self.different_sense_pairs} different-sense)",
            f"word vector: {self.pooling} of the word's sub-tokens; 1-NN chance level {self.nn_chance:.3f} "
            f"({self.nn_queries} queries)",
            f"learned embedding: 0.5 by construction for the {self.learned_identical_token_pairs} pairs with "
            "identical tokens; measured over all pairs below",
            *([f"sentence vector alone (last layer, mean over the whole sentence, the word not singled out): "
               f"ROC-AUC {self.sentence_roc_auc:.4f}, within {self.sentence_roc_auc_within_group:.4f}: how far the "
               "sentence's topic alone tells the senses apart"] if not math.isnan(self.sentence_roc_auc) else []),
            *([f"{self.sampled_groups} group(s) with more than {self.max_occurrences_per_group:,} occurrences: scored "
               f"on a random sample of {self.max_occurrences_per_group:,} of them (seeded)"] if self.sampled_groups
              else []),
            *([f"{self.subsampled_groups} group(s) with more than {self.max_pairs_per_group:,} pairs: scored on a "
               f"random sample of {self.max_pairs_per_group:,} of their pairs (seeded)"] if self.subsampled_groups
              else []),
            f"{'layer':>8}  {'ROC-AUC':>7}  {'1-NN acc':>8}  {'centred':>7}  {'within':>7}  what (centred: ROC-AUC "
            f"after subtracting the mean word vector; within: mean ROC-AUC inside each {self.group_by} group)",
        ]
        for s in self.layers:
            lines.append(f"{s.layer!s:>8}  {s.roc_auc:7.4f}  {s.nn_accuracy:8.4f}  {s.roc_auc_centred:7.4f}  "
                         f"{s.roc_auc_within_group:7.4f}  {s.description}")
        lines.append(f"verdict: {self.verdict or sense_score_verdict(self.layers)}")
        return "\n".join(lines)


def sense_score_verdict(layers: list[LayerScore]) -> str:
    """One line: does context help tell the senses apart, i.e. does the last layer score a higher ROC-AUC than the
    embedding-layer output (token + position, no context)? ``layers`` are ``[learned, 0, 1, ..., last]``."""
    if len(layers) < 3:
        return "context separates senses: n/a (the model has no contextual layer)"
    embedding, last = layers[1], layers[-1]
    best = max(layers[2:], key=lambda s: s.roc_auc)
    helps = last.roc_auc > embedding.roc_auc
    return (f"context separates senses: {'yes' if helps else 'no'} (last layer ROC-AUC {last.roc_auc:.3f} "
            f"{'>' if helps else '<='} embedding output {embedding.roc_auc:.3f}; best layer {best.layer}: "
            f"{best.roc_auc:.3f}; chance 0.5)")


# ----------------------------------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------------------------------


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


def _word_vectors(extractor: Any, examples: list[SenseExample], layers: list[Any], pooling: str,
                  ) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """``(occurrences, layers, hidden)`` float64 word vectors, and each occurrence's token ids."""
    results = extractor.word_embeddings([(ex.sentence, (ex.start, ex.end)) for ex in examples], layers=layers,
                                        pooling=pooling)
    vectors = torch.stack([torch.stack([w.vector for w in per_layer]) for per_layer in results]).double()
    return vectors, [tuple(per_layer[0].location.token_ids) for per_layer in results]


def _sentence_vectors(extractor: Any, examples: list[SenseExample]) -> torch.Tensor:
    """``(occurrences, hidden)`` float64: each occurrence's sentence as one vector, the mean of the last layer over
    the sentence's own tokens (special tokens left out, as they are from a word's vector)."""
    pooled = extractor.sentence_embeddings([ex.sentence for ex in examples], pooling="mean", layer=-1,
                                           exclude_special_tokens=True)
    return pooled.vectors.double()


def _layer_score(layer: Any, num_layers: int, raw: torch.Tensor, centred: torch.Tensor, groups: list[list[int]],
                 senses: list[Any], pairs: tuple[np.ndarray, np.ndarray], same: np.ndarray,
                 pair_group: np.ndarray) -> LayerScore:
    """Scores of one layer from its ``(occurrences, hidden)`` raw and mean-centred word vectors."""
    cosines = pair_cosines(raw, *pairs)
    return LayerScore(
        layer=layer,
        description=describe_layer(layer, num_layers),
        roc_auc=roc_auc(same, cosines),
        nn_accuracy=nn_accuracy(torch.nn.functional.normalize(raw, dim=-1), groups, senses),
        roc_auc_centred=roc_auc(same, pair_cosines(centred, *pairs)),
        roc_auc_within_group=within_group_roc_auc(same, cosines, pair_group),
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
    groups = scorable_groups(examples, group_by)
    sampled = sum(len(members) > MAX_OCCURRENCES_PER_GROUP for members in groups)
    groups = sample_members(groups, MAX_OCCURRENCES_PER_GROUP)
    used = sorted(i for members in groups for i in members)
    position = {i: k for k, i in enumerate(used)}
    groups = [[position[i] for i in members] for members in groups]  # indices into ``used`` from here on
    senses = [examples[i].sense for i in used]
    layers = [LEARNED, *range(extractor.num_layers + 1)]
    raw, token_ids = _word_vectors(extractor, [examples[i] for i in used], layers, pooling)  # (used, layers, hidden)
    centred = raw - raw.mean(dim=0, keepdim=True)
    pair_a, pair_b = pairs_within(groups)
    codes = np.unique(np.array([str(sense) for sense in senses]), return_inverse=True)[1]
    same = codes[pair_a] == codes[pair_b]
    group_of = np.empty(len(used), dtype=np.int64)
    for g, members in enumerate(groups):
        group_of[members] = g
    chance = nn_chance(groups, senses)
    scores = [_layer_score(layer, extractor.num_layers, raw[:, k], centred[:, k], groups, senses,
                           (pair_a, pair_b), same, group_of[pair_a]) for k, layer in enumerate(layers)]
    sentence_cosines = pair_cosines(_sentence_vectors(extractor, [examples[i] for i in used]), pair_a, pair_b)
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
        sampled_groups=sampled,
        sentence_roc_auc=roc_auc(same, sentence_cosines),
        sentence_roc_auc_within_group=within_group_roc_auc(same, sentence_cosines, group_of[pair_a]),
        layers=scores,
        verdict=sense_score_verdict(scores),
    )


# ----------------------------------------------------------------------------------------------------------------
# The command
# ----------------------------------------------------------------------------------------------------------------


def check_options(models: list[str], pooling: str, group_by: str, batch_size: Any, max_groups: Any) -> None:
    """Everything about the options that can be checked before reading data or loading a model."""
    if not models:
        raise ScratchformerError("no model to evaluate: give --model (a folder, a Hub id, 'minilm' or 'small')")
    check_word_pooling(pooling)
    if group_by not in GROUP_BY:
        raise ScratchformerError(f"--group-by {group_by!r} must be one of {GROUP_BY}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ScratchformerError(f"--batch-size {batch_size!r} must be a positive integer (texts per forward pass)")
    if max_groups is not None and (isinstance(max_groups, bool) or not isinstance(max_groups, int) or max_groups < 1):
        raise ScratchformerError(f"--max-groups {max_groups!r} must be a positive integer (or left out for all)")


def first_groups(examples: list[SenseExample], group_by: str, max_groups: int | None) -> list[SenseExample]:
    """The occurrences of the first ``max_groups`` lemma groups (all of them for ``None``)."""
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

    Options, data and output folder are checked before any model loads.
    """
    from .plots import plot_senses

    check_options(models, pooling, group_by, batch_size, max_groups)
    examples = first_groups(read_senses_tsv(data), group_by, max_groups)
    scorable_groups(examples, group_by)
    out = check_output_folder(output)  # made once there is something to write
    check_apart_from_inputs(out, models, [data], writes=(SENSES_JSON, SENSES_PLOT))
    reports = []
    for source in models:
        loaded = load_extractor(source, batch_size=batch_size, texts=[ex.sentence for ex in examples])
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
