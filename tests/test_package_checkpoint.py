"""scripts/package_checkpoint.py: a finished training run becomes a shipped-checkpoint folder with a model card."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

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
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "package_checkpoint.py"), "--run", str(run), "--senses-data",
         str(write_tsv(tmp_path / "senses.tsv")), "--no-reference", "--output", str(out), "--minutes", "1",
         "--command", "scratchformer train --preset tiny", "--snapshots", str(snapshot)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]

    card = (out / "README.md").read_text()
    assert "scratchformer train --preset tiny" in card and "![loss curve](loss_curve.png)" in card
    assert "| 4 |" in card and "During training" in card  # the per-step table has the snapshot's row
    progress = json.loads((out / "training_progress.json").read_text())
    assert [row["step"] for row in progress] == [4] and 0.0 <= progress[0]["roc_auc"] <= 1.0
    senses = json.loads((out / "senses.json").read_text())
    assert senses["pairs"] == 11 and all("roc_auc_centred" in layer for layer in senses["layers"])

    # stored in float16, run in float32
    with safe_open(str(out / "model.safetensors"), "pt") as weights:
        assert {weights.get_tensor(name).dtype for name in weights.keys()} == {torch.float16}
    assert json.loads((out / "config.json").read_text())["dtype"] == "float32"
    model = ScratchformerEncoderModel.from_pretrained(out)
    tokenizer = ScratchformerTokenizer.from_pretrained(out)
    hidden = model(**tokenizer(["the light was good."], return_tensors="pt")).last_hidden_state
    assert hidden.dtype == torch.float32 and torch.isfinite(hidden).all()
