"""ELECTRA's replaced-token detection (``--electra-weight``): the generator, the loss, the run, resume, the saved
model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from model_fixtures import tiny_config
from test_contrastive import EOS, MASK, PAD, paragraphs, text  # noqa: F401  (paragraphs is a fixture)
from test_encoder_mlm import SPECIALS, VOCAB, collator
from test_training import StopAt, tiny

from scratchformer import ScratchformerForConditionalGeneration
from scratchformer.errors import ScratchformerError, TrainingSetupError
from scratchformer.training import run_training
from scratchformer.training.electra import (
    STATE_FILE,
    ElectraParts,
    ReplacedTokenDetection,
    check_electra,
    generator_shape,
)


def electra(model, **overrides) -> ReplacedTokenDetection:
    width, layers, heads = generator_shape(model.config, None, None)
    return ReplacedTokenDetection(1.0, ElectraParts(model.config, width, layers, heads), list(SPECIALS),
                                  **overrides)


def batch_of(rows: int = 4, probability: float = 0.3):
    return collator(encoder_mlm_probability=probability)(
        [{"input_ids": text(40, start=10 + 60 * i)} for i in range(rows)])


@pytest.mark.parametrize("positions", ["sinusoidal", "rope"])
def test_the_loss_is_the_generators_plus_lambda_times_the_detection_loss_and_trains_all_three(positions):
    """The generator's loss is near log V for an untrained model (within 20 %), the detection loss near log 2 for an
    untrained head (within 30 %), the total is their sum with lambda (1e-5); the gradient reaches the generator, the
    head, the shared embedding and the encoder's layers, never the decoder."""
    torch.manual_seed(0)
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=VOCAB, position_embedding_type=positions))
    loss_fn = electra(model, discriminator_weight=50.0)
    loss = loss_fn(model, batch_of())
    generator, detection = (float(loss_fn.logged[k]) for k in ("electra_generator", "electra_discriminator"))
    assert generator == pytest.approx(math.log(VOCAB), rel=0.2)
    assert detection == pytest.approx(math.log(2), rel=0.3)
    assert float(loss.detach()) == pytest.approx(generator + 50 * detection, rel=1e-5)
    loss.backward()
    parts = loss_fn.parts
    assert all(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in parts.detection_head.parameters())
    assert float(parts.generator.project_in.weight.grad.abs().sum()) > 0
    assert float(model.get_input_embeddings().weight.grad.abs().sum()) > 0
    assert any(p.grad is not None and float(p.grad.abs().sum()) > 0 for p in model.get_encoder().layers.parameters())
    assert all(p.grad is None for p in model.get_decoder().layers.parameters())


def test_replacements_come_from_the_generator_never_a_special_token_and_only_at_the_chosen_positions():
    """With the generator's logits forced to one ordinary token, every chosen position holds it and the detection
    labels mark exactly the chosen positions whose original differs; a special token is never sampled even when
    the generator prefers it."""
    torch.manual_seed(1)
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=VOCAB))
    loss_fn = electra(model)
    logits = torch.full((6, VOCAB), -10.0)
    logits[:, MASK] = 50.0  # the generator's favourite is a special token: never sampled
    logits[:, 77] = 5.0
    assert loss_fn._sample(logits).tolist() == [77] * 6


def test_a_batch_with_nothing_chosen_gives_no_loss():
    model = ScratchformerForConditionalGeneration(tiny_config(vocab_size=VOCAB))
    batch = collator(encoder_mlm_probability=1e-9)([{"input_ids": text(10)}])
    assert electra(model)(model, batch) is None


def test_generator_shape_defaults_and_bad_shapes():
    config = tiny_config(vocab_size=VOCAB, d_model=256, encoder_layers=6)
    assert generator_shape(config, None, None) == (64, 6, 1)
    assert generator_shape(config, 128, 2) == (128, 2, 2)
    with pytest.raises(ScratchformerError, match="heads of an even size"):
        generator_shape(config, 65, 2)


def test_electra_trains_in_one_process_only():
    class Options:
        objective = "denoise"
        electra_weight = 1.0
    with pytest.raises(TrainingSetupError, match="one process"):
        check_electra(Options(), world_size=2)
    check_electra(Options(), world_size=1)


def test_a_run_logs_both_parts_saves_them_in_checkpoints_only_and_resumes_to_the_same_weights(tmp_path,
                                                                                             paragraphs):  # noqa: F811
    """A 4-step run logs electra_loss and its two parts at every step; each checkpoint holds electra.safetensors,
    the final model does not (its weights are the plain model's keys); a run stopped at step 2 and resumed ends
    with the same weights, generator included, as the run straight through (within 1e-6); the optimizer trains the
    generator (its weights moved from the initial ones)."""
    common = dict(max_length=64, max_steps=4, save_steps=2, config_overrides="dropout=0.0", electra_weight=1.0,
                  electra_discriminator_weight=10.0)
    straight = Path(run_training(*tiny(tmp_path, paragraphs, "straight", **common))["output_dir"])
    state = json.loads((straight / "checkpoint-4" / "trainer_state.json").read_text())
    for key in ("electra_loss", "electra_generator_loss", "electra_discriminator_loss"):
        logged = [entry[key] for entry in state["log_history"] if key in entry]
        assert len(logged) == 4 and all(math.isfinite(v) and v > 0 for v in logged), key
    assert (straight / "checkpoint-2" / STATE_FILE).is_file() and (straight / "checkpoint-4" / STATE_FILE).is_file()
    assert not (straight / STATE_FILE).exists()
    from safetensors import safe_open
    with safe_open(str(straight / "model.safetensors"), "pt") as saved:
        assert not [k for k in saved.keys() if "generator" in k or "detection" in k]
    ScratchformerForConditionalGeneration.from_pretrained(straight)  # loads as the plain model

    options, args = tiny(tmp_path, paragraphs, "cut", **common)
    assert run_training(options, args, callbacks=[StopAt(2)]).get("stopped")
    options, args = tiny(tmp_path, paragraphs, "cut", resume_from_checkpoint="latest", **common)
    cut = Path(run_training(options, args)["output_dir"])
    from safetensors.torch import load_file
    for name in ("model.safetensors", f"checkpoint-4/{STATE_FILE}"):
        a, b = load_file(str(straight / name)), load_file(str(cut / name))
        assert a.keys() == b.keys()
        for key in a:
            assert torch.allclose(a[key], b[key], atol=1e-6), (name, key)
    first = load_file(str(straight / "checkpoint-2" / STATE_FILE))
    last = load_file(str(straight / "checkpoint-4" / STATE_FILE))
    assert not torch.allclose(first["generator.project_in.weight"], last["generator.project_in.weight"])


def test_resuming_a_run_without_electra_with_it_is_one_clear_error(tmp_path, paragraphs):  # noqa: F811
    common = dict(max_length=64, max_steps=4, save_steps=2, config_overrides="dropout=0.0")
    options, args = tiny(tmp_path, paragraphs, "plain", **common)
    assert run_training(options, args, callbacks=[StopAt(2)]).get("stopped")
    options, args = tiny(tmp_path, paragraphs, "plain", resume_from_checkpoint="latest", electra_weight=1.0, **common)
    with pytest.raises(ScratchformerError):
        run_training(options, args)
