"""The benchmark script runs end to end (``--quick``, tiny sizes) and writes complete results; its device, dtype,
timer, results-file and report helpers behave (the CUDA paths with a stand-in for ``torch.cuda`` where no GPU is
present, and for real where one is). ``benchmarks/run.py`` is the command line; the names it was split into are
tested in their modules (``harness``, ``workloads``, ``report``, beside it). The findings are written by hand in
``RESULTS.md``, kept by every rendering, and explain every missed target; one without an explanation is reported.

Only behaviour is asserted here (every pair measured, positive medians and ratios, the report written); the speed
and memory targets live in ``benchmarks/RESULTS.md``, never in tests.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("benchmark_run", RUN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


# The modules run.py is split into (benchmarks/ is on sys.path once run.py is loaded).
@pytest.fixture(scope="module")
def harness(bench):
    return importlib.import_module("harness")


@pytest.fixture(scope="module")
def workloads(bench):
    return importlib.import_module("workloads")


@pytest.fixture(scope="module")
def report(bench):
    return importlib.import_module("report")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[dict, str, Path]:
    out = tmp_path_factory.mktemp("bench")
    completed = subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out-dir", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return json.loads((out / "results.json").read_text()), (out / "RESULTS.md").read_text(), out


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RUN), *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


# --------------------------------------------------------------------------------------------------------------------
# The quick run, end to end
# --------------------------------------------------------------------------------------------------------------------


def test_every_pair_is_measured_with_positive_medians_and_ratios(quick_run):
    results, _, _ = quick_run
    assert results["schema"] == 2 and results["device"] == "cpu"
    [group] = results["groups"]
    assert (group["size_name"], group["dtype"], group["device"]) == ("quick", "fp32", "cpu")
    pairs = group["pairs"]
    kinds = {(p["group"], p["b"]["label"]) for p in pairs}
    for theirs in ("BartEncoder", "BertModel", "DistilBertModel"):
        assert ("encoder", theirs) in kinds
    for kind in ("s2s_forward", "train_step", "generate"):
        assert (kind, "BartForConditionalGeneration") in kinds
    assert {p["group"] for p in pairs} >= {"cache", "attention", "matmul"}
    assert "compiled" not in {p["group"] for p in pairs}  # compiling takes tens of seconds: never in --quick
    assert len({p["id"] for p in pairs}) == len(pairs)
    assert len([p for p in pairs if p["group"] == "encoder"]) == 6  # 2 lengths x 3 models
    assert len([p for p in pairs if p["group"] in ("generate", "cache")]) == 4  # 2 batch sizes each
    size = group["size"]
    for p in pairs:
        assert not p.get("skipped")
        repeats = size["slow_repeats"] if p["group"] == "cache" else size["repeats"]
        for side in ("a", "b"):
            times = p[side]["times_s"]
            assert len(times) == repeats
            assert all(t > 0 for t in times)
            assert p[side]["min_s"] <= p[side]["median_s"] <= p[side]["max_s"]
            assert p[side]["page_faults_per_call"] is not None and "peak_call_mb" not in p[side]
        assert p["ratio"] > 0 and p["round_ratio_median"] > 0
        assert p["ratio"] == pytest.approx(p["b"]["median_s"] / p["a"]["median_s"])


def test_matmul_memory_and_targets_are_reported(quick_run):
    results, _, _ = quick_run
    [group] = results["groups"]
    matmul = group["matmul"]
    assert matmul["matmul_gflops"] > 0 and matmul["encoder_gflops"] > 0 and matmul["fraction"] > 0
    if Path("/proc/self/clear_refs").exists():  # peak RSS is measured on Linux
        assert {(c["workload"].split("_")[0], c["theirs"]) for c in group["memory"]} >= {
            ("encoder", "bart_encoder"), ("encoder", "bert"), ("encoder", "distilbert"), ("s2s", "bart_s2s"),
            ("train", "bart_train"), ("generate", "bart_s2s"), ("encoder", "ours_encoder_eager")}
        for c in group["memory_children"]:
            assert c["peak_rss_mb"] >= c["start_rss_mb"] > 0
        assert all(c["ratio"] > 0 for c in group["memory"])
    assert group["targets"] and all(isinstance(t["met"], bool) for t in group["targets"])
    run = group["run"]
    assert run["mode"] == "quick" and run["versions"]["torch"] and run["machine"]["logical_cpus"]
    assert run["machine"]["cpu"] and "gpu" not in run["machine"]
    assert run["timer"] == "wall clock (time.perf_counter)" and run["command"].endswith("--quick")


def test_the_markdown_report_is_written(quick_run):
    results, markdown, out = quick_run
    for heading in ("## Machine and versions", "### Speed", "### Against the machine's matmul throughput",
                    "### Peak memory (RSS)", "## Targets", "## GPU: the issue's H100 numbers (before the changes)",
                    "## Not measured yet"):
        assert heading in markdown
    for p in results["groups"][0]["pairs"]:
        assert p["title"] in markdown
    assert "CPU: " in markdown  # the device is named
    assert not (out / "results_cuda.json").exists() and not (out / "RESULTS_cuda.md").exists()


def test_render_only_rewrites_the_report_from_the_json(bench, quick_run):
    _, markdown, out = quick_run
    (out / "RESULTS.md").write_text("stale")
    bench.main(["--render-only", "--out-dir", str(out)])
    assert (out / "RESULTS.md").read_text() == markdown


# --------------------------------------------------------------------------------------------------------------------
# Command line: devices, dtypes, sizes
# --------------------------------------------------------------------------------------------------------------------


def test_help_shows_the_device_dtype_and_size_options():
    completed = _cli("--help")
    assert completed.returncode == 0
    for option in ("--device", "--dtype", "--sizes", "--render-only", "cuda", "bf16", "base"):
        assert option in completed.stdout


def test_dtypes_and_sizes_are_parsed_with_device_defaults(bench):
    assert bench.parse_dtypes(None, "cpu") == ("fp32",)
    assert bench.parse_dtypes(None, "cuda") == ("fp32", "bf16")
    assert bench.parse_dtypes(" bf16, fp32,bf16 ", "cpu") == ("bf16", "fp32")
    assert bench.parse_sizes(None, "cpu") == ("d256", "base", "overhead")
    assert bench.parse_sizes(None, "cuda") == ("d256", "base")  # on a GPU d256 is itself bound by per-call costs
    assert bench.parse_sizes("base", "cuda") == ("base",)
    for bad in ("fp16", "", "fp32,float8"):
        with pytest.raises(ValueError, match="--dtype"):
            bench.parse_dtypes(bad, "cuda")
    with pytest.raises(ValueError, match="choose from d256, base, overhead"):
        bench.parse_sizes("quick", "cpu")  # only through --quick


def test_bad_options_exit_2_with_a_message(bench, capsys):
    cases = [(("--dtype", "fp16"), "--dtype: unknown fp16"), (("--sizes", "large"), "--sizes: unknown large"),
             (("--quick", "--sizes", "base"), "--quick runs the tiny size only"), (("--device", "tpu"), "--device"),
             (("--threads", "-1"), "--threads must be a positive integer, got -1"),  # was torch's RuntimeError
             (("--threads", "0"), "--threads must be a positive integer"),  # was all cores, silently
             (("--repeats", "0"), "--repeats must be a positive integer, got 0"),  # was the default, silently
             (("--only", "nope"), "--only 'nope' is part of no pair's id (")]  # measured nothing, wrote empty results
    if not torch.cuda.is_available():
        cases.append((("--device", "cuda", "--quick"), "torch.cuda.is_available() is False"))
    for args, message in cases:
        with pytest.raises(SystemExit) as exit_info:
            bench.parse_args(list(args))
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    args = bench.parse_args(["--device", "cuda", "--render-only"])  # rendering needs no GPU
    assert (args.dtypes, args.size_names) == (("fp32", "bf16"), ("d256", "base"))
    assert bench.parse_args(["--quick"]).size_names == ("quick",)


def test_the_sizes_are_the_issue_sizes_and_workloads(workloads, report):
    for device in ("cpu", "cuda"):
        d256, base = workloads.SIZES[device]["d256"], workloads.SIZES[device]["base"]
        assert (d256.d_model, d256.layers, d256.vocab) == (256, 4, 16000)
        assert (base.d_model, base.layers, base.heads, base.ffn, base.vocab) == (512, 6, 8, 2048, 37000)
    gpu = workloads.SIZES["cuda"]["d256"]
    assert (gpu.encoder_batch, gpu.encoder_lengths, gpu.encoder_pad_half) == (64, (128,), True)
    assert (gpu.s2s_batch, gpu.s2s_source, gpu.s2s_target) == (64, 128, 128)
    assert (gpu.generate_batches, gpu.generate_new, gpu.compiled_batches) == ((1, 32), 64, (1, 32))
    sizes = workloads.SIZES["cpu"]
    assert sizes["d256"].compiled_batches == (1,) and not sizes["quick"].compiled_batches
    overhead = workloads.SIZES["cpu"]["overhead"]  # tiny: per-call costs, no matmul-throughput target
    assert overhead.overhead_bound and overhead.d_model <= 64 and overhead.generate_batches == (1, 8)
    assert not any(size.overhead_bound for device in ("cpu", "cuda") for name, size in workloads.SIZES[device].items()
                   if name != "overhead")
    assert report.matmul_summary(overhead, [], "cpu", "fp32")["target"] is None
    assert report.matmul_summary(workloads.SIZES["cpu"]["d256"], [], "cpu", "fp32")["target"] == workloads.MATMUL_TARGET
    cpu_d256 = workloads.SIZES["cpu"]["d256"]  # the CPU run as it was
    assert (cpu_d256.encoder_batch, cpu_d256.encoder_lengths, cpu_d256.encoder_pad_half) == (32, (32, 128), False)


def test_the_gpu_plan_has_every_issue_workload_for_both_sizes_and_dtypes(workloads):
    planned = workloads.plan("cuda")
    groups = {(item["size_name"], item["dtype"]) for item in planned}
    assert groups == {("d256", "fp32"), ("d256", "bf16"), ("base", "fp32"), ("base", "bf16")}
    ids = {item["id"] for item in planned}
    assert ids >= {"encoder_b64_s128_vs_bart", "train_step_vs_bart", "generate_b1_vs_bart", "generate_b32_vs_bart",
                   "compiled_b1_vs_bart", "compiled_b32_vs_bart", "compiled_b1_vs_eager", "compiled_b32_vs_eager"}
    assert {item["id"] for item in workloads.plan("cpu") if "compiled" in item["id"]} == {"compiled_b1_vs_eager"}
    assert ids >= {"attention_encoder_b64_s128_flex", "attention_train_step_flex"}  # issue: flex tested on a GPU
    assert not any("flex" in item["id"] for item in workloads.plan("cpu"))


def test_the_overhead_group_measures_no_memory(bench, report, monkeypatch):
    """A tiny model's peak resident set is library code paged in, not data: no memory children for that group."""
    measured = []
    monkeypatch.setattr(bench, "measure_memory", lambda *args: measured.append(args) or ([], []))
    monkeypatch.setattr(bench, "run_cpu_pairs", lambda *args: [])
    monkeypatch.setattr(bench, "in_child", lambda *args: {})
    group = bench.run_group(bench.parse_args(["--sizes", "overhead"]), "overhead", "fp32", 1)
    assert measured == [] and group["memory"] == []
    assert "not measured in this group" in "\n".join(report._memory_section(group))
    bench.run_group(bench.parse_args(["--sizes", "d256"]), "d256", "fp32", 1)
    assert len(measured) == 1  # the other groups still measure it


def test_encoder_inputs_pad_half_the_rows_on_the_gpu_sizes(workloads):
    w = workloads.Workloads(workloads.SIZES["cuda"]["quick"])  # CPU tensors: only the shapes and the mask are checked
    ids, mask = w.encoder_inputs(16)
    assert mask[:2].all() and mask[2:, :8].all() and not mask[2:, 8:].any()
    assert (ids[2:, 8:] == workloads.PAD).all() and (ids[mask.bool()] >= 5).all()
    ids, mask = workloads.Workloads(workloads.SIZES["cpu"]["quick"]).encoder_inputs(16)
    assert mask.all()


# --------------------------------------------------------------------------------------------------------------------
# Timers: one interface for the CPU and the CUDA path
# --------------------------------------------------------------------------------------------------------------------


class FakeCuda:
    """Stands in for ``torch.cuda``: events read the wall clock when recorded; every call is logged."""

    def __init__(self):
        self.log, self.allocated, self.peak = [], 100 * 2**20, 0

    class _Event:
        def __init__(self, cuda, enable_timing):
            assert enable_timing
            self.cuda, self.at = cuda, None

        def record(self):
            self.cuda.log.append("record")
            self.at = time.perf_counter()

        def synchronize(self):
            self.cuda.log.append("event.synchronize")

        def elapsed_time(self, other):
            return (other.at - self.at) * 1000  # ms, as CUDA events give it

    def Event(self, enable_timing=False):  # noqa: N802 (torch.cuda's name)
        return self._Event(self, enable_timing)

    def synchronize(self):
        self.log.append("synchronize")

    def reset_peak_memory_stats(self):
        self.log.append("reset_peak")
        self.peak = self.allocated

    def memory_allocated(self):
        return self.allocated

    def max_memory_allocated(self):
        return self.peak

    def allocate_transiently(self, mb):
        self.peak = max(self.peak, self.allocated + mb * 2**20)


def test_cpu_timer_times_a_call_and_leaves_memory_to_the_children(harness):
    timer = harness.make_timer("cpu")
    assert isinstance(timer, harness.CpuTimer) and timer.counts_page_faults
    assert 0.01 <= timer.time(lambda: time.sleep(0.02)) < 1
    calls = []
    assert timer.peak_memory_mb(lambda: calls.append(1)) is None and not calls  # no extra call on CPU


def test_cuda_event_timer_synchronises_only_around_the_timed_call(harness):
    cuda = FakeCuda()
    timer = harness.CudaEventTimer(cuda)
    assert not timer.counts_page_faults
    seconds = timer.time(lambda: (cuda.log.append("call"), time.sleep(0.02)))
    assert cuda.log == ["synchronize", "record", "call", "record", "event.synchronize"]
    assert 0.01 <= seconds < 1  # elapsed_time's milliseconds converted to seconds
    cuda.log.clear()
    assert timer.peak_memory_mb(lambda: cuda.allocate_transiently(48)) == pytest.approx(48)
    assert cuda.log == ["synchronize", "reset_peak", "synchronize"]


def test_time_pair_reports_gpu_peak_memory_and_no_page_faults_with_the_cuda_timer(harness):
    cuda = FakeCuda()
    pair = harness.Pair("p", "encoder", "title", "A", "B", lambda: lambda: cuda.allocate_transiently(10),
                      lambda: lambda: cuda.allocate_transiently(30), 8, 1.0, 3)
    result = harness.time_pair(pair, 2, harness.CudaEventTimer(cuda))
    assert result["a"]["peak_call_mb"] == pytest.approx(10) and result["b"]["peak_call_mb"] == pytest.approx(30)
    assert result["a"]["page_faults_per_call"] is None and len(result["a"]["times_s"]) == 3


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_gpu_run_measures_every_uncompiled_pair_end_to_end_when_its_models_run_on_the_cpu(
        bench, harness, workloads, monkeypatch, dtype):
    """``--device cuda`` as far as it goes without a GPU: the GPU plan's pairs at the quick size, built and run with
    their workloads (padded encoder batches, bf16 autocast, training steps, generation), timed by the CUDA-event
    timer on a stand-in for ``torch.cuda``. The compiled pairs are left out (compiling takes minutes here; the CPU
    groups measure them), and the flex-attention pairs, which a CPU plan does not make (flex is tested in
    test_modeling_scratchformer.py)."""

    class OnTheCpu(workloads.Workloads):
        def __init__(self, size, device="cpu", dtype="fp32"):
            super().__init__(size, "cpu", dtype)

    quick = workloads.SIZES["cuda"]["quick"]
    uncompiled = [p.id for p in workloads.make_pairs(workloads.Workloads(quick, "cuda", dtype))
                  if p.group != "compiled" and not p.id.endswith("_flex")]  # flex pairs: GPU only (no CPU backward)
    monkeypatch.setattr(bench, "Workloads", OnTheCpu)
    pairs = bench.run_cuda_pairs(quick, dtype, ",".join(uncompiled), timer=harness.CudaEventTimer(FakeCuda()))
    assert [pair["id"] for pair in pairs] == uncompiled
    assert {pair["group"] for pair in pairs} == {"encoder", "s2s_forward", "train_step", "generate", "cache",
                                                 "attention", "matmul"}
    for pair in pairs:
        assert "skipped" not in pair, pair
        assert pair["a"]["median_s"] > 0 and pair["b"]["median_s"] > 0 and pair["ratio"] > 0
        assert pair["a"]["page_faults_per_call"] is None  # the CUDA timer counts no page faults


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_event_timer_on_a_real_gpu(harness):
    timer = harness.make_timer("cuda")
    a = torch.randn(2048, 2048, device="cuda")
    assert timer.time(lambda: a @ a) > 0
    assert timer.peak_memory_mb(lambda: a @ a) >= 2048 * 2048 * 4 / 2**20 * 0.99  # the result matrix


def test_an_unsupported_optional_pair_is_reported_not_raised(harness, report):
    def unsupported():
        raise harness.Unsupported("no static cache")

    def broken():
        raise RuntimeError("boom")

    ok = lambda: lambda: None  # noqa: E731
    skipped = harness.time_pair(harness.Pair("c", "compiled", "t", "A", "B", unsupported, ok, 1, 1.0, 2), 1)
    assert skipped["skipped"] == "not supported: no static cache" and skipped["met"] is None
    failed = harness.time_pair(harness.Pair("c", "compiled", "t", "A", "B", ok, broken, 1, 1.0, 2, optional=True), 1)
    assert failed["skipped"] == "failed: RuntimeError: boom"
    with pytest.raises(RuntimeError, match="boom"):  # a pair that must work stays loud
        harness.time_pair(harness.Pair("e", "encoder", "t", "A", "B", ok, broken, 1, 1.0, 2), 1)
    assert report.collect_targets([skipped], [], {"met": None}) == []


def test_compiled_pairs_count_what_torch_compile_did(harness):
    ok = lambda: lambda: None  # noqa: E731
    result = harness.time_pair(harness.Pair("c", "compiled", "t", "A", "B", ok, ok, 1, 1.0, 2, optional=True), 2)
    assert result["compile"] == {"a": {"graphs": 0, "graph_breaks": 0}, "b": {"graphs": 0, "graph_breaks": 0},
                                 "graphs_while_timed": 0}
    assert "compile" not in harness.time_pair(harness.Pair("e", "encoder", "t", "A", "B", ok, ok, 1, 1.0, 2), 1)


def test_matmul_runs_in_the_group_precision(workloads):
    assert workloads.Workloads(workloads.SIZES["cpu"]["quick"], dtype="bf16").matmul()().dtype == torch.bfloat16
    assert workloads.Workloads(workloads.SIZES["cpu"]["quick"]).matmul()().dtype == torch.float32


class _StandInGenerator(torch.nn.Module):
    """A model whose ``generate`` with a static cache fails (``fails``) or gives other tokens than without one."""

    def __init__(self, fails: bool):
        super().__init__()
        self.fails = fails

    def generate(self, input_ids, attention_mask, generation_config):
        if generation_config.cache_implementation == "static":
            if self.fails:
                raise ValueError("this model has no static cache")
            return torch.full((input_ids.shape[0], 4), 7)
        return torch.full((input_ids.shape[0], 4), 5)


def test_the_static_cache_feature_check_tells_each_outcome_apart(harness, workloads):
    """Ours and BART pass; a model that fails is reported (and its compiled pair skipped before anything is
    compiled); one whose tokens differ runs with a note."""
    w = workloads.Workloads(workloads.SIZES["cpu"]["quick"])
    ids = workloads.token_ids(1, 4, w.size.vocab, seed=5)
    assert workloads.static_cache_problem(w.model("bart_s2s"), ids, torch.ones_like(ids)) == (None, "")
    # ours runs with a static cache (its tokens may differ by a near-tie of random weights: a note, not asserted)
    assert workloads.static_cache_problem(w.model("ours_s2s"), ids, torch.ones_like(ids))[0] is None
    problem, note = workloads.static_cache_problem(_StandInGenerator(fails=True), ids, torch.ones_like(ids))
    assert problem == ("generate(cache_implementation='static') fails: ValueError: this model has no static cache")
    assert note == ""
    w.models["ours_s2s"] = _StandInGenerator(fails=True)
    with pytest.raises(harness.Unsupported, match="no static cache"):
        w.compiled_generate("ours_s2s", 1, 4)
    problem, note = workloads.static_cache_problem(_StandInGenerator(fails=False), ids, torch.ones_like(ids))
    assert problem is None and note.startswith("_StandInGenerator: generate(cache_implementation='static') gave "
                                               "other tokens than the default dynamic cache ([7, 7, 7, 7] vs [5, 5")
    cpu, gpu = workloads.compile_config("cpu"), workloads.compile_config("cuda")
    assert cpu._compile_all_devices and cpu.mode == "default" and gpu.mode == "reduce-overhead"


# --------------------------------------------------------------------------------------------------------------------
# Results files and the report
# --------------------------------------------------------------------------------------------------------------------


def test_cpu_and_gpu_results_have_their_own_files(report):
    assert report.result_files("cpu") == ("results.json", "RESULTS.md")
    assert report.result_files("cuda") == ("results_cuda.json", "RESULTS_cuda.md")


def test_a_run_replaces_its_groups_and_keeps_the_others(report, quick_run, tmp_path):
    results, _, _ = quick_run
    quick = results["groups"][0]
    d256 = {**quick, "size_name": "d256"}
    base_old, base_new = {**quick, "size_name": "base", "tag": "old"}, {**quick, "size_name": "base", "tag": "new"}
    merged = report.merge_results({"groups": [base_old, d256]}, {"device": "cpu", "groups": [base_new]})
    assert [(g["size_name"], g.get("tag")) for g in merged["groups"]] == [("d256", None), ("base", "new")]
    report.write_results(tmp_path, {"schema": 2, "device": "cpu", "groups": [d256]})
    cuda = {**quick, "device": "cuda", "size_name": "d256", "dtype": "bf16"}
    report.write_results(tmp_path, {"schema": 2, "device": "cuda", "groups": [cuda]})
    assert json.loads((tmp_path / "results.json").read_text())["groups"][0]["device"] == "cpu"
    assert json.loads((tmp_path / "results_cuda.json").read_text())["groups"][0]["dtype"] == "bf16"
    assert "(GPU)" in (tmp_path / "RESULTS_cuda.md").read_text()
    assert "**GPU: not measured or not supported**" in (tmp_path / "RESULTS.md").read_text()
    # the GPU report has its own findings part, kept by the next run as the CPU report's is
    gpu_report = tmp_path / "RESULTS_cuda.md"
    assert gpu_report.read_text().endswith(report.FINDINGS_TEMPLATE)
    written = report.FINDINGS_TEMPLATE.replace("None written yet.", "- **d256 bf16 generate** (2026-01-01): noted.")
    gpu_report.write_text(gpu_report.read_text().replace(report.FINDINGS_TEMPLATE, written))
    report.write_results(tmp_path, {"schema": 2, "device": "cuda", "groups": [{**cuda, "dtype": "fp32"}]})
    assert gpu_report.read_text().endswith(written) and "## d256, fp32: " in gpu_report.read_text()


def test_the_report_marks_the_gpu_numbers_as_unmeasured_and_keeps_the_issue_table(workloads, report, quick_run):
    results, markdown, _ = quick_run
    section = markdown[markdown.index("## Not measured yet"):]
    assert "**GPU: none of the GPU numbers exist yet.**" in section and "No GPU was available" in section
    assert "`python benchmarks/run.py --device cuda`" in section
    assert "greedy generation, batch 32, 64 new tokens, ours compiled vs BART's default generate()" in section
    assert "d256 fp32; d256 bf16 autocast; base fp32; base bf16 autocast" in section
    issue = markdown[markdown.index("## GPU: the issue's H100"):markdown.index("## Not measured yet")]
    assert "before the changes" in issue and "| paper base, d512, 6+6 | fp32 | 1.08 | 0.90 | 0.87 | 0.72 |" in issue
    # once every planned GPU pair is measured, the list is empty
    measured = {"groups": [{"size_name": item["size_name"], "dtype": item["dtype"], "pairs": [{"id": item["id"]}]}
                           for item in workloads.plan("cuda")]}
    assert report.missing("cuda", measured) == []
    assert "every planned GPU measurement" in "\n".join(report._unmeasured_section("cpu", results, measured))


def test_a_skipped_pair_is_a_table_row_with_the_reason(harness, report, quick_run):
    results, _, _ = quick_run
    group = results["groups"][0]
    skipped = harness.skipped_pair(harness.Pair("c", "compiled", "compiled title", "A", "B", None, None, 1, 1.0, 1),
                                 "not supported: no static cache")
    for device in ("cpu", "cuda"):
        table = report._speed_section({**group, "device": device, "pairs": [*group["pairs"], skipped]})
        header, *rows = [line for line in table if line.startswith("| ")]
        assert all(row.count("|") == header.count("|") for row in rows)
        assert "| compiled title | A | B | not measured: not supported: no static cache |" in rows[-1]


def test_the_committed_results_load_in_the_current_layout(report):
    committed = report.load_results(ROOT / "benchmarks" / "results.json")
    assert committed["schema"] == 2 and committed["device"] == "cpu"
    assert {g["size_name"] for g in committed["groups"]} >= {"d256"}
    for group in committed["groups"]:
        assert group["run"]["machine"]["cpu"] and group["pairs"] and group["run"]["command"]
        assert report.render_markdown(committed).startswith("# Scratchformer vs Hugging Face models")


# --------------------------------------------------------------------------------------------------------------------
# Findings: written by hand in RESULTS.md, kept by the renderer, which names every missed target they leave unexplained
# --------------------------------------------------------------------------------------------------------------------


BENCH_MODULES = ("run.py", "harness.py", "workloads.py", "report.py")


def test_the_findings_live_in_results_md_and_explain_every_missed_target(bench, report, tmp_path, capsys):
    for name in BENCH_MODULES:  # no dated findings or measurements left in the code
        source = (ROOT / "benchmarks" / name).read_text()
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", source), name
        for constant in ("EXPLANATIONS", "GROUP_EXPLANATIONS", "PROFILING_NOTES"):
            assert f"{constant} =" not in source and f"{constant}:" not in source, (name, constant)
    markdown = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert markdown.count(report.FINDINGS_START) == 1 and markdown.endswith(report.FINDINGS_END + "\n")
    findings = report.read_findings(ROOT / "benchmarks" / "RESULTS.md")
    assert "### Why targets are missed" in findings and "### Profiling notes" in findings
    assert "- **d256 fp32 generate** (2026-11-25): per generated token both run the same kernels" in findings
    committed = report.load_results(ROOT / "benchmarks" / "results.json")
    assert report.missed_targets(committed, set())  # the check below is not vacuous
    assert report.unexplained(committed, findings) == []
    assert report.explained_keys(findings)[1] == []  # every explanation is dated
    # The committed reports are what the renderer makes of the committed JSON (the CPU report lists what the GPU
    # results lack), their findings kept as written; the GPU's misses are explained too.
    names = ("results.json", "RESULTS.md", "results_cuda.json", "RESULTS_cuda.md")
    for name in names:
        (tmp_path / name).write_bytes((ROOT / "benchmarks" / name).read_bytes())
    cuda_findings = report.read_findings(ROOT / "benchmarks" / "RESULTS_cuda.md")
    cuda = report.load_results(ROOT / "benchmarks" / "results_cuda.json")
    assert report.missed_targets(cuda, set()) and report.unexplained(cuda, cuda_findings) == []
    bench.main(["--render-only", "--out-dir", str(tmp_path)])
    for name in ("RESULTS.md", "RESULTS_cuda.md"):
        assert (tmp_path / name).read_text() == (ROOT / "benchmarks" / name).read_text(), name
    assert "warning" not in capsys.readouterr().err


def _with_a_pair_below_one(report, quick_run) -> tuple[dict, str]:
    """A copy of the quick results where every target is met but one speed pair's, at ratio 0.9; and its id."""
    results, _, _ = quick_run
    group = json.loads(json.dumps(results["groups"][0]))
    for item in (*group["pairs"], *group["memory"], group["matmul"]):
        if item.get("met") is not None:
            item["met"] = True
    pair = next(p for p in group["pairs"] if p["id"] == "train_step_vs_bart")
    pair.update(ratio=0.9, met=False)
    group["targets"] = report.collect_targets(group["pairs"], group["memory"], group["matmul"])
    return {**results, "groups": [group]}, pair["id"]


def test_a_ratio_below_one_without_a_written_explanation_is_reported(report, quick_run, tmp_path, capsys):
    results, pair_id = _with_a_pair_below_one(report, quick_run)
    assert report.unexplained(results, report.FINDINGS_TEMPLATE) == [f"quick fp32 {pair_id}"]
    markdown = report.render_markdown(results)
    assert f"**not explained yet**: add `- **quick fp32 {pair_id}** (YYYY-MM-DD): why` to the findings" in markdown
    assert markdown.endswith(report.FINDINGS_TEMPLATE)
    # render_files says so on stderr, and keeps the findings part it found, as it was
    (tmp_path / "results.json").write_text(json.dumps(results))
    undated = f"- **quick fp32 {pair_id}**: no date, so no explanation"
    written = report.FINDINGS_TEMPLATE.replace("None written yet.", undated, 1)
    (tmp_path / "RESULTS.md").write_text("# an older report\n\n" + written)
    report.render_files(tmp_path)
    err = capsys.readouterr().err
    assert f"1 missed target(s) without an explanation in the findings: `quick fp32 {pair_id}`" in err
    assert "a finding needs a date and a text" in err and undated in err
    assert (tmp_path / "RESULTS.md").read_text().endswith("\n\n" + written)
    # a dated explanation under the pair id, or under its target group, is one
    for key in (pair_id, "train_step", "encoder, train_step"):
        explained = written.replace(undated, f"- **quick fp32 {key}** (2026-01-01): the same operations as BART.")
        assert report.unexplained(results, explained) == []
        markdown = report.render_markdown(results, findings=explained)
        assert "not explained yet" not in markdown and f"under quick fp32 `{key.split(', ')[-1]}`" in markdown
    wrong_size = written.replace(undated, f"- **d256 fp32 {pair_id}** (2026-01-01): another group's.")
    assert report.unexplained(results, wrong_size) == [f"quick fp32 {pair_id}"]


def test_the_findings_markers_are_required_in_pairs(report, quick_run, tmp_path):
    _, markdown, _ = quick_run  # a fresh report starts from the empty findings part
    assert markdown.endswith(report.FINDINGS_TEMPLATE) and "None written yet." in markdown
    path = tmp_path / "RESULTS.md"
    assert report.read_findings(path) == report.FINDINGS_TEMPLATE  # no report yet
    path.write_text("no markers")
    assert report.read_findings(path) == report.FINDINGS_TEMPLATE
    for broken in (report.FINDINGS_START + "\nkept?\n", "text\n" + report.FINDINGS_END + "\n" + report.FINDINGS_START,
                   report.FINDINGS_TEMPLATE * 2):
        path.write_text(broken)
        with pytest.raises(ValueError, match="fix the markers by hand"):
            report.read_findings(path)


def test_senses_memory_benchmark_quick_mode_samples_the_big_lemma(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "senses_memory.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "senses_memory.py"), "--quick", "--json", str(out),
                           "--md", str(tmp_path / "senses_memory.md")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["rows"]
    assert row["rows"] == 600 and row["subsampled_groups"] == 1
    assert row["pairs"] == json.loads(out.read_text())["max_pairs_per_group"]


def test_profile_generate_times_both_models_and_prints_their_operator_tables():
    """benchmarks/profile_generate.py (the profile behind RESULTS.md's generation notes) on the tiny quick size."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile_generate.py"), "--size", "quick",
                           "--batch", "2", "--new-tokens", "3", "--rounds", "1", "--rows", "5"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "quick, batch 2, 3 new tokens, 1 thread: ours" in done.stdout and "ratio BART/ours" in done.stdout
    for key in ("ours_s2s", "bart_s2s"):  # one operator table per model, with its totals
        assert f"{key}: operator self time" in done.stdout
    assert done.stdout.count("aten::") >= 2


def test_profile_pairs_profiles_the_losing_pairs_of_a_results_file(quick_run, tmp_path):
    """benchmarks/profile_pairs.py on the quick run's results: one profile per pair below --below, both sides."""
    results, _, out = quick_run
    below = {p["id"] for group in results["groups"] for p in group["pairs"] if not p.get("skipped")
             and p["ratio"] < 1.0 and p["group"] in ("encoder", "matmul")}
    assert below  # the quick models' encoder pairs and the matmul pair lose (tiny calls; matmul is a yardstick)
    report = tmp_path / "profiles.md"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile_pairs.py"), "--results",
                           str(out / "results.json"), "--ids", ",".join(sorted(below)), "--calls", "2", "--out",
                           str(report)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    profiles = json.loads(report.with_suffix(".json").read_text())
    assert {p["id"] for p in profiles} == below
    for p in profiles:
        for side in (p["a"], p["b"]):
            assert side["wall_ms"] > 0 and side["busy_ms"] > 0 and side["kernels_per_call"] == 0  # on a CPU
            assert side["top"] and side["top"][0]["ms_per_call"] >= side["top"][-1]["ms_per_call"]
        assert f"`{p['id']}` (ratio {p['ratio']:.3f})" in report.read_text()


def test_profile_pairs_counts_a_gpu_kernel_once_and_not_the_profilers_own_events():
    """On a GPU, busy time is the device's events alone: an operator's device time is its kernels', so summing the
    operator and its kernels would count it twice (the first GPU profile did)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    spec = importlib.util.spec_from_file_location("profile_pairs", ROOT / "benchmarks" / "profile_pairs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def event(name, device_type, us, self_cpu=0.0):
        return SimpleNamespace(name=name, device_type=device_type, self_cpu_time_total=self_cpu,
                               time_range=SimpleNamespace(elapsed_us=lambda: us))

    events = [event("aten::mm", DeviceType.CPU, 0.0, self_cpu=20.0), event("gemm_kernel", DeviceType.CUDA, 100.0),
              event("gemm_kernel", DeviceType.CUDA, 50.0), event("Activity Buffer Request", DeviceType.CUDA, 400.0),
              event("copy_kernel", DeviceType.CUDA, 10.0)]
    busy, top = module.work_by_name(events, gpu=True)
    assert busy == 160.0 and top == [("gemm_kernel", 150.0, 2), ("copy_kernel", 10.0, 1)]
    busy, top = module.work_by_name(events, gpu=False)
    assert busy == 20.0 and top == [("aten::mm", 20.0, 1)]


def test_geometry_speed_quick_mode_times_the_command_and_reports_its_load(tmp_path):
    """benchmarks/geometry_speed.py --quick: one `python -m scratchformer geometry` run on 200 dev-set sentences."""
    if not (ROOT.parent / "shared" / "data" / "wordnet_senses_dev.tsv").is_file():
        pytest.skip("the development data (../shared/data/wordnet_senses_dev.tsv) is not here")
    out = tmp_path / "geometry_speed.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "geometry_speed.py"), "--quick", "--json",
                           str(out), "--md", str(tmp_path / "geometry_speed.md")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ((case,),) = [json.loads(out.read_text())["cases"]]
    (run,) = case["runs"]
    assert case["sentences"] == 200 and case["models"] == ["scratchformer-small"]
    assert run["wall_s"] > 0 and 0 < run["cpu_s"] and run["peak_rss_mb"] > 100 and run["load_before"] >= 0
    assert case["wall_s_per_1000_sentences"] == pytest.approx(1000 * run["wall_s"] / 200, abs=0.01)
    assert "| dev set, first 200 sentences | scratchformer-small | 200 |" in (tmp_path / "geometry_speed.md").read_text()


def test_geometry_speed_corpus_sentences_are_seeded_and_of_5_to_60_words(tmp_path):
    import gzip

    spec = importlib.util.spec_from_file_location("geometry_speed", ROOT / "benchmarks" / "geometry_speed.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    corpus = tmp_path / "corpus.txt.gz"
    paragraphs = [f"Paragraph {i} has a first sentence of some words. Short one! And then a question for {i}?"
                  for i in range(50)]
    corpus.write_bytes(gzip.compress("\n".join(paragraphs).encode()))
    sentences = module.corpus_sentences(30, corpus)
    assert len(sentences) == 30 and sentences == module.corpus_sentences(30, corpus)
    assert all(5 <= len(s.split()) <= 60 for s in sentences) and "Short one!" not in sentences
    numbers = [int(re.search(r"\d+", s).group()) for s in sentences]
    assert numbers != sorted(numbers)  # the paragraphs in a seeded order, not the file's


def test_generate_vs_commit_times_this_tree_against_a_commit_in_turns(tmp_path):
    """benchmarks/generate_vs_commit.py with the tiny overhead size, 2 rounds of 2 and 4 tokens, against HEAD (any
    checkout has it): both sides timed every round, per-step costs and their ratio written."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    out = tmp_path / "gvc.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate_vs_commit.py"), "--commit", "HEAD",
                    "--rounds", "2", "--new-tokens", "2", "--out", str(out)], check=True, capture_output=True,
                   timeout=300)
    result = json.loads(out.read_text())
    (earlier,) = set(result["per_step_ms"]) - {"this tree"}
    assert result["rounds"] == 2 and len(earlier) >= 7
    for name in ("this tree", earlier):
        assert [len(result["generate_ms_all"][name][n]) for n in ("2", "4")] == [2, 2]
        assert all(t > 0 for n in ("2", "4") for t in result["generate_ms_all"][name][n])
    assert math.isfinite(result["ratio_earlier_over_this"])  # 2 and 4 tokens: too few for a meaningful value
