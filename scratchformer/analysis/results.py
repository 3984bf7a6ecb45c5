"""What an extraction gives back: vectors labelled with the tokens and the layer they come from; and what the
"bank" study gives back (its numbers and the vectors behind its plots).

Every result carries its ``layer`` (``"learned"`` or a non-negative index into ``hidden_states``) and its ``kind``
(``"learned"``, ``"embedding_output"`` or ``"contextual"``, see :mod:`scratchformer.analysis.layers`), so that a
table or plot can always say which of the three "embeddings" it shows.

The study's types live here, below both the command that computes them (:mod:`~scratchformer.analysis.bank`) and
the renderers that draw them (:mod:`~scratchformer.analysis.plots`, :mod:`~scratchformer.analysis.report`), so
that a renderer never imports a command module. ``bank`` re-exports them: ``from scratchformer.analysis.bank
import Study`` keeps working.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from .layers import Layer
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


# ----------------------------------------------------------------------------------------------------------------
# The "bank" study (scratchformer compare): computed by analysis.bank, drawn by analysis.plots and analysis.report
# ----------------------------------------------------------------------------------------------------------------


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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StudyVectors:
    """The vectors behind a :class:`ModelStudy`, for the plots; index ``k`` runs over ``["learned", 0, 1, ...]``."""

    targets: list[list[WordEmbedding]]  # [sentence][k]: the study word
    words: list[list[list[WordEmbedding]]]  # [sentence][word][k]: every word of the sentence
    layer_index: int  # k of the headline layer


@dataclass
class StudyRun:
    """Everything one model gave the study: the numbers, the vectors behind the projection, and the attention
    maps of the first sentence (``None`` when neither plots nor the HTML report were asked for)."""

    loaded: Any  # the analysis.extractor.LoadedModel (typed loosely: extractor imports this module)
    result: ModelStudy
    vectors: StudyVectors
    attention: AttentionMaps | None = None
