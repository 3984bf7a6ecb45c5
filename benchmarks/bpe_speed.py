"""Naive vs incremental BPE training (``scratchformer.bpe``): same merges, how much faster?

    python benchmarks/bpe_speed.py            # 1 MB of ../shared/data/corpus_en.txt.gz, 1000 merges, 3 runs each
    python benchmarks/bpe_speed.py --quick    # seconds; generated text when the shared data is absent

Writes ``benchmarks/bpe_speed.json`` and ``benchmarks/BPE_SPEED.md`` (or ``--json``/``--md``). Exits 1 if the two
trainers disagree on a single merge.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

from scratchformer.tokenizer import bpe

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "corpus_en.txt.gz"


def read_slice(path: Path, max_bytes: int) -> list[str]:
    """The first lines of ``path`` (plain or gzip) up to ``max_bytes`` UTF-8 bytes."""
    lines, size = [], 0
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as f:
        for line in f:
            if size + len(line.encode("utf-8")) > max_bytes:
                break
            lines.append(line)
            size += len(line.encode("utf-8"))
    return lines


def generated_text(max_bytes: int, seed: int = 0) -> list[str]:
    """Zipf-distributed pseudo-words (no data needed), for ``--quick`` without the shared corpus."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz"[: rng.randint(5, 26)]) for _ in range(rng.randint(1, 9)))
             for _ in range(3000)]
    weights = [1 / (rank + 1) for rank in range(len(words))]
    lines, size = [], 0
    while size < max_bytes:
        line = " ".join(rng.choices(words, weights, k=rng.randint(5, 30))) + ".\n"
        lines.append(line)
        size += len(line)
    return lines


def timed(fn, repeats: int) -> tuple[list[float], list[float], object]:
    """CPU seconds and wall seconds of ``repeats`` calls, and the last result.

    CPU time (``time.process_time``) is the headline: the trainers are single-threaded, and on a shared machine
    the wall time also counts the time other processes held the CPU.
    """
    cpu, wall, result = [], [], None
    for _ in range(repeats):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        result = fn()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return cpu, wall, result


def machine() -> dict[str, object]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small slice, few merges, one run: a smoke test")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="text file, plain or .gz")
    parser.add_argument("--megabytes", type=float, default=None, help="slice size (default 1, quick 0.05)")
    parser.add_argument("--merges", type=int, default=None, help="merges to learn (default 1000, quick 100)")
    parser.add_argument("--scheme", choices=bpe.SCHEMES, default=bpe.DEFAULT_SCHEME)
    parser.add_argument("--repeats", type=int, default=None, help="runs per trainer (default 3, quick 1)")
    parser.add_argument("--json", type=Path, default=HERE / "bpe_speed.json")
    parser.add_argument("--md", type=Path, default=HERE / "BPE_SPEED.md")
    args = parser.parse_args(argv)
    megabytes = args.megabytes or (0.05 if args.quick else 1.0)
    num_merges = args.merges or (100 if args.quick else 1000)
    repeats = args.repeats or (1 if args.quick else 3)
    max_bytes = int(megabytes * 1_000_000)

    if args.data.is_file():
        lines, source = read_slice(args.data, max_bytes), f"first {megabytes:g} MB of {args.data.name}"
    elif args.quick:
        lines, source = generated_text(max_bytes), f"{megabytes:g} MB of generated pseudo-words"
    else:
        print(f"data not found: {args.data} (use --data, or --quick for generated text)", file=sys.stderr)
        return 2
    word_counts = bpe.count_words(lines, args.scheme)
    vocab = {bpe.word_to_symbols(word, args.scheme): count for word, count in word_counts.items()}

    naive_cpu, naive_wall, naive_merges = timed(lambda: bpe.learn_merges_naive(vocab, num_merges), repeats)
    fast_cpu, fast_wall, fast_merges = timed(lambda: bpe.learn_merges(vocab, num_merges), repeats)
    identical = naive_merges == fast_merges
    result = {
        "machine": machine(),
        "data": {
            "source": source,
            "bytes": sum(len(line.encode("utf-8")) for line in lines),
            "lines": len(lines),
            "words": sum(word_counts.values()),
            "distinct_words": len(word_counts),
            "scheme": args.scheme,
        },
        "merges": len(fast_merges),
        "repeats": repeats,
        "naive_cpu_seconds": naive_cpu,
        "incremental_cpu_seconds": fast_cpu,
        "naive_median_seconds": statistics.median(naive_cpu),
        "incremental_median_seconds": statistics.median(fast_cpu),
        "speedup": statistics.median(naive_cpu) / statistics.median(fast_cpu),
        "naive_wall_seconds": naive_wall,
        "incremental_wall_seconds": fast_wall,
        "wall_speedup": statistics.median(naive_wall) / statistics.median(fast_wall),
        "identical_merges": identical,
        "command": "python benchmarks/bpe_speed.py" + (" --quick" if args.quick else ""),
    }
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    args.md.write_text(markdown(result))
    print(
        f"{result['merges']} merges on {source} ({result['data']['distinct_words']:,} distinct words): "
        f"naive {result['naive_median_seconds']:.2f} s, incremental {result['incremental_median_seconds']:.3f} s "
        f"(CPU time, medians of {repeats}), speed-up {result['speedup']:.1f}x, identical merges: {identical}"
    )
    return 0 if identical else 1


def markdown(r: dict) -> str:
    m, d = r["machine"], r["data"]
    return f"""# BPE training speed: naive vs incremental

`{r["command"]}` (written by the script; do not edit by hand).

| | |
|---|---|
| machine | {m["processor"]}, {m["cpu_count"]} CPUs, {m["platform"]}, Python {m["python"]} |
| data | {d["source"]}: {d["bytes"]:,} bytes, {d["lines"]:,} lines, {d["words"]:,} words ({d["distinct_words"]:,} distinct), {d["scheme"]} |
| merges | {r["merges"]} |
| naive (recount all pairs every merge): CPU time, median of {r["repeats"]} | {r["naive_median_seconds"]:.2f} s |
| incremental (recount only the words with the merged pair): CPU time, median of {r["repeats"]} | {r["incremental_median_seconds"]:.3f} s |
| **speed-up (CPU time)** | **{r["speedup"]:.1f}x** |
| speed-up (wall time, machine shared with other jobs) | {r["wall_speedup"]:.1f}x |
| identical merges | {r["identical_merges"]} |

Both trainers are in `scratchformer/bpe.py` (`learn_merges_naive`, `learn_merges`); word counting (the same for
both) is not timed. The naive trainer's cost is (number of merges) x (size of the word list); the incremental one
pays for each merge only in proportion to the words that contain the merged pair, so the ratio grows with the
number of merges. The headline is CPU time (`time.process_time`): both trainers are single-threaded, and on a
shared machine wall time also counts the time other jobs held the CPU (all runs are in `bpe_speed.json`).
"""


if __name__ == "__main__":
    sys.exit(main())
