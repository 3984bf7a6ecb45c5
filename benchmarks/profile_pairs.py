"""Profile the pairs of a results file that lost (ratio below 1.0): where each side's time goes, so that every
losing ratio in a report has its explanation.

    python benchmarks/profile_pairs.py --results benchmarks/results_cuda.json   # writes profiles_cuda.{md,json}

For each losing pair it rebuilds both sides with the same models and inputs as run.py (warm-up and compilation
included), then times a few calls and runs ``torch.profiler`` over them: wall time per call, the time the device
spent in operators' own work, operator (and on a GPU kernel) calls per call, and the operators that took the most.
A GPU side whose kernels fill little of its wall time is bound by launches and Python, not by arithmetic.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import _prepare, make_timer  # noqa: E402
from workloads import SIZES, Workloads, make_pairs  # noqa: E402


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def profile_side(run, device: str, calls: int, rows: int) -> dict:
    """Wall time of ``calls`` calls (median), then one profiled pass over as many calls: totals per call and the
    top operators by their own time on the device that does the work."""
    walls = []
    for _ in range(calls):
        _sync(device)
        start = time.perf_counter()
        run()
        _sync(device)
        walls.append(time.perf_counter() - start)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(calls):
            run()
        _sync(device)
    events = prof.events()
    busy_us, top = work_by_name(events, device == "cuda")
    ops = sum(1 for e in events if e.device_type == DeviceType.CPU and e.name.startswith("aten::")
              and e.cpu_parent is None)
    return {"wall_ms": 1e3 * statistics.median(walls), "busy_ms": busy_us / calls / 1e3,
            "kernels_per_call": (sum(n for _, _, n in top) if device == "cuda" else 0) / calls,  # the GPU work counted in busy
            "top_level_aten_ops_per_call": ops / calls,
            "top": [{"op": name[:90], "ms_per_call": us / calls / 1e3, "calls_per_call": n / calls}
                    for name, us, n in top[:rows]]}


def work_by_name(events, gpu: bool) -> tuple[float, list[tuple[str, float, int]]]:
    """Microseconds of work and (name, microseconds, count) by name, most first. On a GPU the work is the device's
    own events (kernels, copies, memsets; not the profiler's buffer requests), each counted once: an operator's
    device time is its kernels' time, so summing both would count it twice. On a CPU it is each operator's self time."""
    by_name: dict[str, list[float]] = {}
    for e in events:
        if gpu and e.device_type == DeviceType.CUDA and not e.name.startswith("Activity Buffer"):
            us = e.time_range.elapsed_us()
        elif not gpu and e.device_type == DeviceType.CPU:
            us = e.self_cpu_time_total
        else:
            continue
        entry = by_name.setdefault(e.name, [0.0, 0])
        entry[0] += us
        entry[1] += 1
    top = sorted(((name, us, n) for name, (us, n) in by_name.items() if us > 0), key=lambda item: -item[1])
    return sum(us for _, us, _ in top), top


def profile_results(results: dict, below: float, calls: int, rows: int, ids: list[str] | None = None,
                    written=None) -> list[dict]:
    """Profile the losing pairs (compiled ones last: they compile again), calling ``written(profiles)`` after each."""
    device = results["device"]
    timer = make_timer(device)
    losers = [(group, p) for group in results["groups"] for p in group["pairs"] if not p.get("skipped") and
              (p["id"] in ids if ids else p["ratio"] < below)]
    profiles = []
    for group, measured in sorted(losers, key=lambda item: item[1]["group"] == "compiled"):
        w = Workloads(SIZES[device][group["size_name"]], device, group["dtype"])
        pair = next(p for p in make_pairs(w) if p.id == measured["id"])
        run_a, run_b, *_ = _prepare(pair, max(2, group["size"]["warmup"]), timer)
        sides = {"a": profile_side(run_a, device, calls, rows), "b": profile_side(run_b, device, calls, rows)}
        for key, label in (("a", pair.a), ("b", pair.b)):
            sides[key]["label"] = label
        profiles.append({"size_name": group["size_name"], "dtype": group["dtype"], "id": pair.id,
                         "title": pair.title, "ratio": measured["ratio"], **sides})
        print(f"{group['size_name']}/{group['dtype']} {pair.id}: wall {sides['a']['wall_ms']:.2f} / "
              f"{sides['b']['wall_ms']:.2f} ms, busy {sides['a']['busy_ms']:.2f} / {sides['b']['busy_ms']:.2f} ms",
              flush=True)
        w.release()
        if written:
            written(profiles)
    return profiles


def render(profiles: list[dict], device: str) -> str:
    work = "the GPU's own work (kernels, copies, memsets)" if device == "cuda" else "operators' self CPU time"
    lines = [f"# Profiles of the pairs below 1.0 ({device})", "",
             f"Generated by `python benchmarks/profile_pairs.py`. Per call: wall time (median, unprofiled), {work} "
             "summed (busy), the GPU's events and the top-level aten calls; the top of the busy time by name.", ""]
    for p in profiles:
        lines += [f"## {p['size_name']}, {p['dtype']}: `{p['id']}` (ratio {p['ratio']:.3f})", "", p["title"], "",
                  "| side | wall ms | busy ms | busy % | GPU events | aten calls |", "|---|---|---|---|---|---|"]
        for key in ("a", "b"):
            s = p[key]
            lines.append(f"| {s['label']} | {s['wall_ms']:.3f} | {s['busy_ms']:.3f} | "
                         f"{100 * s['busy_ms'] / s['wall_ms']:.0f} | {s['kernels_per_call']:.0f} | "
                         f"{s['top_level_aten_ops_per_call']:.0f} |")
        for key in ("a", "b"):
            lines += ["", f"Most busy time, {p[key]['label']}:", "", "| name | ms/call | calls/call |",
                      "|---|---|---|"]
            lines += [f"| `{t['op']}` | {t['ms_per_call']:.3f} | {t['calls_per_call']:.0f} |" for t in p[key]["top"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, required=True, help="a results file of run.py")
    parser.add_argument("--below", type=float, default=1.0, help="profile the pairs whose ratio is below this")
    parser.add_argument("--ids", default=None, help="comma-separated pair ids to profile instead")
    parser.add_argument("--calls", type=int, default=3, help="calls timed and profiled per side")
    parser.add_argument("--rows", type=int, default=8, help="operators listed per side")
    parser.add_argument("--out", type=Path, default=None,
                        help="Markdown report (default: profiles_<device>.md beside --results; JSON beside it)")
    args = parser.parse_args(argv)
    if not args.results.is_file():
        parser.error(f"--results: no such file: {args.results}")
    results = json.loads(args.results.read_text())
    device = results["device"]
    out = args.out or args.results.parent / f"profiles_{device}.md"

    def written(profiles: list[dict]) -> None:  # after each pair: a run stopped by a time limit keeps what it did
        out.write_text(render(profiles, device) + "\n")
        out.with_suffix(".json").write_text(json.dumps(profiles, indent=1) + "\n")

    profiles = profile_results(results, args.below, args.calls, args.rows,
                               args.ids.split(",") if args.ids else None, written)
    written(profiles)
    print(f"wrote {out} and {out.with_suffix('.json')}")
    return profiles


if __name__ == "__main__":
    main()
