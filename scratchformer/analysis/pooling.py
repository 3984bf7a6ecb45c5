"""Pooling token vectors into one vector: a word's sub-tokens, or a sentence's tokens.

- Words (:data:`WORD_POOLING_MODES`): ``mean`` of the sub-tokens (default), or the ``first`` or ``last`` one.
- Sentences (:data:`SENTENCE_POOLING_MODES`): ``mean``, ``max``, ``cls``/``first`` over the real tokens, with the
  formulas of sentence-transformers' ``Pooling`` module, so the results agree with it.
"""

from __future__ import annotations

import torch

from ..errors import ScratchformerError

WORD_POOLING_MODES = ("mean", "first", "last")
SENTENCE_POOLING_MODES = ("mean", "max", "cls", "first")


def check_word_pooling(mode: str) -> None:
    if mode not in WORD_POOLING_MODES:
        raise ScratchformerError(f"pooling={mode!r} is not supported for words; use one of {WORD_POOLING_MODES}")


def check_sentence_pooling(mode: str) -> None:
    if mode not in SENTENCE_POOLING_MODES:
        raise ScratchformerError(f"pooling={mode!r} is not supported; use one of {SENTENCE_POOLING_MODES}")


def pool_tokens(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, mode: str = "mean") -> torch.Tensor:
    """Pool ``(batch, tokens, hidden)`` into ``(batch, hidden)`` ignoring positions where ``attention_mask`` is 0.

    ``mean`` divides the masked sum by the number of real tokens, ``max`` takes the maximum over real tokens only,
    ``cls``/``first`` takes the first real token (also under left padding). A mask of other values than 1 and 0 (a
    weight of 2 or -1 means nothing) and vectors that are not finite are refused.
    """
    check_sentence_pooling(mode)
    shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
              for t in (token_embeddings, attention_mask)]
    if not isinstance(token_embeddings, torch.Tensor) or not isinstance(attention_mask, torch.Tensor) or (
            token_embeddings.dim() != 3 or attention_mask.shape != token_embeddings.shape[:2]):
        raise ScratchformerError(f"pool_tokens expects tensors token_embeddings (batch, tokens, hidden) and "
                                 f"attention_mask (batch, tokens); got {shapes[0]} and {shapes[1]}")
    zeros_and_ones, every_row_has_a_token, finite = torch.stack([  # one host sync for the three checks
        ((attention_mask == 0) | (attention_mask == 1)).all(), (attention_mask.sum(dim=1) != 0).all(),
        torch.isfinite(token_embeddings).all()]).tolist()
    if not zeros_and_ones:
        raise ScratchformerError("pool_tokens: attention_mask must hold only 1 (a real token) and 0 (padding), or "
                                 f"booleans; it holds {sorted(set(attention_mask.unique()[:6].tolist()))}")
    if not every_row_has_a_token:
        raise ScratchformerError(
            "pool_tokens: a row of attention_mask has no real token; nothing to pool (empty text?)")
    if not finite:
        raise ScratchformerError("pool_tokens: token_embeddings hold NaN or infinite values; check what made them")
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)  # (batch, tokens, 1)
    if mode == "mean":
        return (token_embeddings * mask).sum(dim=1) / torch.clamp(mask.sum(dim=1), min=1e-9)
    if mode == "max":
        return token_embeddings.masked_fill(mask == 0, float("-inf")).max(dim=1).values
    first = attention_mask.to(torch.int).argmax(dim=1)  # cls / first: (batch,)
    return token_embeddings[torch.arange(token_embeddings.shape[0]), first]


def pool_sentence(vectors: torch.Tensor, special: list[bool], mode: str, exclude_special_tokens: bool,
                  name: str = "the sentence") -> torch.Tensor:
    """One sentence's ``(tokens, hidden)`` vectors pooled into ``(hidden,)``, special tokens in or out. ``name``
    says which sentence in an error."""
    mask = torch.tensor([not s for s in special] if exclude_special_tokens else [True] * len(special))
    if not mask.any():
        raise ScratchformerError(f"{name} has no token besides special tokens; nothing to pool")
    return pool_tokens(vectors[None], mask[None], mode)[0]


def word_tokens_used(token_indices: list[int], mode: str) -> list[int]:
    """Which of a word's tokens go into its vector: all for ``mean``, one for ``first``/``last``."""
    check_word_pooling(mode)
    return {"mean": token_indices, "first": token_indices[:1], "last": token_indices[-1:]}[mode]


def pool_word(vectors: torch.Tensor, token_indices: list[int], mode: str) -> tuple[list[int], torch.Tensor]:
    """``(used token indices, (hidden,) vector)`` of a word whose tokens sit at ``token_indices`` of the
    ``(tokens, hidden)`` sentence ``vectors``."""
    used = list(word_tokens_used(token_indices, mode))
    return used, vectors[used].mean(dim=0)
