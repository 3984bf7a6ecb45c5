"""Pooling token vectors into one vector: a word's sub-tokens, or a sentence's tokens (as sentence-transformers'
``Pooling`` does)."""

from __future__ import annotations

import torch

from ..errors import ScratchformerError

WORD_POOLING_MODES = ("mean", "first", "last")
SENTENCE_POOLING_MODES = ("mean", "max", "cls", "first")


def check_pooling(mode: str, modes: tuple[str, ...] = WORD_POOLING_MODES) -> None:
    """An unknown mode is refused: it would fall through to another mode's formula in silence."""
    if mode not in modes:
        raise ScratchformerError(f"pooling={mode!r} is not supported here; use one of {modes}")


def pool_tokens(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, mode: str = "mean") -> torch.Tensor:
    """Pool ``(batch, tokens, hidden)`` into ``(batch, hidden)`` over the positions where ``attention_mask`` is not 0
    (``cls``/``first``: the first real token, also under left padding)."""
    check_pooling(mode, SENTENCE_POOLING_MODES)
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)  # (batch, tokens, 1)
    if mode == "mean":
        return (token_embeddings * mask).sum(dim=1) / torch.clamp(mask.sum(dim=1), min=1e-9)
    if mode == "max":
        return token_embeddings.masked_fill(mask == 0, float("-inf")).max(dim=1).values
    first = attention_mask.to(torch.int).argmax(dim=1)  # cls / first: (batch,)
    return token_embeddings[torch.arange(token_embeddings.shape[0]), first]


def pool_sentence(vectors: torch.Tensor, special: list[bool], mode: str, exclude_special_tokens: bool,
                  name: str = "the sentence") -> torch.Tensor:
    """One sentence's ``(tokens, hidden)`` vectors pooled into ``(hidden,)``; ``name`` says which in an error."""
    mask = torch.tensor([not s for s in special] if exclude_special_tokens else [True] * len(special))
    if not mask.any():
        raise ScratchformerError(f"{name} has no token besides special tokens; nothing to pool")
    return pool_tokens(vectors[None], mask[None], mode)[0]


def word_tokens_used(token_indices: list[int], mode: str) -> list[int]:
    """Which of a word's tokens go into its vector: all for ``mean``, one for ``first``/``last``."""
    check_pooling(mode)
    return {"mean": token_indices, "first": token_indices[:1], "last": token_indices[-1:]}[mode]


def pool_word(vectors: torch.Tensor, token_indices: list[int], mode: str) -> tuple[list[int], torch.Tensor]:
    """``(used token indices, (hidden,) vector)`` of a word whose tokens sit at ``token_indices`` of ``vectors``."""
    used = list(word_tokens_used(token_indices, mode))
    return used, vectors[used].mean(dim=0)
