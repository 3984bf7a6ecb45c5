"""scripts/package_checkpoint.py: a finished training run becomes a shipped-checkpoint folder with a model card."""

from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO_ROOT
from safetensors import safe_open
from test_senses import write_tsv
from test_training import corpus, tiny  # noqa: F401  (corpus is a fixture)

from scratchformer import ScratchformerEncoderModel, ScratchformerTokenizer
from scratchformer.training import run_training


def test_package_a_run_with_per_step_scores(tmp_path, corpus):  # noqa: F811
    run = Path(run_training(*tiny(tmp_path, corpus, "run"))["output_dir"])
    snapshot = tmp_path / "snapshots" / "checkpoint-4"  # as the copies of checkpoint-* taken during a long run
    shutil.copytree(run / "checkpoint-4", snapshot)
    out = tmp_path / "packaged"
    sources = tmp_path / "SOURCES.json"  # as scripts/build_corpus.py writes it
    sources.write_text(json.dumps({
        "summary": {"words": 1_500_000, "combined": {"words": 7_200_000}},
        "sources": [{"name": "gcide", "registry": "debian", "package": "dict-gcide", "version": "0.48",
                     "licence": "GPL-2.0-or-later", "licence_note": "", "attribution": "GCIDE", "status": "used",
                     "words": 1_500_000},
                    {"name": "absent", "registry": "pypi", "package": "x", "version": "1", "licence": "MIT",
                     "attribution": "not installed", "status": "missing", "words": 0}]}))
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "package_checkpoint.py"), "--run", str(run), "--senses-data",
         str(write_tsv(tmp_path / "senses.tsv")), "--no-reference", "--output", str(out), "--minutes", "1",
         "--command", "scratchformer train --preset tiny", "--snapshots", str(snapshot),
         "--corpus-sources", str(sources), "--cpu-seconds-per-step", "2.5", "--cpu-batch-size", "4"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    card = (out / "README.md").read_text()
    assert "scratchformer train --preset tiny" in card and "![loss curve](loss_curve.png)" in card
    assert "| 4 |" in card and "During training" in card  # the per-step table has the snapshot's row
    # hardware and time from the run's run_record.json (not --minutes), the effective batch, the corpus and its
    # licences, and the "bank" verdict of scratchformer compare
    record = json.loads((run / "run_record.json").read_text())
    assert "CPU cores (fp32), in 1 invocation(s)" in card and "steps 0-8 in" in card
    assert json.loads((out / "run_record.json").read_text()) == record
    assert "batch 8 sequences per optimizer step (8 per process x 1 accumulation steps x 1 process(es))" in card
    # the same run on CPU cores: accumulation to the same 8 sequences per step, its expected time, and --resume
    assert "`--batch-size 4 --gradient-accumulation-steps 2`" in card and "**1 minute(s)** for 8 steps" in card
    assert "the same command plus `--resume`" in card
    assert "`corpus_combined.txt.gz`, 7.2M words" in card and "GCIDE (1.50M words)" in card
    assert "debian package `dict-gcide` 0.48), **GPL-2.0-or-later**" in card and "not installed" not in card
    bank = json.loads((out / "bank_study.json").read_text())
    assert bank["verdict"].startswith("senses separated: ") and f"**{bank['verdict']}**" in card
    progress = json.loads((out / "training_progress.json").read_text())
    assert [row["step"] for row in progress] == [4] and 0.0 <= progress[0]["roc_auc"] <= 1.0
    senses = json.loads((out / "senses.json").read_text())
    assert senses["pairs"] == 11 and all("roc_auc_centred" in layer for layer in senses["layers"])
    # a snapshot scored before (e.g. while the run still trained) is not scored again, unless its weights are newer
    snapshot_report = runpy.run_path(str(REPO_ROOT / "scripts" / "package_checkpoint.py"))["snapshot_report"]
    scored = run / "package" / "senses-step-4"
    os.utime(snapshot / "model.safetensors", (1000, 1000))
    os.utime(scored / "senses.json", (2000, 2000))
    report = snapshot_report(snapshot, tmp_path / "senses.tsv", scored)
    assert report.last_layer.roc_auc == progress[0]["roc_auc"] and report.best_layer.layer == progress[0]["best_layer"]
    assert (scored / "senses.json").stat().st_mtime == 2000  # reused, not rewritten
    os.utime(snapshot / "model.safetensors", (3000, 3000))
    assert snapshot_report(snapshot, tmp_path / "senses.tsv", scored).pairs == 11
    assert (scored / "senses.json").stat().st_mtime > 3000  # scored again

    # a run scored where it trained (its checkpoints not copied back): the per-step table from its progress file
    again = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "package_checkpoint.py"), "--run", str(run), "--senses-data",
         str(tmp_path / "senses.tsv"), "--no-reference", "--output", str(tmp_path / "again"),
         "--progress", str(out / "training_progress.json")], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert "| 4 |" in (tmp_path / "again" / "README.md").read_text()
    assert json.loads((tmp_path / "again" / "training_progress.json").read_text()) == progress

    # stored in float16, run in float32
    with safe_open(str(out / "model.safetensors"), "pt") as weights:
        assert {weights.get_tensor(name).dtype for name in weights.keys()} == {torch.float16}
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    model = ScratchformerEncoderModel.from_pretrained(out)
    tokenizer = ScratchformerTokenizer.from_pretrained(out)
    hidden = model(**tokenizer(["the light was good."], return_tensors="pt")).last_hidden_state
    assert hidden.dtype == torch.float32 and torch.isfinite(hidden).all()


def test_package_a_two_phase_run(tmp_path, corpus):  # noqa: F811
    """The encoder's run, then the decoder's from it (the shipped recipe's shape): the card describes each phase
    (objective, schedule, steps, time, both loss curves) and their total, and geometry.json is written."""
    first = Path(run_training(*tiny(tmp_path, corpus, "encoder", encoder_mlm_weight=1.0, denoising_weight=0.0,
                                    lr_scheduler_type="linear", max_steps=6))["output_dir"])
    second = Path(run_training(*tiny(tmp_path, corpus, "decoder", model=str(first), freeze_encoder=True,
                                     max_steps=4))["output_dir"])
    out = tmp_path / "packaged"
    data = write_tsv(tmp_path / "senses.tsv")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "package_checkpoint.py"), "--run", str(second), "--first-phase",
         str(first), "--senses-data", str(data), "--geometry-data", str(data), "--no-reference", "--output",
         str(out), "--command", "python examples/pretrain_denoising.py"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    card = (out / "README.md").read_text()
    seconds = [json.loads((run / "run_record.json").read_text())["total_seconds"] for run in (first, second)]
    assert f"**Two phases, {sum(seconds) / 60:.0f} minutes in all.**" in card
    phase_one, phase_two = card.split("Phase one, the encoder:")[1].split("Phase two, the decoder")
    assert "BERT's masked-token loss on the encoder" in phase_one and "No decoder loss" in phase_one
    assert "a linear schedule (down to zero at step 6)" in phase_one and ", 6 steps" in phase_one
    assert "The decoder alone (`--freeze-encoder`)" in phase_two and "masked-token" not in phase_two.split("**Hardware")[0]
    assert "inverse-square-root" in phase_two and ", 4 steps" in phase_two
    assert "![loss curve, phase one](loss_curve_encoder.png)" in card and "--first-phase ENCODER_RUN_DIR" in card
    for name in ("loss_curve_encoder.png", "loss_history_encoder.json", "run_record_encoder.json", "geometry.json"):
        assert (out / name).is_file(), name
    geometry = json.loads((out / "geometry.json").read_text())
    assert [m["source"] for m in geometry["models"]] == [str(second)] and geometry["models"][0]["num_layers"] == 1


def test_cpu_line_states_the_accumulation_and_the_expected_time():
    """The card's CPU line for the v2 recipe (128 sequences per step, 3000 steps at 2.5 s/step on 2 cores), nothing
    without a measured time, and a micro-batch that does not divide the step's sequences is refused."""
    cpu_lines = runpy.run_path(str(REPO_ROOT / "scripts" / "package_checkpoint.py"))["cpu_lines"]
    config = {"per_device_train_batch_size": 128, "gradient_accumulation_steps": 1}
    (line,) = cpu_lines(config, 3000, 2.5, 32)
    assert "`--batch-size 32 --gradient-accumulation-steps 4`" in line and "**2.1 hours** for 3000 steps" in line
    assert cpu_lines(config, 3000, None, 32) == []
    with pytest.raises(SystemExit, match="--cpu-batch-size 48 does not divide the run's 128 sequences"):
        cpu_lines(config, 3000, 2.5, 48)
    # a run that trained on the CPU cores itself (32 x 4): its own command, the time and how to continue it
    (line,) = cpu_lines({"per_device_train_batch_size": 32, "gradient_accumulation_steps": 4}, 3000, 3.4, 32)
    assert "(how this run was made): the command above, 32 x 4 sequences" in line and "`--resume`" in line
    assert "**2.8 hours** for 3000 steps" in line and "instead of" not in line


def test_objective_line_follows_the_run_options():
    """The card's objective line states the run's own noise and encoder losses, not a fixed recipe: v2's defaults,
    and a run with half the tokens masked and the masked-token loss."""
    objective = runpy.run_path(str(REPO_ROOT / "scripts" / "package_checkpoint.py"))["objective_description"]
    v2 = objective({"poisson_lambda": 3.0, "mask_ratio": 0.3, "label_smoothing_factor": 0.1,
                    "encoder_mlm_weight": 0.0, "contrastive_weight": 0.0})
    assert "Poisson(3) spans covering 30% of the tokens" in v2 and "Label smoothing 0.1." in v2
    assert "masked-token" not in v2 and "contrastive" not in v2 and "decoder alone" not in v2
    v3 = objective({"poisson_lambda": 3.0, "mask_ratio": 0.5, "label_smoothing_factor": 0.1,
                    "encoder_mlm_weight": 1.0, "encoder_mlm_probability": 0.15, "contrastive_weight": 0.5,
                    "contrastive_target": "sentence", "contrastive_temperature": 0.05})
    assert "covering 50% of the tokens" in v3 and "masked-token loss on the encoder, weight 1: 15%" in v3
    assert "(the encoder's sentence vectors), weight 0.5, temperature 0.05" in v3 and "No decoder loss" not in v3
    # the two phases of v4: the encoder's loss alone, then the decoder alone
    encoder = objective({"denoising_weight": 0.0, "encoder_mlm_weight": 1.0, "encoder_mlm_probability": 0.3})
    assert encoder.startswith("- **Objective**: BERT's masked-token loss on the encoder, weight 1: 30%")
    assert "No decoder loss" in encoder and "text infilling" not in encoder
    decoder = objective({"mask_ratio": 0.3, "freeze_encoder": True})
    assert "covering 30% of the tokens" in decoder and "The decoder alone (`--freeze-encoder`)" in decoder


def test_missing_inputs_and_an_output_over_the_run_are_one_line_before_any_work(tmp_path, capsys):
    """Each was a traceback (a missing run's all_results.json), or the export's refusal after minutes of scoring (an
    --output that is or holds the run)."""
    main = runpy.run_path(str(REPO_ROOT / "scripts" / "package_checkpoint.py"))["main"]
    run = tmp_path / "run"
    run.mkdir()
    for name in ("all_results.json", "train_config.json"):
        (run / name).write_text("{}")
    senses = write_tsv(tmp_path / "senses.tsv")
    cases = [
        (["--run", str(tmp_path / "none")], "--run: " + str(tmp_path / "none" / "all_results.json") + " is not a file"),
        (["--run", str(run), "--senses-data", str(tmp_path / "no.tsv")], " is not a file"),
        (["--run", str(run), "--first-phase", str(tmp_path / "none")], "--first-phase: "),
        (["--run", str(run), "--snapshots", str(run / "checkpoint-9")], "--snapshots: "),
        (["--run", str(run), "--output", str(run)], f"--output {run} is --run {run}: choose a folder apart"),
        (["--run", str(run), "--output", str(tmp_path)], f"--output {tmp_path} contains --run {run}"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as stop:
            main(["--senses-data", str(senses), *argv])
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert stop.value.code == 2 and message in error, error
    assert sorted(path.name for path in run.iterdir()) == ["all_results.json", "train_config.json"]


@pytest.mark.parametrize("damage", ["eval_loss", "weight"])
def test_a_run_whose_evaluation_or_weights_are_not_finite_is_not_packaged(tmp_path, capsys, damage):
    """The publishing invariant (integrity.check_finite): a run whose all_results.json has a NaN eval_loss, or whose
    weights hold one, is one line and exit 2 before any scoring, and nothing is written."""
    from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration

    main = runpy.run_path(str(REPO_ROOT / "scripts" / "package_checkpoint.py"))["main"]
    run, out = tmp_path / "run", tmp_path / "packaged"
    model = ScratchformerForConditionalGeneration(ScratchformerConfig(
        vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16))
    if damage == "weight":
        with torch.no_grad():
            model.model.encoder.layers[0].feed_forward.fc2.weight[0, 0] = float("inf")
    model.save_pretrained(run)
    (run / "all_results.json").write_text(json.dumps({"eval_loss": float("nan") if damage == "eval_loss" else 2.0}))
    (run / "train_config.json").write_text("{}")
    with pytest.raises(SystemExit) as stop:
        main(["--run", str(run), "--senses-data", str(write_tsv(tmp_path / "senses.tsv")), "--output", str(out)])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    bad = ("its eval_loss is nan" if damage == "eval_loss"
           else "its weight model.encoder.layers.0.feed_forward.fc2.weight holds NaN or infinite values")
    assert stop.value.code == 2 and error.endswith(f"--run {run} is not published: {bad}"), error
    assert not out.exists() and not (run / "package").exists()
