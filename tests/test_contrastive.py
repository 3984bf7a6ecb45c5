"""The encoder's contrastive loss on cropped windows (``--contrastive-weight``): the windows, the loss, the run."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from model_fixtures import tiny_config
from test_training import OBJECTS, SUBJECTS, VERBS, tiny

from scratchformer import ScratchformerForConditionalGeneration
from scratchformer.training import run_training
from scratchformer.training.contrastive import (
    MIN_SOURCE_TOKENS,
    WINDOW_TOKENS,
    CroppingLoss,
    crop_pair,
    info_nce,
)
from scratchformer.training.noise import DataCollatorForTextInfilling

EOS, PAD, MASK = 2, 0, 4


def collator(**overrides) -> DataCollatorForTextInfilling:
    return DataCollatorForTextInfilling(pad_token_id=PAD, mask_token_id=MASK, eos_token_id=EOS,
                                        decoder_start_token_id=EOS, seed=3, **overrides)


def text(length: int, start: int = 10) -> list[int]:
    return list(range(start, start + length)) + [EOS]


def test_crop_pair_cuts_two_windows_of_the_text_and_none_of_a_short_text():
    rng = np.random.default_rng(0)
    assert crop_pair(list(range(MIN_SOURCE_TOKENS - 1)), rng) is None
    for n in (MIN_SOURCE_TOKENS, 100):
        body = list(range(1000, 1000 + n))
        for _ in range(50):
            for window in crop_pair(body, rng):
                assert WINDOW_TOKENS[0] <= len(window) <= min(WINDOW_TOKENS[1], n // 2)
                start = body.index(window[0])
                assert window == body[start:start + len(window)]  # consecutive tokens of the text


def test_the_collator_adds_windows_only_when_asked_and_leaves_the_noise_as_it_was():
    features = [{"input_ids": text(40)}, {"input_ids": text(8)}, {"input_ids": text(60, start=500)}]
    plain, cropped = collator()(features), collator(crop_pairs=True)(features)
    assert set(plain) == {"input_ids", "attention_mask", "labels", "decoder_input_ids"}
    for key, value in plain.items():
        assert torch.equal(cropped[key], value), key
    ids, attention, tokens = cropped["crops_input_ids"], cropped["crops_attention_mask"], cropped["crops_token_mask"]
    assert ids.shape[0] == 4  # the two long texts, two windows each: a_0, a_1, b_0, b_1; the short one gives none
    for row in range(4):
        length = int(tokens[row].sum())
        assert ids[row, length] == EOS and int(attention[row].sum()) == length + 1
        source = features[0 if row % 2 == 0 else 2]["input_ids"]
        assert ids[row, :length].tolist() == source[source.index(int(ids[row, 0])):][:length]
    again = collator(crop_pairs=True)(features)
    assert torch.equal(again["crops_input_ids"], ids)  # a function of seed, epoch and text: resumable
    next_epoch = collator(crop_pairs=True, epoch=1)(features)["crops_input_ids"]
    assert not torch.equal(next_epoch, ids)


def test_a_batch_without_long_texts_gives_no_windows_and_no_loss():
    batch = collator(crop_pairs=True)([{"input_ids": text(8)}, {"input_ids": text(12)}])
    assert batch["crops_input_ids"].shape[0] == 0
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=64))
    crops = {key: value for key, value in batch.items() if key.startswith("crops_")}
    assert CroppingLoss(1.0)(model, crops) is None


def test_info_nce_is_near_zero_for_matching_rows_and_large_for_swapped_ones():
    """Unit vectors along different axes, temperature 0.05: a matching pair has cosine 1 and the others 0, so the
    loss is log(1 + (P - 1) exp(-20)), below 1e-7; with the keys in the wrong order it is 20 (within 1e-6)."""
    queries = torch.eye(4, 8)
    assert info_nce(queries, queries.clone(), 0.05) < 1e-7
    assert info_nce(queries, queries.flip(0), 0.05) == pytest.approx(20.0, abs=1e-6)
    tokens = torch.stack([queries, queries], dim=1)  # (4, 2, 8): two matching tokens per row
    noise = torch.randn(4, 1, 8)
    with_padding = torch.cat([tokens, noise], dim=1)
    mask = torch.tensor([[True, True, False]] * 4)
    assert info_nce(with_padding, queries, 0.05, mask) == pytest.approx(float(info_nce(tokens, queries, 0.05,
                                                                                       mask[:, :2])), abs=1e-7)


@pytest.mark.parametrize("target", ["tokens", "sentence"])
def test_cropping_loss_trains_the_encoder(target):
    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=600))
    batch = collator(crop_pairs=True)([{"input_ids": text(40, start=10 + 60 * i)} for i in range(4)])
    crops = {key: value for key, value in batch.items() if key.startswith("crops_")}
    loss = CroppingLoss(1.0, target)(model, crops)
    assert math.isfinite(float(loss.detach())) and float(loss.detach()) > 0
    loss.backward()
    encoder_grads = [p.grad for p in model.get_encoder().parameters() if p.grad is not None]
    assert encoder_grads and any(float(g.abs().sum()) > 0 for g in encoder_grads)
    assert all(p.grad is None for p in model.get_decoder().layers.parameters())  # the decoder takes no part


@pytest.fixture(scope="module")
def paragraphs(tmp_path_factory) -> Path:
    """200 lines of 6-10 sentences: long enough for two windows each."""
    rng = random.Random(2)
    path = tmp_path_factory.mktemp("data") / "paragraphs.txt"
    lines = [". ".join(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
                       for _ in range(rng.randint(6, 10))) + "." for _ in range(200)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_run_with_the_contrastive_loss_logs_it_and_trains_differently(tmp_path, paragraphs):
    """The loss reaches the run: ``contrastive_loss`` is logged at each step, the weights differ from the same run
    without it, and the options are recorded for ``--resume``."""
    runs = {}
    for name, weight in (("plain", 0.0), ("contrastive", 1.0)):
        options, args = tiny(tmp_path, paragraphs, name, max_length=64, contrastive_weight=weight, max_steps=3,
                             save_steps=100, config_overrides="dropout=0.0")
        runs[name] = Path(run_training(options, args)["output_dir"])
    state = json.loads((runs["contrastive"] / "checkpoint-3" / "trainer_state.json").read_text())
    logged = [entry["contrastive_loss"] for entry in state["log_history"] if "contrastive_loss" in entry]
    assert len(logged) == 3 and all(math.isfinite(v) and v > 0 for v in logged)
    plain_state = json.loads((runs["plain"] / "checkpoint-3" / "trainer_state.json").read_text())
    assert not any("contrastive_loss" in entry for entry in plain_state["log_history"])
    weights = {name: ScratchformerForConditionalGeneration.from_pretrained(folder).model.encoder.layers[0]
               .self_attn.q_proj.weight for name, folder in runs.items()}
    assert not torch.allclose(weights["plain"], weights["contrastive"])
    saved = json.loads((runs["contrastive"] / "train_config.json").read_text())
    assert (saved["contrastive_weight"], saved["contrastive_target"], saved["contrastive_temperature"]) == \
        (1.0, "tokens", 0.05)


@pytest.mark.slow
def test_two_processes_train_with_the_encoder_losses(tmp_path, paragraphs):
    """Under ``torchrun`` (gloo, 2 processes) the encoder passes of the contrastive and masked-token losses run
    outside DDP's forward; the run must still finish, log both losses, and leave finite weights (a gradient that DDP
    did not reduce would hang or fail)."""
    torchrun = Path(sys.executable).with_name("torchrun")
    out = tmp_path / "ddp"
    command = [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "scratchformer.cli", "train",
               "--train-files", str(paragraphs), "--output-dir", str(out), "--preset", "tiny",
               "--tokenizer-vocab-size", "300", "--max-length", "64", "--batch-size", "4", "--max-steps", "3",
               "--eval-steps", "0", "--save-steps", "1000", "--logging-steps", "1", "--learning-rate", "3e-3",
               "--warmup-steps", "2", "--no-progress-bar", "--max-eval-samples", "16", "--contrastive-weight", "1",
               "--encoder-mlm-weight", "1", "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=400,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    for key in ("contrastive_loss", "encoder_mlm_loss"):
        assert sum(key in entry for entry in state["log_history"]) == 3, key
    model = ScratchformerForConditionalGeneration.from_pretrained(out)
    assert all(torch.isfinite(p).all() for p in model.parameters())
