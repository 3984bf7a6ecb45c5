"""The result types of extraction and of the studies, below both the commands that compute them and the renderers
that draw them (so that a renderer never imports a command module)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .layers import Layer
from .sense_data import MAX_OCCURRENCES_PER_GROUP, MAX_PAIRS_PER_GROUP
from .words import WordLocation

if TYPE_CHECKING:
    from .attention import AttentionMaps


@dataclass
class TokenEmbeddings:
    """One vector per token of ``text``: ``vectors[i]`` belongs to ``tokens[i]`` (special tokens included)."""

    text: str
    tokens: list[str]
    token_ids: list[int]
    offsets: list[tuple[int, int]] | None  # character span of each token in ``text``; (0, 0) for special tokens
    layer: Layer  # "learned", or the index into hidden_states (0 = embedding-layer output), never negative
    kind: str  # "learned" | "embedding_output" | "contextual"
    description: str
    vectors: torch.Tensor  # (num_tokens, hidden_size)
    truncated: bool = False  # the text was longer than the model's maximum and was cut


@dataclass
class WordEmbedding:
    """The vector of one word occurrence: its sub-token vectors at ``layer`` pooled with ``pooling``."""

    location: WordLocation
    layer: Layer
    kind: str
    pooling: str  # "mean" | "first" | "last"
    used_token_indices: list[int]  # the tokens that went into the vector (all for mean, one for first/last)
    vector: torch.Tensor  # (hidden_size,)

    @property
    def word(self) -> str:
        return self.location.word

    @property
    def used_tokens(self) -> list[str]:
        idx = self.location.token_indices
        return [self.location.tokens[idx.index(i)] for i in self.used_token_indices]


@dataclass
class SentenceEmbeddings:
    """One vector per sentence, pooled over its tokens with padding masked out."""

    sentences: list[str]
    layer: Layer
    kind: str
    pooling: str
    vectors: torch.Tensor  # (num_sentences, hidden_size)
    truncated: list[bool] = field(default_factory=list)


@dataclass
class StudySentence:
    sense: str  # a label; sentences with the same label use the word in the same sense
    text: str


@dataclass
class Study:
    """A word followed through sentences that use it in labelled senses."""

    word: str
    sentences: list[StudySentence]
    context_words: list[str] = field(default_factory=list)  # words of the sentences to show in the projection


@dataclass
class PairScore:
    a: int  # sentence indices
    b: int
    relation: str  # "same sense" | "cross sense"
    cosine: float
    centred_cosine: float


@dataclass
class LayerSummary:
    layer: int | str
    description: str
    same_sense_mean: float | None
    cross_sense_mean: float | None
    baseline: float | None  # mean cosine of unrelated word pairs from different study sentences
    baseline_pairs: int
    pairs: list[PairScore]

    @property
    def separated(self) -> bool | None:
        """Whether the study word is closer to itself in the same sense than across senses at this layer (mean
        contextual cosines); ``None`` when the study has no same-sense or no cross-sense pair."""
        if self.same_sense_mean is None or self.cross_sense_mean is None:
            return None
        return self.same_sense_mean > self.cross_sense_mean


def number(x: float | None) -> str:
    """A cosine for a table: three decimals, or ``n/a``."""
    return "n/a" if x is None else f"{x:.3f}"


@dataclass
class ModelStudy:
    """The study's numbers for one model (what ``compare.json`` holds per model)."""

    label: str
    source: str
    random_init: bool
    note: str
    num_layers: int
    layer: int  # the layer of the headline numbers (default: last)
    target_tokens: list[list[str]]  # per sentence, the tokens pooled into the target word's vector
    learned_cosines: list[PairScore]  # learned vectors of the target: 1.0 where the token ids match
    learned_vs_contextual: list[float]  # per sentence: cosine(learned, contextual at ``layer``)
    headline: LayerSummary
    per_layer: list[LayerSummary]
    verdict: str = ""  # "senses separated: yes (same-sense 0.866 > cross-sense 0.768)", at the headline layer
    plots: dict[str, str] = field(default_factory=dict)


@dataclass
class StudyVectors:
    """The vectors behind a :class:`ModelStudy`, for the plots; index ``k`` runs over ``["learned", 0, 1, ...]``."""

    targets: list[list[WordEmbedding]]  # [sentence][k]: the study word
    words: list[list[list[WordEmbedding]]]  # [sentence][word][k]: every word of the sentence
    layer_index: int  # k of the headline layer


@dataclass
class StudyRun:
    """Everything one model gave the study: numbers, vectors, and the first sentence's attention maps (or ``None``)."""

    loaded: Any  # the analysis.extractor.LoadedModel (typed loosely: extractor imports this module)
    result: ModelStudy
    vectors: StudyVectors
    attention: AttentionMaps | None = None


@dataclass
class LayerScore:
    layer: int | str  # "learned" or the hidden_states index (0 = embedding-layer output)
    description: str
    roc_auc: float
    nn_accuracy: float
    roc_auc_centred: float = float("nan")  # after subtracting the layer's mean word vector (anisotropy)
    roc_auc_within_group: float = float("nan")  # the mean of each lemma's own ROC-AUC (nan in older reports)


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
    # the two ROC-AUCs of the last layer's mean over the whole sentence: what its topic alone gives (nan: older report)
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
