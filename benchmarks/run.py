"""Scratchformer against Hugging Face's own models, side by side in one run (issues 7 and "Performance on the
hardware users train on").

    .venv/bin/python benchmarks/run.py                  # CPU, sizes d256, base, overhead: tens of minutes on 2 cores
    .venv/bin/python benchmarks/run.py --sizes base     # one size group; the others in results.json are kept
    .venv/bin/python benchmarks/run.py --sizes overhead # a tiny model: per-call costs, as small models on a GPU
    .venv/bin/python benchmarks/run.py --quick          # tiny sizes, seconds (what tests/test_benchmarks.py runs)
    .venv/bin/python benchmarks/run.py --device cuda    # one GPU: fp32 and bf16 autocast, sizes d256 and base

Writes ``results.json`` and ``RESULTS.md`` (CPU) or ``results_cuda.json`` and ``RESULTS_cuda.md`` (GPU) to
``--out-dir`` (default: this folder; a temporary folder for ``--quick`` and ``--only``, so that a partial run never
overwrites the committed results). A run replaces the (size, dtype) groups it measured and keeps the others, each
group naming the command, date and commit of its own run. ``--render-only`` rewrites the Markdown from the JSON.
The findings written by hand at the end of each Markdown report are kept as they are.

This file is the command line and the run of one group on each device. The rest is in this folder:
``harness.py`` (how a pair is timed and memory measured: the method), ``workloads.py`` (the sizes, models, workloads,
pairs and targets) and ``report.py`` (results files, targets met or missed, the Markdown and its findings).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # every model is built from a config with random weights
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the sibling modules, when run as a script and when loaded by file (the tests)
    sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import transformers  # noqa: E402
from harness import (  # noqa: E402
    CpuTimer,
    CudaEventTimer,
    can_measure_rss,
    git_state,
    in_child,
    keep_freed_memory,
    machine,
    make_timer,
    peak_rss,
    skipped_pair,
    time_pair,
)
from report import (  # noqa: E402
    SCHEMA,
    collect_targets,
    fmt_time,
    matmul_summary,
    render_files,
    result_files,
    write_results,
)
from workloads import (  # noqa: E402
    DEVICES,
    DTYPE_TITLES,
    DTYPES,
    MEMORY_TARGET,
    SIZES,
    Size,
    Workloads,
    default_dtypes,
    default_sizes,
    make_pairs,
    memory_probes,
    plan,
    select_pairs,
)

import scratchformer  # noqa: E402


def parse_choices(text: str | None, allowed: tuple[str, ...], default: tuple[str, ...], what: str) -> tuple[str, ...]:
    """``"a,b"`` -> ``("a", "b")`` (order kept, duplicates dropped); None -> ``default``; ValueError otherwise."""
    if text is None:
        return default
    items = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [item for item in items if item not in allowed]
    if unknown or not items:
        raise ValueError(f"{what}: {'unknown ' + ', '.join(unknown) if unknown else 'nothing given'} "
                         f"(choose from {', '.join(allowed)}, comma-separated)")
    return items


def parse_dtypes(text: str | None, device: str) -> tuple[str, ...]:
    return parse_choices(text, tuple(DTYPES), default_dtypes(device), "--dtype")


def parse_sizes(text: str | None, device: str) -> tuple[str, ...]:
    return parse_choices(text, default_sizes(device), default_sizes(device), "--sizes")


# --------------------------------------------------------------------------------------------------------------------
# CPU: peak memory, one forked child per (workload, model); every pair in its own forked child
# --------------------------------------------------------------------------------------------------------------------


def _memory_child(size: Size, workload: str, key: str, dtype: str = "fp32") -> dict:
    return {"workload": workload, "model": key,
            **peak_rss(lambda: Workloads(size, "cpu", dtype).get(workload, key))}


def measure_memory(size: Size, threads: int, dtype: str = "fp32") -> tuple[list[dict], list[dict]]:
    """One child process per (workload, model)."""
    if not can_measure_rss():
        return [], []
    measured: dict[tuple[str, str], dict] = {}
    for workload, *keys in memory_probes(size):
        for key in keys:
            if (workload, key) not in measured:
                measured[workload, key] = in_child(threads, _memory_child, size, workload, key, dtype)
    comparisons = []
    for workload, ours, theirs in memory_probes(size):
        a, b = measured[workload, ours], measured[workload, theirs]
        ratio = a["increment_mb"] / b["increment_mb"]
        is_target = not theirs.startswith("ours")
        comparisons.append({"workload": workload, "ours": ours, "theirs": theirs, "ours_increment_mb": a["increment_mb"],
                            "theirs_increment_mb": b["increment_mb"], "ours_peak_mb": a["peak_rss_mb"],
                            "theirs_peak_mb": b["peak_rss_mb"], "ratio": ratio,
                            "ours_code_mb": a["file_gain_mb"], "theirs_code_mb": b["file_gain_mb"],
                            "target": MEMORY_TARGET if is_target else None,
                            "met": (ratio <= MEMORY_TARGET) if is_target else None})
    return list(measured.values()), comparisons


def _pair_child(size: Size, pair_id: str, allocator: str, dtype: str = "fp32") -> dict:
    kept = allocator == "cached" and keep_freed_memory()
    w = Workloads(size, "cpu", dtype)
    pair = next(p for p in make_pairs(w) if p.id == pair_id)
    return {**_with_notes(time_pair(pair, size.warmup, CpuTimer()), w), "freed_memory_kept": kept}


def _with_notes(result: dict, w: Workloads) -> dict:
    return {**result, "notes": list(w.notes)} if w.notes else result


def _parameter_child(size: Size) -> dict:
    return parameter_counts(size)


def parameter_counts(size: Size) -> dict[str, int]:
    w = Workloads(size)  # on CPU: only counted
    keys = ("ours_encoder", "bart_encoder", "bert", "distilbert", "ours_s2s", "bart_s2s")
    # Tied matrices are counted once (parameters() deduplicates).
    return {key: sum(p.numel() for p in w.model(key).parameters()) for key in keys}


def _print_pair(result: dict) -> None:
    if result.get("skipped"):
        print(f"{result['id']:32s} not measured: {result['skipped']}", flush=True)
        return
    a, b = result["a"], result["b"]
    faults = ("" if a["page_faults_per_call"] is None else
              f"  page faults/call {a['page_faults_per_call']:.0f} / {b['page_faults_per_call']:.0f}")
    memory = f"  peak/call {a['peak_call_mb']:.0f} / {b['peak_call_mb']:.0f} MB" if "peak_call_mb" in a else ""
    print(f"{result['id']:32s} A {fmt_time(a['median_s']):>10s}  B {fmt_time(b['median_s']):>10s}  ratio "
          f"{result['ratio']:.3f} (per-round {result['round_ratio_median']:.3f}){faults}{memory}", flush=True)


def run_cpu_pairs(size: Size, dtype: str, only: str | None, allocator: str, threads: int) -> list[dict]:
    pairs = []
    for pair in select_pairs(make_pairs(Workloads(size, "cpu", dtype)), only):
        # Each pair in a fresh process: what earlier pairs left in the heap changed a ratio by up to 3%.
        pairs.append(in_child(threads, _pair_child, size, pair.id, allocator, dtype))
        _print_pair(pairs[-1])
    return pairs


# --------------------------------------------------------------------------------------------------------------------
# CUDA: every pair in this process, one after the other (see harness.py's docstring for why)
# --------------------------------------------------------------------------------------------------------------------


def run_cuda_pairs(size: Size, dtype: str, only: str | None, timer=None) -> list[dict]:
    timer = timer or CudaEventTimer()
    pairs = []
    for pair_id in [p.id for p in select_pairs(make_pairs(Workloads(size, "cuda", dtype)), only)]:
        w = Workloads(size, "cuda", dtype)  # fresh models for every pair
        pair = next(p for p in make_pairs(w) if p.id == pair_id)
        try:
            result = time_pair(pair, size.warmup, timer)
        except torch.cuda.OutOfMemoryError as error:
            result = skipped_pair(pair, f"out of GPU memory: {str(error)[:200]}")
        finally:
            w.release()
        pairs.append(_with_notes(result, w))
        _print_pair(result)
    return pairs


# --------------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------------


def command_line(args: argparse.Namespace) -> str:
    parts = ["python benchmarks/run.py"]
    parts += ["--device cuda"] if args.device == "cuda" else []
    parts += ["--quick"] if args.quick else []
    for option in ("sizes", "dtype", "threads", "repeats", "only"):
        if getattr(args, option) is not None:
            parts.append(f"--{option} {getattr(args, option)}")
    parts += ["--no-memory"] if args.no_memory else []
    parts += ["--allocator default"] if args.allocator == "default" else []
    return " ".join(parts)


def run_meta(args: argparse.Namespace, threads: int, started: float, load_before: tuple, pairs: list[dict]) -> dict:
    load_after = os.getloadavg()
    busy = args.device == "cpu" and max(load_before[0], load_after[0]) > 0.5 * (os.cpu_count() or 1)
    if args.device == "cuda":
        allocator = "PyTorch's CUDA caching allocator"
    else:
        kept = bool(pairs) and all(p["freed_memory_kept"] for p in pairs)
        allocator = "glibc, freed memory kept" if kept else "default"
    return {
        "command": command_line(args), "mode": "quick" if args.quick else "full",
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": time.perf_counter() - started, "machine": machine(args.device), "threads": threads,
        "allocator": allocator, "timer": make_timer(args.device).name,
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "scratchformer": scratchformer.__version__},
        "git": git_state(), "load_average": {"before": load_before, "after": load_after},
        "shared_note": ("The machine was shared with other jobs during the run (load above half the CPUs): "
                        "absolute times are noisy, ratios of neighbouring A/B calls less so." if busy else
                        "The host was otherwise idle." if args.device == "cpu" else ""),
    }


def run_group(args: argparse.Namespace, size_name: str, dtype: str, threads: int) -> dict:
    """Every pair (and on CPU the memory children) of one (size, dtype) group."""
    size = SIZES[args.device][size_name]
    if args.repeats:
        size = replace(size, repeats=args.repeats)
    print(f"== {args.device}, {size_name}, {DTYPE_TITLES[dtype]}", flush=True)
    started, load_before = time.perf_counter(), os.getloadavg()
    memory_raw, memory = [], []
    if args.device == "cuda":
        pairs = run_cuda_pairs(size, dtype, args.only)
        parameters = parameter_counts(size)
    else:
        # Every measurement runs in a child forked from this process, which computes nothing itself.
        if not (args.no_memory or args.only or size.overhead_bound):  # a tiny model's peak is library code
            memory_raw, memory = measure_memory(size, threads, dtype)
            print(f"memory: {len(memory_raw)} children", flush=True)
        pairs = run_cpu_pairs(size, dtype, args.only, args.allocator, threads)
        parameters = in_child(threads, _parameter_child, size)
    matmul = matmul_summary(size, pairs, args.device, dtype)
    return {"size_name": size_name, "dtype": dtype, "device": args.device,
            "run": run_meta(args, threads, started, load_before, pairs), "size": asdict(size),
            "parameters": parameters, "pairs": pairs, "matmul": matmul, "memory": memory,
            "memory_children": memory_raw, "targets": collect_targets(pairs, memory, matmul)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="cpu (default): forked children, wall clock, RSS; cuda: CUDA events, in-process, "
                             f"torch.cuda.max_memory_allocated; writes {' / '.join(result_files('cuda'))}")
    parser.add_argument("--dtype", default=None,
                        help="comma-separated: fp32 (float32 weights and compute), bf16 (float32 weights, "
                             "bf16 autocast); default fp32 on cpu, fp32,bf16 on cuda")
    parser.add_argument("--sizes", default=None,
                        help="comma-separated size groups: d256 (4+4 layers, 16k vocab), base (the paper's base: "
                             "d512, 6+6 layers, 8 heads, FFN 2048, 37k vocab), overhead (CPU only: d64, 4+4 layers, "
                             "whose calls cost per-call work as small models' do on a GPU; no memory children); "
                             "default all of the device's. Groups not run are kept in the results file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (for the test)")
    parser.add_argument("--out-dir", type=Path, default=None,
                        help="where to write the results (default: this folder; a temporary one with --quick or "
                             "--only)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's, i.e. all cores; 1 with --quick)")
    parser.add_argument("--repeats", type=int, default=None, help="A/B rounds per pair")
    parser.add_argument("--only", default=None,
                        help="run only pairs whose id contains one of these comma-separated texts (no memory); "
                             "with an explicit --out-dir the partial group replaces the stored one")
    parser.add_argument("--no-memory", action="store_true", help="skip the CPU peak-memory children")
    parser.add_argument("--allocator", choices=("cached", "default"), default="cached",
                        help="CPU timings: 'cached' keeps freed memory (no page faults after warm-up, see "
                             "keep_freed_memory); 'default' leaves glibc as it is")
    parser.add_argument("--render-only", action="store_true",
                        help="measure nothing: rewrite the Markdown reports from the JSON files in --out-dir "
                             "(keeping the findings written in them)")
    args = parser.parse_args(argv)
    if args.quick and args.sizes:
        parser.error("--quick runs the tiny size only: leave out --sizes")
    for option in ("threads", "repeats"):
        if getattr(args, option) is not None and getattr(args, option) < 1:  # 0 fell back to the default silently
            parser.error(f"--{option} must be a positive integer, got {getattr(args, option)}")
    ids = sorted({pair["id"] for pair in plan(args.device)})
    for part in (args.only or "").split(",") if args.only is not None else ():
        if not part or not any(part in pair_id for pair_id in ids):  # it measured nothing and wrote empty results
            parser.error(f"--only {part!r} is part of no pair's id ({', '.join(ids)})")
    try:
        args.dtypes = parse_dtypes(args.dtype, args.device)
        args.size_names = ("quick",) if args.quick else parse_sizes(args.sizes, args.device)
    except ValueError as error:
        parser.error(str(error))
    if args.device == "cuda" and not args.render_only and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    partial = args.quick or args.only
    out_dir = args.out_dir or (Path(tempfile.mkdtemp(prefix="scratchformer-bench-")) if partial else HERE)
    if args.render_only:
        return render_files(out_dir)
    if args.threads or args.quick:  # quick: one thread, so that a busy machine cannot stall OpenMP barriers
        torch.set_num_threads(args.threads or 1)
    threads = torch.get_num_threads()
    transformers.logging.set_verbosity_error()
    groups = [run_group(args, name, dtype, threads) for name in args.size_names for dtype in args.dtypes]
    return write_results(out_dir, {"schema": SCHEMA, "device": args.device, "groups": groups})


if __name__ == "__main__":
    main()
