"""The benchmark script runs end to end (``--quick``, tiny sizes) and writes complete results.

Only behaviour is asserted here (every pair measured, positive medians and ratios, the report written); the speed
and memory targets live in ``benchmarks/RESULTS.md``, never in tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("bench")
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return json.loads((out / "results.json").read_text()), (out / "RESULTS.md").read_text()


def test_every_pair_is_measured_with_positive_medians_and_ratios(quick_run):
    results, _ = quick_run
    pairs = results["pairs"]
    kinds = {(p["group"], p["b"]["label"]) for p in pairs}
    for theirs in ("BartEncoder", "BertModel", "DistilBertModel"):
        assert ("encoder", theirs) in kinds
    for group in ("s2s_forward", "train_step", "generate"):
        assert (group, "BartForConditionalGeneration") in kinds
    assert {p["group"] for p in pairs} >= {"cache", "attention", "matmul"}
    assert len({p["id"] for p in pairs}) == len(pairs)
    assert len([p for p in pairs if p["group"] == "encoder"]) == 6  # 2 lengths x 3 models
    assert len([p for p in pairs if p["group"] in ("generate", "cache")]) == 4  # 2 batch sizes each
    size = results["meta"]["size"]
    for p in pairs:
        repeats = size["slow_repeats"] if p["group"] == "cache" else size["repeats"]
        for side in ("a", "b"):
            times = p[side]["times_s"]
            assert len(times) == repeats
            assert all(t > 0 for t in times)
            assert p[side]["min_s"] <= p[side]["median_s"] <= p[side]["max_s"]
        assert p["ratio"] > 0 and p["round_ratio_median"] > 0
        assert p["ratio"] == pytest.approx(p["b"]["median_s"] / p["a"]["median_s"])


def test_matmul_memory_and_targets_are_reported(quick_run):
    results, _ = quick_run
    matmul = results["matmul"]
    assert matmul["matmul_gflops"] > 0 and matmul["encoder_gflops"] > 0 and matmul["fraction"] > 0
    if Path("/proc/self/clear_refs").exists():  # peak RSS is measured on Linux
        assert {(c["workload"].split("_")[0], c["theirs"]) for c in results["memory"]} >= {
            ("encoder", "bart_encoder"), ("encoder", "bert"), ("encoder", "distilbert"), ("s2s", "bart_s2s"),
            ("train", "bart_train"), ("generate", "bart_s2s"), ("encoder", "ours_encoder_eager")}
        for c in results["memory_children"]:
            assert c["peak_rss_mb"] >= c["start_rss_mb"] > 0
        assert all(c["ratio"] > 0 for c in results["memory"])
    assert results["targets"] and all(isinstance(t["met"], bool) for t in results["targets"])
    meta = results["meta"]
    assert meta["mode"] == "quick" and meta["versions"]["torch"] and meta["machine"]["logical_cpus"]


def test_the_markdown_report_is_written(quick_run):
    results, markdown = quick_run
    for heading in ("## Machine and versions", "## Speed", "## Against the machine's matmul throughput",
                    "## Peak memory (RSS)", "## Targets"):
        assert heading in markdown
    for p in results["pairs"]:
        assert p["title"] in markdown
