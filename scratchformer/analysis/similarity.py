"""Cosine similarity reported with what it should be compared against: the unrelated-pair baseline and the centred
cosine (contextual vectors are anisotropic)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

WordVectors = Sequence[tuple[str, torch.Tensor]]  # the (word, vector) pairs of one sentence


@dataclass
class Similarity:
    """A cosine with its unrelated-pair ``baseline`` (``None`` without unrelated pairs) and ``centred_cosine``."""

    cosine: float
    baseline: float | None
    baseline_pairs: int
    centred_cosine: float | None

    @property
    def above_baseline(self) -> float | None:
        return None if self.baseline is None else self.cosine - self.baseline

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "above_baseline": self.above_baseline}


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """Cosine similarity of two vectors, as a Python float (0.0 when one of them is all zeros)."""
    return float(torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0, eps=1e-12))


def centred_cosine(a: torch.Tensor, b: torch.Tensor, mean: torch.Tensor) -> float:
    """Cosine after subtracting ``mean`` (the average vector of a pool of words): removes the shared direction."""
    return cosine(a - mean, b - mean)


def unrelated_pair_baseline(groups: Sequence[WordVectors]) -> tuple[float | None, int]:
    """``(mean cosine, number)`` of the pairs of words from *different* groups (sentences) that differ
    (case-insensitively); ``(None, 0)`` when there is no pair."""
    total, count = 0.0, 0
    for group_a, group_b in itertools.combinations(groups, 2):
        for (word_a, vec_a), (word_b, vec_b) in itertools.product(group_a, group_b):
            if word_a.lower() != word_b.lower():
                total += cosine(vec_a, vec_b)
                count += 1
    return (total / count if count else None), count


def similarity_in_context(a: torch.Tensor, b: torch.Tensor, sentences: Sequence[WordVectors],
                          targets: set[str]) -> Similarity:
    """The cosine of ``a`` and ``b`` with the baseline (words of different sentences, or of the one sentence, the
    lower-case ``targets`` left out) and the centred cosine (minus the mean of all words) from ``sentences``."""
    groups = [[(word, vector) for word, vector in words if word.lower() not in targets] for words in sentences]
    if len(groups) == 1:  # pairs within the one sentence
        groups = [[item] for item in groups[0]]
    baseline, pairs = unrelated_pair_baseline(groups)
    pool = torch.stack([vector for words in sentences for _, vector in words])  # (all words, hidden)
    return Similarity(
        cosine=cosine(a, b),
        baseline=baseline,
        baseline_pairs=pairs,
        centred_cosine=centred_cosine(a, b, pool.mean(dim=0)) if len(pool) > 2 else None,
    )
