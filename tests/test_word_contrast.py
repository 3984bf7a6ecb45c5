"""The encoder's word-level self-contrast loss (``--word-contrast-weight``): the views, the index, the loss, the run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from model_fixtures import tiny_config
from test_contrastive import paragraphs  # noqa: F401  (a fixture)
from test_training import StopAt, tiny, train_losses

from scratchformer import ScratchformerForConditionalGeneration
from scratchformer.cli import main as cli_main
from scratchformer.training import run_training
from scratchformer.training.encoder_mlm import WordPieces
from scratchformer.training.word_contrast import (
    MIN_LETTERS,
    WINDOW_TOKENS,
    WordContrastCollator,
    WordContrastLoss,
    WordIndex,
    WordTable,
    context_window,
    erase_span,
)

EOS, PAD, MASK = 2, 0, 4
VOCAB = 40


def toy_table() -> WordTable:
    """Ids 5-39: even ids begin a word (" bank"), odd ids continue one ("k"); each spells two letters; 0-4 are
    special. So [6, 7] is one word of 4 letters, [6] alone has too few (:data:`MIN_LETTERS` is 3)."""
    ids = np.arange(VOCAB)
    ordinary = ids >= 5
    return WordTable(WordPieces(continues=ordinary & (ids % 2 == 1), wordlike=ordinary), np.where(ordinary, 2, 0))


def collator(**overrides) -> WordContrastCollator:
    settings = dict(pad_token_id=PAD, mask_token_id=MASK, eos_token_id=EOS, decoder_start_token_id=EOS, seed=3,
                    word_table=toy_table())
    settings.update(overrides)
    return WordContrastCollator(**settings)


def text(words: list[tuple[int, int]]) -> list[int]:
    return [i for word in words for i in word] + [EOS]


def test_the_random_span_never_erases_the_word_and_erases_the_share_asked_for():
    """Over 2000 draws: the word's tokens are never <mask>, exactly one span of round(0.2 x n) tokens is, and the
    span falls on both sides of the word over the draws; with the word at an edge it lies on the other side."""
    rng = np.random.default_rng(0)
    sides = set()
    for _ in range(2000):
        n = int(rng.integers(5, 40))
        start = int(rng.integers(0, n))
        end = int(rng.integers(start + 1, n + 1))
        ids = list(range(10, 10 + n))
        out = erase_span(ids, start, end, 0.2, MASK, rng)
        assert out[start:end] == ids[start:end] and len(out) == n
        erased = [i for i, token in enumerate(out) if token == MASK]
        if erased:
            assert erased == list(range(erased[0], erased[-1] + 1))  # one span
            assert len(erased) == min(max(1, round(0.2 * n)), max(start, n - end))
            sides.add("before" if erased[-1] < start else "after")
        else:
            assert start == 0 and end == n  # nothing but the word: nothing to erase
    assert sides == {"before", "after"}
    assert erase_span(list(range(10)), 0, 2, 0.0, MASK, rng) == list(range(10))


def test_the_window_holds_the_word_and_is_sentence_sized():
    rng = np.random.default_rng(1)
    for _ in range(500):
        length = int(rng.integers(3, 120))
        start = int(rng.integers(0, length))
        end = min(length, start + int(rng.integers(1, 4)))
        first, last = context_window(length, start, end, rng)
        assert 0 <= first <= start and end <= last <= length
        assert last - first <= max(WINDOW_TOKENS[1], end - start)
        assert last - first >= min(WINDOW_TOKENS[0], length)


def test_the_collator_adds_two_views_of_one_word_per_text_and_leaves_the_rest_as_it_was():
    """Each text gives one occurrence: rows a_i and b_i hold the same window but for the erased tokens, the word is
    the same tokens in both (a whole word of >= 3 letters), and the denoising batch is the parent's. With
    ``erase_word`` the second view's word is all <mask>. The same features give the same batch (a seed, not the
    global random state), another seed another one."""
    words = [(6, 7), (8,), (10, 11, 13), (12,), (14, 15), (16, 17), (18,), (20, 21), (22, 23), (24,)]
    features = [{"input_ids": text(words[k:] + words[:k])} for k in range(6)]
    batch = collator()(features)
    plain = collator(word_erase=0.0)
    assert torch.equal(batch["input_ids"], plain(features)["input_ids"])
    rows = batch["word_input_ids"].shape[0] // 2
    assert rows == len(features)
    for i in range(rows):
        a, b = batch["word_input_ids"][i], batch["word_input_ids"][rows + i]
        mask = batch["word_token_mask"][i]
        assert torch.equal(mask, batch["word_token_mask"][rows + i]) and mask.any()
        word = a[mask].tolist()
        assert word == b[mask].tolist() and MASK not in word and 2 * len(word) >= MIN_LETTERS
        assert word[0] % 2 == 0 and all(t % 2 == 1 for t in word[1:])  # a whole word: its first piece and the rest
        differ = (a != b) & batch["word_attention_mask"][i].bool()
        assert all(MASK in (x, y) for x, y in zip(a[differ].tolist(), b[differ].tolist()))
    again = collator()(features)
    assert all(torch.equal(batch[k], again[k]) for k in batch)
    other = collator(seed=4)(features)
    assert not torch.equal(batch["word_token_mask"], other["word_token_mask"])
    erased = collator(erase_word=True)(features)
    second = erased["word_input_ids"][rows:][erased["word_token_mask"][rows:]]
    assert (second == MASK).all()
    assert (erased["word_input_ids"][:rows][erased["word_token_mask"][:rows]] != MASK).all()


def test_occurrences_draw_the_same_word_from_other_texts():
    """With ``occurrences=3`` the batch is words x 3: each group's three views hold the same word, two of them
    from other texts of the index (never the chosen occurrence again); a word too rare for the index is not
    chosen."""
    rng = np.random.default_rng(5)
    common = [(6, 7), (8, 9), (10, 11)]
    rare = (30, 31)
    texts = [text([common[int(rng.integers(3))] for _ in range(6)] + [(12 + 2 * (k % 8), 13 + 2 * (k % 8))])
             for k in range(40)]
    texts[0] = text([rare, (34, 35)])
    index = WordIndex.build(texts, toy_table(), 3)
    batch = collator(occurrences=3, word_index=index)([{"input_ids": t} for t in texts[1:9]])
    words = [tuple(row[mask].tolist()) for row, mask in zip(batch["word_input_ids"], batch["word_token_mask"])]
    count = len(words) // 2
    assert count >= 8 and count % 3 == 0
    contexts = [tuple(row.tolist()) for row in batch["word_input_ids"][:count]]
    for g in range(0, count, 3):
        assert len(set(words[g:g + 3])) == 1 and words[g] != rare
        assert len(set(contexts[g:g + 3])) == 3  # three different windows
    assert collator(occurrences=3, word_index=index)([{"input_ids": texts[0]}])["word_input_ids"].shape[0] == 0


def test_the_loss_falls_on_a_toy_corpus_and_trains_only_the_encoder():
    """Thirty steps of Adam on the loss alone bring it below half its start; the decoder gets no gradient."""
    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=VOCAB, dropout=0.1))
    rng = np.random.default_rng(2)
    features = [{"input_ids": text([(int(w), int(w) + 1) for w in 6 + 2 * rng.integers(0, 16, size=12)])}
                for _ in range(16)]
    batch = collator(word_erase=0.3)(features)
    loss_fn = WordContrastLoss(weight=1.0, temperature=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = loss_fn(model, {k: batch[k] for k in loss_fn.keys})
        loss.backward()
        losses.append(loss.item())
        optimizer.step()
    assert losses[-1] < 0.5 * losses[0], losses
    assert all(p.grad is None or not p.grad.any() for n, p in model.named_parameters() if "decoder.layers" in n)
    assert loss_fn(model, {k: v[:1] for k, v in collator()(features[:1]).items() if k in loss_fn.keys}) is None


def test_a_run_with_the_other_encoder_losses_logs_each_and_resumes_exactly(tmp_path, paragraphs):  # noqa: F811
    """Beside the masked-token and the contrastive loss, with hard negatives and the erased-word view: each loss is
    logged at every step; the same options give the same weights (a seed); a run stopped after step 2 and resumed
    gives the weights and losses of the straight run (within 1e-6)."""
    settings = dict(max_length=64, max_steps=4, save_steps=2, word_contrast_weight=1.0, word_contrast_occurrences=2,
                    word_contrast_erase_word=True, encoder_mlm_weight=1.0, contrastive_weight=0.5,
                    config_overrides="dropout=0.1")
    straight = Path(run_training(*tiny(tmp_path, paragraphs, "straight", **settings))["output_dir"])
    state = json.loads((straight / "checkpoint-4" / "trainer_state.json").read_text())
    for key in ("word_contrast_loss", "encoder_mlm_loss", "contrastive_loss"):
        logged = [entry[key] for entry in state["log_history"] if key in entry]
        assert len(logged) == 4 and all(math.isfinite(v) and v > 0 for v in logged), key
    options, args = tiny(tmp_path, paragraphs, "resumed", **settings)
    assert run_training(options, args, callbacks=[StopAt(2)])["stopped"]
    args.resume_from_checkpoint = "latest"
    resumed = Path(run_training(options, args)["output_dir"])
    weights = {name: ScratchformerForConditionalGeneration.from_pretrained(folder).model.encoder.layers[0]
               .self_attn.q_proj.weight for name, folder in (("straight", straight), ("resumed", resumed))}
    torch.testing.assert_close(weights["straight"], weights["resumed"], rtol=0, atol=1e-6)
    assert train_losses(straight) == pytest.approx(train_losses(resumed), abs=1e-6)
    saved = json.loads((straight / "train_config.json").read_text())
    assert (saved["word_contrast_weight"], saved["word_contrast_occurrences"], saved["word_contrast_erase"]) == \
        (1.0, 2, 0.2)


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--word-contrast-weight", "-1", "--word-contrast-weight must be >= 0 (0 = off), got -1"),
    ("--word-contrast-temperature", "0", "--word-contrast-temperature must be positive, got 0"),
    ("--word-contrast-erase", "1", "--word-contrast-erase must be in [0, 1), got 1"),
    ("--word-contrast-occurrences", "0", "--word-contrast-occurrences must be >= 1, got 0"),
])
def test_a_bad_value_is_one_line(tmp_path, capsys, flag, value, says):
    train = tmp_path / "t.txt"
    train.write_text("a line\n")
    code = cli_main(["train", "--train-files", str(train), "--output-dir", str(tmp_path / "o"), flag, value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and says in err, err


def test_hard_negatives_need_the_whole_training_set_not_a_stream(tmp_path, capsys):
    train = tmp_path / "t.txt"
    train.write_text("a line\n")
    code = cli_main(["train", "--train-files", str(train), "--output-dir", str(tmp_path / "o"), "--streaming",
                     "--max-steps", "2", "--word-contrast-weight", "1", "--word-contrast-occurrences", "2"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--word-contrast-occurrences draws other occurrences" in err
