"""A contrastive loss on the encoder, added to denoising: two windows of one text must find each other
(Contriever's independent cropping with InfoNCE; docs/training.md, "Objectives")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

WINDOW_TOKENS = (6, 20)  # the length range of one window, in tokens (about 5-15 words)
MIN_SOURCE_TOKENS = 30  # shorter texts give no pair: two windows would be most of the text
CROP_KEYS = ("crops_input_ids", "crops_attention_mask", "crops_token_mask")


def crop_pair(body: Sequence[int], rng: np.random.Generator) -> tuple[list[int], list[int]] | None:
    """Two independent random windows of ``body`` (token ids without ``</s>``), each 6-20 tokens long (and at most
    half the text); ``None`` for a text under :data:`MIN_SOURCE_TOKENS` tokens. The windows may overlap."""
    n = len(body)
    if n < MIN_SOURCE_TOKENS:
        return None
    low, high = WINDOW_TOKENS
    high = min(high, n // 2)

    def window() -> list[int]:
        length = int(rng.integers(low, high + 1))
        start = int(rng.integers(0, n - length + 1))
        return list(body[start:start + length])

    return window(), window()


def crops_batch(pairs: list[tuple[list[int], list[int]]], eos_token_id: int, pad_token_id: int
                ) -> dict[str, torch.Tensor]:
    """The encoder's inputs for a batch's windows, rows ``a_0 .. a_(P-1), b_0 .. b_(P-1)``, each ending with ``</s>``;
    ``crops_token_mask`` marks the window's own tokens (the pooled ones)."""
    rows = [a for a, _ in pairs] + [b for _, b in pairs]
    width = max((len(r) for r in rows), default=0) + 1
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    token_mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        input_ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        input_ids[i, len(r)] = eos_token_id
        attention_mask[i, :len(r) + 1] = 1
        token_mask[i, :len(r)] = True
    return {"crops_input_ids": input_ids, "crops_attention_mask": attention_mask, "crops_token_mask": token_mask}


def info_nce(queries: torch.Tensor, keys: torch.Tensor, temperature: float,
             query_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean InfoNCE loss of ``queries`` (``(P, hidden)``, or ``(P, T, hidden)`` with ``query_mask``) that must pick
    their own row of ``keys`` (``(P, hidden)``) by cosine."""
    keys = F.normalize(keys.float(), dim=-1)
    if queries.dim() == 2:
        logits = F.normalize(queries.float(), dim=-1) @ keys.T / temperature  # (P, P)
        return F.cross_entropy(logits, torch.arange(len(keys), device=keys.device))
    logits = torch.einsum("ptd,qd->ptq", F.normalize(queries.float(), dim=-1), keys) / temperature  # (P, T, P)
    target = torch.arange(len(keys), device=keys.device).unsqueeze(1).expand(logits.shape[:2])  # (P, T)
    per_token = F.cross_entropy(logits.reshape(-1, len(keys)), target.reshape(-1), reduction="none")
    weights = query_mask.reshape(-1).float()
    return (per_token * weights).sum() / weights.sum().clamp_min(1.0)


@dataclass
class CroppingLoss:
    """The loss of the module docstring, from the encoder's last layer over the two windows of each text (an
    :class:`~scratchformer.training.encoder_losses.EncoderLoss`, logged as ``contrastive_loss``)."""

    weight: float
    target: str = "tokens"
    temperature: float = 0.05
    name = "contrastive"
    keys = CROP_KEYS

    def __call__(self, model: torch.nn.Module, crops: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The loss for one micro-batch's windows, read by ``model.get_encoder()``, or ``None`` when fewer than two
        texts gave a pair (no negative to tell apart)."""
        pairs = crops["crops_input_ids"].shape[0] // 2
        if pairs < 2:
            return None
        hidden = model.get_encoder()(input_ids=crops["crops_input_ids"],
                                     attention_mask=crops["crops_attention_mask"]).last_hidden_state  # (2P, T, d)
        mask = crops["crops_token_mask"]
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        means = (hidden * weights).sum(1) / weights.sum(1)  # (2P, hidden); every window has >= 6 tokens
        (means_a, means_b), (hidden_a, hidden_b), (mask_a, mask_b) = means.split(pairs), hidden.split(pairs), \
            mask.split(pairs)
        if self.target == "sentence":
            return (info_nce(means_a, means_b, self.temperature) + info_nce(means_b, means_a, self.temperature)) / 2
        return (info_nce(hidden_a, means_b, self.temperature, mask_a)
                + info_nce(hidden_b, means_a, self.temperature, mask_b)) / 2
