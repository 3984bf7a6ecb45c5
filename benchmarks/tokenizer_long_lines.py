"""Tokenizer training on lines without whitespace: does the time stay linear in the line's length?

    python benchmarks/tokenizer_long_lines.py            # 1, 2.5, 5 and 10 MB lines of letters, 3 runs each
    python benchmarks/tokenizer_long_lines.py --quick    # 0.1 and 0.4 MB, 1 run (seconds)

BPE training is quadratic in a word's length, and a line of letters without a space is one word to the byte-level
pre-tokenizer. Both trainers therefore cut whitespace-free runs longer than ``bpe.MAX_TRAINING_WORD`` characters into
pieces (``bpe.training_pieces``). This times ``train_fast_tokenizer`` (what ``scratchformer train`` and
``train-tokenizer`` use) on one such line plus a little ordinary text, and reports seconds per MB: flat means linear.
Writes ``benchmarks/tokenizer_long_lines.json`` and ``.md`` (or ``--json``/``--md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

from scratchformer.tokenizer import bpe
from scratchformer.tokenizer.training import train_fast_tokenizer

HERE = Path(__file__).resolve().parent


def time_one(megabytes: float, repeats: int, vocab_size: int) -> dict:
    rng = random.Random(0)
    line = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=int(megabytes * 1_000_000)))
    texts = [line, "The bank of the river.", "She deposited her salary at the bank."]
    seconds = []
    for _ in range(repeats):
        start = time.process_time()
        train_fast_tokenizer(texts, vocab_size)
        seconds.append(time.process_time() - start)
    median = statistics.median(seconds)
    return {"megabytes": megabytes, "cpu_seconds_median": round(median, 3),
            "seconds_per_megabyte": round(median / megabytes, 3), "runs": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small lines, one run each")
    parser.add_argument("--vocab-size", type=int, default=1000)
    parser.add_argument("--json", default=str(HERE / "tokenizer_long_lines.json"))
    parser.add_argument("--md", default=str(HERE / "tokenizer_long_lines.md"))
    args = parser.parse_args()
    sizes, repeats = ([0.1, 0.4], 1) if args.quick else ([1.0, 2.5, 5.0, 10.0], 3)
    rows = []
    for megabytes in sizes:
        rows.append(time_one(megabytes, repeats, args.vocab_size))
        print(f"{megabytes:5.1f} MB line: {rows[-1]['cpu_seconds_median']:.2f} s CPU "
              f"({rows[-1]['seconds_per_megabyte']:.3f} s/MB)", flush=True)
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
              "max_training_word": bpe.MAX_TRAINING_WORD, "vocab_size": args.vocab_size, "repeats": repeats,
              "timing": "process CPU time (all threads), median", "rows": rows}
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Tokenizer training on one line without whitespace", "",
             f"`python benchmarks/tokenizer_long_lines.py` on {result['machine']}; {result['timing']} of "
             f"{repeats} run(s); long words cut at {bpe.MAX_TRAINING_WORD} characters.", "",
             "| line | CPU seconds | seconds per MB |", "| ---: | ---: | ---: |"]
    lines += [f"| {r['megabytes']} MB | {r['cpu_seconds_median']} | {r['seconds_per_megabyte']} |" for r in rows]
    Path(args.md).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
