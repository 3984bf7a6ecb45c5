"""A masked-token loss on the encoder (BERT's masked language model, Devlin et al. 2019), added to denoising
(docs/training.md, "Objectives"). The masked copy is a function of ``(seed, epoch, token ids)``, unlike
transformers' ``DataCollatorForLanguageModeling``, so a resumed or re-sharded run sees the same copies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import DataError

MLM_KEYS = ("mlm_input_ids", "mlm_attention_mask", "mlm_positions", "mlm_targets")
REPLACE_WITH_MASK, REPLACE_WITH_RANDOM = 0.8, 0.1  # of the chosen tokens; the other 10 % stay (BERT, appendix A.1)


@dataclass(frozen=True, eq=False)
class WordPieces:
    """Per vocabulary id (see :func:`word_pieces`): a position continues a word when its token ``continues`` and
    the token before it is ``wordlike`` ("ban", "k" after " river"; "9" after " 199"; not "," or a word after a
    newline)."""

    continues: np.ndarray  # (vocab,) bool
    wordlike: np.ndarray  # (vocab,) bool

    def word_starts(self, ids: np.ndarray) -> np.ndarray:
        """``(len(ids),)`` bool: where a new word (or a piece of punctuation, or a special token) begins."""
        follows_word = np.concatenate([[False], self.wordlike[ids[:-1]]])
        return ~(self.continues[ids] & follows_word)


def word_pieces(tokenizer) -> WordPieces:
    """For each id of a byte-level BPE ``tokenizer``: whether the token can continue the word before it (its text
    starts with a letter or digit, not a space) and whether it is part of a word at all (it has a letter or digit).
    A :class:`~scratchformer.errors.DataError` for a tokenizer whose tokens never start with a space."""
    texts = [tokenizer.convert_tokens_to_string([token]) for token in tokenizer.convert_ids_to_tokens(
        list(range(len(tokenizer))))]
    special = set(tokenizer.all_special_ids)
    if not any(text[:1].isspace() for text in texts):
        raise DataError("whole-word masking finds words by the space that begins a byte-level BPE token, and no "
                        "token of this tokenizer begins with one")
    continues = np.array([i not in special and text[:1].isalnum() for i, text in enumerate(texts)])
    wordlike = np.array([i not in special and any(c.isalnum() for c in text) for i, text in enumerate(texts)])
    return WordPieces(continues, wordlike)


def mask_tokens(ids: Sequence[int], rng: np.random.Generator, probability: float, mask_token_id: int,
                ordinary_ids: np.ndarray, words: WordPieces | None = None) -> tuple[list[int], list[int]]:
    """BERT's masking of one text: ``(the encoder's input, the chosen positions)``. Only ordinary tokens (those in
    ``ordinary_ids``, sorted) are chosen, each with ``probability``; special tokens such as ``</s>`` stay. With
    ``words``, whole words are chosen with ``probability`` (the draw at a word's first piece decides for all of
    its pieces); what becomes of each chosen piece is still drawn piece by piece."""
    ids_array = np.asarray(ids, dtype=np.int64)
    is_ordinary = np.isin(ids_array, ordinary_ids, assume_unique=False)
    draw = rng.random((3, len(ids_array)))  # chosen?, what becomes of it, which random token
    picked = draw[0] < probability
    if words is not None and len(ids_array):
        starts = words.word_starts(ids_array)
        picked = picked[np.flatnonzero(starts)][np.cumsum(starts) - 1]  # each piece takes its word's first draw
    chosen = np.flatnonzero(is_ordinary & picked)
    masked = ids_array.copy()
    what = draw[1, chosen]
    masked[chosen[what < REPLACE_WITH_MASK]] = mask_token_id
    random_rows = chosen[(what >= REPLACE_WITH_MASK) & (what < REPLACE_WITH_MASK + REPLACE_WITH_RANDOM)]
    masked[random_rows] = ordinary_ids[(draw[2, random_rows] * len(ordinary_ids)).astype(np.int64)]
    return masked.tolist(), chosen.tolist()


def mlm_batch(texts: list[list[int]], masked: list[list[int]], chosen: list[list[int]], pad_token_id: int
              ) -> dict[str, torch.Tensor]:
    """The encoder's inputs for the masked copies, padded to the longest, and what to predict:
    ``mlm_positions`` are flat indices into the ``(rows x width)`` positions (so the loss gathers them without a
    host sync) and ``mlm_targets`` the original tokens there."""
    width = max((len(r) for r in masked), default=0)
    input_ids = torch.full((len(masked), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(masked), width), dtype=torch.long)
    positions, targets = [], []
    for row, (original, copy, picked) in enumerate(zip(texts, masked, chosen)):
        input_ids[row, :len(copy)] = torch.tensor(copy, dtype=torch.long)
        attention_mask[row, :len(copy)] = 1
        positions.extend(row * width + p for p in picked)
        targets.extend(original[p] for p in picked)
    return {"mlm_input_ids": input_ids, "mlm_attention_mask": attention_mask,
            "mlm_positions": torch.tensor(positions, dtype=torch.long),
            "mlm_targets": torch.tensor(targets, dtype=torch.long)}


@dataclass
class MaskedTokenLoss:
    """The loss of the module docstring (an :class:`~scratchformer.training.encoder_losses.EncoderLoss`, logged as
    ``encoder_mlm_loss``)."""

    weight: float
    name = "encoder_mlm"
    keys = MLM_KEYS

    def __call__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The mean cross-entropy over the chosen tokens of one micro-batch, or ``None`` when none was chosen."""
        positions = batch["mlm_positions"]
        if positions.numel() == 0:  # a shape, known on the host: no sync
            return None
        hidden = model.get_encoder()(input_ids=batch["mlm_input_ids"],
                                     attention_mask=batch["mlm_attention_mask"]).last_hidden_state  # (B, T, d)
        chosen = hidden.reshape(-1, hidden.shape[-1]).index_select(0, positions)  # (N, d), N chosen tokens
        logits = model.get_output_embeddings()(chosen)  # (N, V)
        return F.cross_entropy(logits.float(), batch["mlm_targets"])
