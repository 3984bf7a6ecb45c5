"""How the benchmark measures: timers, A/B pairs and their timing rounds, forked children, peak-memory probes and
the description of the machine. Nothing here knows which models are compared (``workloads.py``) or how the
results are reported (``report.py``).

Method. Every comparison is a *pair* (A = ours, B = theirs or an alternative) with identical dimensions, sdpa
attention unless stated. After ``warmup`` calls of each, the two are timed alternately A, B, A, B, ... so that both
see the same background load; we report the median time of each, the spread (min, max, interquartile range) and
``ratio = median(B) / median(A)`` = A tokens/s over B tokens/s (> 1: A is faster). The per-round ratio B_i / A_i
(neighbouring calls) is reported too: it is the more robust one when other processes share the machine.

Timers share one interface (``CpuTimer``, ``CudaEventTimer``: ``time(fn) -> seconds``, ``peak_memory_mb(fn)``):

- CPU: wall clock (``time.perf_counter``). Each pair runs in its own process forked from this one before anything
  is computed (the heap left by earlier pairs changed ratios by up to 3%), and peak memory is the kernel's peak
  resident set of one forked child per (workload, model): ``VmHWM``, reset with ``/proc/self/clear_refs``.
- CUDA: ``torch.cuda.Event(enable_timing=True)`` recorded around each call, with ``torch.cuda.synchronize()``
  before the start event (the GPU is idle, so the host overhead of launching a call is inside the interval, as
  it is for a user) and after the end event, nowhere else. Pairs run in this process one after the other, not in
  children: a process cannot fork after CUDA is initialised, a spawned child would pay a fresh interpreter and CUDA
  context per pair (seconds, tens of times), and what the forks are for on CPU is absent on a GPU (the caching
  allocator keeps freed blocks, so no page faults and no heap-layout luck; RSS cannot be reset per model, but
  ``torch.cuda.reset_peak_memory_stats`` can). Between pairs every model is dropped, the allocator's cache emptied
  and torch.compile's caches reset (``torch._dynamo.reset()``), so that one pair's compiled graphs and blocks
  cannot leak into the next. Peak memory per pair and side: ``torch.cuda.max_memory_allocated`` during one extra,
  untimed call after the warm-up, minus what was allocated before it.

Precision: ``fp32`` runs the models in float32 (on CUDA with torch's default, i.e. no TF32 for matmuls);
``bf16`` keeps float32 weights and runs each call under ``torch.autocast(device, dtype=torch.bfloat16)`` (the
backward of the training step outside autocast, as recommended; no gradient scaler is needed for bf16).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


class Unsupported(Exception):
    """A workload the model cannot run yet (e.g. compiled static-cache generation): reported, not fatal."""


# --------------------------------------------------------------------------------------------------------------------
# Timers
# --------------------------------------------------------------------------------------------------------------------


class CpuTimer:
    """Wall-clock time of one call. Peak memory is not measured here on CPU (see ``peak_rss``)."""

    name = "wall clock (time.perf_counter)"
    counts_page_faults = True

    def time(self, fn: Callable[[], object]) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    def peak_memory_mb(self, fn: Callable[[], object]) -> float | None:
        return None  # without calling fn: the CPU timings stay what they were


class CudaEventTimer:
    """GPU time of one call between two CUDA events. ``cuda`` is the ``torch.cuda`` module (a stand-in in tests):
    the GPU is synchronised before the start event (so the interval starts when the call starts, host overhead
    included) and after the end event, nowhere in between."""

    name = "CUDA events (torch.cuda.Event(enable_timing=True))"
    counts_page_faults = False

    def __init__(self, cuda=None):
        self.cuda = torch.cuda if cuda is None else cuda

    def time(self, fn: Callable[[], object]) -> float:
        start, end = self.cuda.Event(enable_timing=True), self.cuda.Event(enable_timing=True)
        self.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000  # ms -> s

    def peak_memory_mb(self, fn: Callable[[], object]) -> float:
        """Peak of ``memory_allocated`` during one call, above what was allocated before it."""
        self.cuda.synchronize()
        self.cuda.reset_peak_memory_stats()
        before = self.cuda.memory_allocated()
        fn()
        self.cuda.synchronize()
        return (self.cuda.max_memory_allocated() - before) / 2**20


def make_timer(device: str) -> CpuTimer | CudaEventTimer:
    return CudaEventTimer() if device == "cuda" else CpuTimer()


# --------------------------------------------------------------------------------------------------------------------
# Pairs and their timing rounds
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class Pair:
    id: str
    group: str  # encoder | s2s_forward | train_step | generate | cache | compiled | attention | matmul
    title: str
    a: str  # label of A (ours)
    b: str  # label of B (theirs, or the alternative)
    make_a: Callable[[], Callable[[], object]] = field(repr=False)  # builds the model, returns the call to time
    make_b: Callable[[], Callable[[], object]] = field(repr=False)
    tokens: int  # tokens per call, for tokens/s
    target: float | None  # the minimum of median(B) / median(A), None when informative only
    repeats: int
    ratio_name: str = "ours/theirs tokens/s"
    optional: bool = False  # a failure to build or warm up is reported as "not measured", not raised


def summarise(times: list[float], tokens: int) -> dict:
    ordered = sorted(times)
    median = statistics.median(ordered)
    q1, q3 = (statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (median, median))[0::2]
    return {"median_s": median, "min_s": ordered[0], "max_s": ordered[-1], "iqr_s": q3 - q1,
            "spread_pct": 100 * (q3 - q1) / median, "tokens_per_s": tokens / median if tokens else None,
            "times_s": times}


def skipped_pair(pair: Pair, reason: str) -> dict:
    return {"id": pair.id, "group": pair.group, "title": pair.title, "tokens_per_call": pair.tokens,
            "a": {"label": pair.a}, "b": {"label": pair.b}, "ratio_name": pair.ratio_name, "skipped": reason,
            "target": pair.target, "met": None}


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def compile_counts() -> dict[str, int]:
    """torch.compile's running totals in this process: graphs compiled and graph breaks met."""
    counters = torch._dynamo.utils.counters
    return {"graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(counters["graph_break"].values())}


def _counted(pair: Pair, run: Callable[[], object]) -> dict[str, int] | None:
    """Run once; for a compiled pair, what it compiled (the first call is where generate() compiles)."""
    if pair.group != "compiled":
        run()
        return None
    before = compile_counts()
    run()
    return {key: value - before[key] for key, value in compile_counts().items()}


def _prepare(pair: Pair, warmup: int, timer) -> tuple:
    """Build both sides, warm them up (at least once: compilation and lazy state happen there), count what the
    first calls compiled and measure each side's peak memory per call where the timer can."""
    run_a, run_b = pair.make_a(), pair.make_b()
    compiled = {"a": _counted(pair, run_a), "b": _counted(pair, run_b)}
    for _ in range(warmup - 1):
        run_a()
        run_b()
    return run_a, run_b, timer.peak_memory_mb(run_a), timer.peak_memory_mb(run_b), compiled


def _timed_rounds(pair: Pair, runs: tuple, timer) -> tuple[tuple[list, list], tuple[list, list]]:
    times, faults = ([], []), ([], [])
    for _ in range(pair.repeats):
        for side, run in enumerate(runs):
            faults_before = _minor_faults()
            times[side].append(timer.time(run))
            faults[side].append(_minor_faults() - faults_before)
    return times, faults


def time_pair(pair: Pair, warmup: int, timer=None) -> dict:
    timer = timer or CpuTimer()
    try:
        run_a, run_b, peak_a, peak_b, compiled = _prepare(pair, warmup, timer)
    except Unsupported as reason:
        return skipped_pair(pair, f"not supported: {reason}")
    except Exception as error:
        if not pair.optional:
            raise
        return skipped_pair(pair, f"failed: {type(error).__name__}: {str(error)[:300]}")
    before = compile_counts() if pair.group == "compiled" else None
    times, faults = _timed_rounds(pair, (run_a, run_b), timer)
    a, b = summarise(times[0], pair.tokens), summarise(times[1], pair.tokens)
    for side, side_faults, peak in ((a, faults[0], peak_a), (b, faults[1], peak_b)):
        side["page_faults_per_call"] = statistics.median(side_faults) if timer.counts_page_faults else None
        if peak is not None:
            side["peak_call_mb"] = peak
    rounds = [tb / ta for ta, tb in zip(*times)]
    ratio = b["median_s"] / a["median_s"]
    result = {
        "id": pair.id, "group": pair.group, "title": pair.title, "tokens_per_call": pair.tokens,
        "a": {"label": pair.a, **a}, "b": {"label": pair.b, **b},
        "ratio_name": pair.ratio_name, "ratio": ratio, "round_ratio_median": statistics.median(rounds),
        "round_ratio_min": min(rounds), "round_ratio_max": max(rounds),
        "target": pair.target, "met": None if pair.target is None else ratio >= pair.target,
    }
    if before is not None:  # a graph compiled while timed would put compile time into the medians
        result["compile"] = {**compiled, "graphs_while_timed": compile_counts()["graphs"] - before["graphs"]}
    return result


# --------------------------------------------------------------------------------------------------------------------
# CPU: forked children, the allocator, peak resident set
# --------------------------------------------------------------------------------------------------------------------


def _proc_kb(path: str, name: str) -> int:
    """A ``Name:  1234 kB`` field of /proc/self/status or /proc/meminfo."""
    for line in Path(path).read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise KeyError(name)


def _pin_malloc_to_live_memory() -> None:
    """glibc only: map every allocation of 128 KiB or more on its own and unmap it on free (fixed threshold, no
    dynamic raise), and give the free heap back to the OS now, so that the resident set follows the live tensors
    instead of what the allocator happens to keep cached (which otherwise varies by +-15% between identical runs)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def can_measure_rss() -> bool:
    """Linux with a resettable peak resident set (``/proc/self/clear_refs``)."""
    return Path("/proc/self/clear_refs").exists()


def peak_rss(make_run: Callable[[], Callable[[], object]]) -> dict:
    """In a forked child (``in_child``): ``make_run()`` builds what is measured (its transients are not counted),
    then the call it returns runs twice; the peak resident set while running, against the child's resident set
    before ``make_run``, and what the resident set gained by the end, split into data and library code paged in
    on first use."""
    _pin_malloc_to_live_memory()
    status = "/proc/self/status"
    start = {name: _proc_kb(status, name) for name in ("VmRSS", "RssAnon", "RssFile")}
    run = make_run()
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak (VmHWM) to the current resident set
    run()
    run()
    peak_kb = _proc_kb(status, "VmHWM")
    return {"peak_rss_mb": peak_kb / 1024, "start_rss_mb": start["VmRSS"] / 1024,
            "increment_mb": (peak_kb - start["VmRSS"]) / 1024,
            "anon_gain_mb": (_proc_kb(status, "RssAnon") - start["RssAnon"]) / 1024,
            "file_gain_mb": (_proc_kb(status, "RssFile") - start["RssFile"]) / 1024}


def keep_freed_memory() -> bool:
    """glibc only: never give freed memory back to the OS (no trimming, no per-allocation mmap), as a caching
    allocator does. Without it, which calls pay for page faults depends on the order in which the two models of a
    pair allocated and freed their tensors (+-10% per call here, see RESULTS.md). Returns whether it was applied."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(-1, 2**31 - 1) and libc.mallopt(-4, 0))  # M_TRIM_THRESHOLD, M_MMAP_MAX
    except (OSError, AttributeError):
        return False


def _child_main(conn, threads: int, function: Callable[..., dict], args: tuple) -> None:
    try:
        torch.set_num_threads(threads)
        conn.send(function(*args))
    except BaseException as error:  # report it, do not leave the parent waiting
        conn.send({"error": f"{type(error).__name__}: {error}"})
    finally:
        conn.close()


def in_child(threads: int, function: Callable[..., dict], *args, timeout: float = 1200) -> dict:
    """``function(*args)`` in a forked child process, which starts from the parent's state (libraries imported,
    no model built, nothing computed: a child forked after its parent used OpenMP threads can hang)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(send, threads, function, args))
    child.start()
    send.close()
    result = receive.recv() if receive.poll(timeout) else {"error": f"no answer within {timeout:.0f} s"}
    child.join(30)
    if "error" in result:
        raise RuntimeError(f"{function.__name__}{args[1:]} failed in the child process: {result['error']}")
    return result


# --------------------------------------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------------------------------------


def cpu_info() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        ram_gb = _proc_kb("/proc/meminfo", "MemTotal") / 2**20
    except OSError:
        ram_gb = None
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "ram_gb": ram_gb, "platform": platform.platform()}


def _nvidia_smi(query: str) -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader", "-i",
                              str(torch.cuda.current_device())], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def gpu_info() -> dict:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"name": props.name, "memory_gb": props.total_memory / 2**30, "capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count, "driver": _nvidia_smi("driver_version"),
            "cuda_runtime": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "fp32_matmul_precision": torch.get_float32_matmul_precision()}  # "highest": no TF32


def machine(device: str = "cpu") -> dict:
    info = cpu_info()
    if device == "cuda":
        info["gpu"] = gpu_info()
    return info


def describe_machine(m: dict) -> str:
    ram = f", {m['ram_gb']:.0f} GB RAM" if m.get("ram_gb") else ""
    text = f"CPU: {m['cpu']}, {m['logical_cpus']} logical CPUs{ram}; {m['platform']}"
    gpu = m.get("gpu")
    if gpu:
        text = (f"GPU: {gpu['name']} ({gpu['memory_gb']:.0f} GiB, compute capability {gpu['capability']}), driver "
                f"{gpu['driver'] or 'unknown'}, CUDA runtime {gpu['cuda_runtime']}, cuDNN {gpu['cudnn']}, fp32 matmul "
                f"precision '{gpu['fp32_matmul_precision']}'. Host: " + text)
    return text


def git_state() -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=30).stdout.strip()
    try:
        return {"commit": git("rev-parse", "--short", "HEAD"),
                "model_file_modified": bool(git("status", "--porcelain", "--", "../scratchformer/models/"))}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "model_file_modified": None}
