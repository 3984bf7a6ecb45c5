"""Word-sense evaluation of contextual embeddings: does a model tell the senses of a word apart?

Data: a tab-separated file with the columns ``lemma pos synset start end sentence gloss`` (``gloss`` optional),
one row per occurrence, where ``sentence[start:end]`` is the target word (the format of
``wordnet_senses_dev.tsv``). Occurrences are grouped by lemma; within a group, every pair of occurrences is a
*same-sense* pair (same synset) or a *different-sense* pair. A sense is the pair (part of speech, synset), because
WordNet synset ids are only unique within one part of speech. ``group_by="lemma_pos"`` pairs only occurrences with
the same part of speech: a harder test, since noun/verb pairs of one lemma are easy to tell apart.

Scores, for the learned embedding and for every layer's output:

- **ROC-AUC** of the cosine between the two occurrences' word vectors as a predictor of "same sense": 0.5 is
  chance, 1.0 means every same-sense pair is closer than every different-sense pair.
- **1-NN sense accuracy**: each occurrence takes the sense of its nearest other occurrence of the same lemma.
  Its chance level is the accuracy of picking a random other occurrence.

The learned embedding is the same vector for a word in every sentence, so when both occurrences are the same
tokens its cosine is exactly 1 for same- and different-sense pairs alike: a score of 0.5 by construction. Its
measured AUC can differ slightly from 0.5 because inflected forms ("banks", "banked") are different tokens; the
report gives both the measured value and the number of pairs whose tokens are identical.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REQUIRED_COLUMNS = ("lemma", "pos", "synset", "start", "end", "sentence")
GROUP_BY = ("lemma", "lemma_pos")


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


def read_senses_tsv(path: str | Path) -> list[SenseExample]:
    """Read and check a word-sense TSV. Raises ``ValueError`` naming the file, line and problem for missing
    columns, short rows, non-integer or out-of-range spans and spans that start or end inside a word."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"word-sense data {str(path)!r} not found (expected a TSV with columns {' '.join(REQUIRED_COLUMNS)} gloss)")
    examples = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path}: the file is empty; expected a header line with {' '.join(REQUIRED_COLUMNS)}")
        header = [h.strip() for h in header]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise ValueError(
                f"{path}: missing column(s) {missing}; the header has {header}. Expected tab-separated columns "
                f"{' '.join(REQUIRED_COLUMNS)} gloss"
            )
        col = {name: header.index(name) for name in REQUIRED_COLUMNS}
        for line, row in enumerate(reader, start=2):
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) < len(header):
                raise ValueError(f"{path}:{line}: {len(row)} field(s) where the header has {len(header)}: {row!r}")
            sentence = row[col["sentence"]]
            try:
                start, end = int(row[col["start"]]), int(row[col["end"]])
            except ValueError:
                raise ValueError(
                    f"{path}:{line}: start={row[col['start']]!r} and end={row[col['end']]!r} must be integers"
                ) from None
            _check_span(path, line, sentence, start, end)
            examples.append(
                SenseExample(
                    lemma=row[col["lemma"]].strip(),
                    pos=row[col["pos"]].strip(),
                    synset=row[col["synset"]].strip(),
                    start=start,
                    end=end,
                    sentence=sentence,
                    line=line,
                )
            )
    if not examples:
        raise ValueError(f"{path}: no data rows after the header")
    return examples


def _check_span(path: Path, line: int, sentence: str, start: int, end: int) -> None:
    where = f"{path}:{line}: span {start}-{end}"
    if not 0 <= start < end <= len(sentence):
        raise ValueError(f"{where} does not fit the {len(sentence)}-character sentence {sentence!r}")
    target = sentence[start:end]
    if target != target.strip():
        raise ValueError(f"{where} selects {target!r}, which starts or ends with whitespace, in {sentence!r}")
    if (start > 0 and sentence[start - 1].isalnum()) or (end < len(sentence) and sentence[end].isalnum()):
        raise ValueError(
            f"{where} selects {target!r}, which starts or ends inside a word of {sentence!r} (off by one?)"
        )


# ----------------------------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------------------------


def roc_auc(labels: Any, scores: Any) -> float:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (Mann-Whitney U, ties count one half)."""
    import numpy as np

    labels = np.asarray(labels, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"ROC-AUC needs both classes; got {n_pos} positive and {n_neg} negative pairs")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0  # 1-based rank, ties share their mean rank
    ranks = average_rank[inverse]
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclass
class LayerScore:
    layer: int | str  # "learned" or the hidden_states index (0 = embedding-layer output)
    description: str
    roc_auc: float
    nn_accuracy: float
    # ROC-AUC after subtracting the layer's mean word vector (over all scored occurrences) before the cosine. It
    # removes the direction every vector shares (anisotropy), which inflates all cosines alike; not the headline.
    roc_auc_centred: float = float("nan")


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
    layers: list[LayerScore] = field(default_factory=list)

    @property
    def last_layer(self) -> LayerScore:
        return self.layers[-1]

    @property
    def best_layer(self) -> LayerScore:
        return max((s for s in self.layers if s.layer != "learned"), key=lambda s: s.roc_auc)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def table(self) -> str:
        lines = [
            f"model: {self.model}",
            f"data: {self.data} ({self.examples} occurrences in {self.groups} groups by {self.group_by}; "
            f"{self.pairs} pairs: {self.same_sense_pairs} same-sense, {self.different_sense_pairs} different-sense)",
            f"word vector: {self.pooling} of the word's sub-tokens; 1-NN chance level {self.nn_chance:.3f} "
            f"({self.nn_queries} queries)",
            f"learned embedding: 0.5 by construction for the {self.learned_identical_token_pairs} pairs with "
            "identical tokens; measured over all pairs below",
            f"{'layer':>8}  {'ROC-AUC':>7}  {'1-NN acc':>8}  {'centred':>7}  what (centred: ROC-AUC after "
            "subtracting the mean word vector)",
        ]
        for s in self.layers:
            lines.append(f"{s.layer!s:>8}  {s.roc_auc:7.4f}  {s.nn_accuracy:8.4f}  {s.roc_auc_centred:7.4f}  "
                         f"{s.description}")
        return "\n".join(lines)


def group_examples(examples: list[SenseExample], group_by: str = "lemma") -> list[list[int]]:
    """Indices of the occurrences of each lemma (or lemma + part of speech), groups of two or more only."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by={group_by!r} must be one of {GROUP_BY}")
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        groups[(ex.lemma, ex.pos) if group_by == "lemma_pos" else (ex.lemma,)].append(i)
    return [members for members in groups.values() if len(members) >= 2]


def evaluate_senses(
    extractor: Any,
    examples: list[SenseExample],
    *,
    pooling: str = "mean",
    group_by: str = "lemma",
    model_label: str | None = None,
    data_label: str = "",
) -> SenseReport:
    """Score ``extractor`` (an :class:`~scratchformer.embeddings.EmbeddingExtractor`) on word-sense pairs."""
    import numpy as np
    import torch

    from .layers import LEARNED, describe_layer

    groups = group_examples(examples, group_by)
    if not groups:
        raise ValueError("no lemma occurs twice in the data: there are no pairs to score")
    used = sorted(i for members in groups for i in members)
    position = {i: k for k, i in enumerate(used)}
    layers = [LEARNED, *range(extractor.num_layers + 1)]
    results = extractor.word_embeddings(
        [(examples[i].sentence, (examples[i].start, examples[i].end)) for i in used], layers=layers, pooling=pooling
    )
    raw = torch.stack([torch.stack([w.vector for w in per_layer]) for per_layer in results]).double()
    vectors = torch.nn.functional.normalize(raw, dim=-1)  # (examples, layers, hidden)
    centred = torch.nn.functional.normalize(raw - raw.mean(dim=0, keepdim=True), dim=-1)
    sense = [(examples[i].pos, examples[i].synset) for i in used]
    token_ids = [tuple(per_layer[0].location.token_ids) for per_layer in results]

    pair_a, pair_b = [], []
    for members in groups:
        for a, b in itertools.combinations([position[i] for i in members], 2):
            pair_a.append(a)
            pair_b.append(b)
    pair_a_t, pair_b_t = torch.tensor(pair_a), torch.tensor(pair_b)
    same = np.array([sense[a] == sense[b] for a, b in zip(pair_a, pair_b)])

    chance = []
    for members in groups:
        for i in members:
            others = [j for j in members if j != i]
            chance.append(sum(sense[position[j]] == sense[position[i]] for j in others) / len(others))

    def pair_cosines(v: torch.Tensor) -> np.ndarray:
        return (v[pair_a_t] * v[pair_b_t]).sum(-1).numpy().round(10)  # rounding makes identical vectors exact ties

    scores = []
    for k, layer in enumerate(layers):
        v = vectors[:, k]
        cos = pair_cosines(v)
        correct = 0
        for members in groups:
            idx = torch.tensor([position[i] for i in members])
            sim = v[idx] @ v[idx].T
            sim.fill_diagonal_(-math.inf)
            nearest = idx[sim.argmax(dim=1)]
            correct += sum(sense[int(n)] == sense[int(i)] for i, n in zip(idx, nearest))
        scores.append(
            LayerScore(
                layer=layer,
                description=describe_layer(layer, extractor.num_layers),
                roc_auc=roc_auc(same, cos),
                nn_accuracy=correct / len(chance),
                roc_auc_centred=roc_auc(same, pair_cosines(centred[:, k])),
            )
        )
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
        layers=scores,
    )


def plot_senses(reports: list[SenseReport], path: str | Path) -> Path:
    """ROC-AUC and 1-NN accuracy per layer, one line per model (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_auc, ax_nn) = plt.subplots(1, 2, figsize=(12, 4.5))
    for report in reports:
        x = list(range(len(report.layers)))
        line, = ax_auc.plot(x, [s.roc_auc for s in report.layers], marker="o", label=report.model)
        ax_auc.plot(x, [s.roc_auc_centred for s in report.layers], linestyle=":", color=line.get_color(),
                    label=f"{report.model}, mean-centred")
        ax_nn.plot(x, [s.nn_accuracy for s in report.layers], marker="o", label=report.model)
    longest = max(reports, key=lambda r: len(r.layers))
    labels = ["learned", "0\n(emb. out)", *[str(s.layer) for s in longest.layers[2:]]]
    for ax in (ax_auc, ax_nn):
        ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel("layer (learned = raw embedding row; 0 = embedding-layer output)")
        ax.grid(alpha=0.3)
    ax_auc.axhline(0.5, color="grey", linestyle="--", label="chance / learned by construction (0.5)")
    ax_auc.set_ylabel("ROC-AUC, same vs different sense")
    ax_auc.set_title(f"Word-sense pairs ({reports[0].pairs} pairs, {reports[0].pooling} of sub-tokens)")
    ax_nn.axhline(reports[0].nn_chance, color="grey", linestyle="--", label=f"chance ({reports[0].nn_chance:.3f})")
    ax_nn.set_ylabel("1-NN sense accuracy")
    ax_nn.set_title(f"Nearest other occurrence ({reports[0].nn_queries} queries)")
    ax_auc.legend(fontsize=8)
    ax_nn.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------------------


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
    """Evaluate each model on ``data``; write ``senses.json`` and ``senses_auc_per_layer.png`` into ``output``."""
    from .extractor import load_extractor

    examples = read_senses_tsv(data)
    if max_groups is not None:
        keep = set(i for members in group_examples(examples, group_by)[:max_groups] for i in members)
        examples = [ex for i, ex in enumerate(examples) if i in keep]
    reports = []
    for source in models:
        loaded = load_extractor(source, batch_size=batch_size)
        report = evaluate_senses(
            loaded.extractor, examples, pooling=pooling, group_by=group_by, model_label=loaded.label,
            data_label=str(data),
        )
        reports.append(report)
        if not quiet:
            print(report.table(), end="\n\n")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "senses.json").write_text(json.dumps([r.as_dict() for r in reports], indent=2) + "\n")
    plot_senses(reports, out / "senses_auc_per_layer.png")
    if not quiet:
        print(f"wrote {out / 'senses.json'} and {out / 'senses_auc_per_layer.png'}")
    return reports
