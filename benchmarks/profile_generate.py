"""Profile greedy generation, ours against BART, in one process on one CPU thread: wall time (alternating calls,
medians) and torch.profiler's operator table for one generate() of each.

The timed pairs of run.py put each pair in a fresh process; this script is for looking inside a pair that missed its
target, with the same models, inputs and generation settings:

    python benchmarks/profile_generate.py --size base --batch 8      # the numbers quoted in RESULTS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (benchmarks/run.py: the models and workloads of the timed pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="d256", choices=sorted(bench.SIZES["cpu"]))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5, help="timed calls of each model, alternating")
    parser.add_argument("--rows", type=int, default=15, help="operators shown per model")
    args = parser.parse_args()

    torch.set_num_threads(1)
    workloads = bench.Workloads(bench.SIZES["cpu"][args.size])
    calls = {key: workloads.generate(key, args.batch, args.new_tokens) for key in ("ours_s2s", "bart_s2s")}
    for call in calls.values():  # warm-up
        call()
        call()
    times: dict[str, list[float]] = {key: [] for key in calls}
    for _ in range(args.rounds):
        for key, call in calls.items():
            start = time.perf_counter()
            call()
            times[key].append(time.perf_counter() - start)
    ours, bart = (statistics.median(times[key]) for key in calls)
    print(f"{args.size}, batch {args.batch}, {args.new_tokens} new tokens, 1 thread: ours {ours * 1e3:.1f} ms, "
          f"BART {bart * 1e3:.1f} ms (medians of {args.rounds}); ratio BART/ours {bart / ours:.3f}")
    for key, call in calls.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            call()
        events = profile.key_averages()
        total = sum(event.self_cpu_time_total for event in events) / 1e3
        print(f"\n{key}: operator self time {total:.1f} ms, {sum(event.count for event in events):,} operator calls")
        print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=40))


if __name__ == "__main__":
    main()
