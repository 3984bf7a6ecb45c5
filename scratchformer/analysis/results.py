"""What an extraction gives back: vectors labelled with the tokens and the layer they come from.

Every result carries its ``layer`` (``"learned"`` or a non-negative index into ``hidden_states``) and its ``kind``
(``"learned"``, ``"embedding_output"`` or ``"contextual"``, see :mod:`scratchformer.analysis.layers`), so that a
table or plot can always say which of the three "embeddings" it shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .layers import Layer
from .words import WordLocation


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
