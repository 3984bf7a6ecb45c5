"""Cached greedy generation of this tree's model against an earlier commit's, side by side in one run.

Issue 43 asks whether splitting the model core (the paper file plus the adapter) and the input checks cost speed per
decoding step. Two worker processes, one importing ``scratchformer`` from this tree and one from ``git archive
COMMIT``, build the same model (same config, same seed) and take turns: each round times one ``generate()`` of N and
one of 2N new tokens in each worker, alternating A/B. The per-step cost is (median t(2N) - median t(N)) / N, which
leaves out the encoder and generate()'s fixed set-up; the ratio is the earlier commit's time over this tree's (> 1:
this tree is faster). The spread of the rounds (interquartile range over median) says how far to trust it.

    python benchmarks/generate_vs_commit.py                       # b228458 (before the split), overhead size, batch 1
    python benchmarks/generate_vs_commit.py --size d256 --batch 8
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

from harness import cpu_info  # benchmarks/harness.py: the machine, as run.py reports it

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
SIZES = {  # the benchmark groups' dimensions (workloads.py): d_model, layers, heads, ffn, vocab, source length
    "overhead": dict(d_model=64, layers=4, heads=4, ffn=256, vocab=1000, source=32),
    "d256": dict(d_model=256, layers=4, heads=4, ffn=1024, vocab=16000, source=32),
}

WORKER = r"""
import json, sys, time
import torch
torch.set_num_threads(int(sys.argv[1]))
size, batch = json.loads(sys.argv[2]), int(sys.argv[3])
from transformers import GenerationConfig
from scratchformer import ScratchformerConfig, ScratchformerForConditionalGeneration
config = ScratchformerConfig(
    vocab_size=size["vocab"], d_model=size["d_model"], encoder_layers=size["layers"], decoder_layers=size["layers"],
    encoder_attention_heads=size["heads"], decoder_attention_heads=size["heads"], encoder_ffn_dim=size["ffn"],
    decoder_ffn_dim=size["ffn"], max_position_embeddings=512, dropout=0.1, pad_token_id=0, bos_token_id=1,
    eos_token_id=2, decoder_start_token_id=1, attn_implementation="sdpa")
torch.manual_seed(0)
model = ScratchformerForConditionalGeneration(config).eval()
ids = torch.randint(3, size["vocab"], (batch, size["source"]), generator=torch.Generator().manual_seed(5))
mask = torch.ones_like(ids)

def generate(new):
    settings = GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False, num_beams=1, pad_token_id=0,
                                bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=settings)
    took = time.perf_counter() - start
    assert out.shape == (batch, new + 1), out.shape
    return took

print("ready", flush=True)
for line in sys.stdin:
    print(json.dumps(generate(int(line))), flush=True)
"""


class Worker:
    """One process that imports ``scratchformer`` from ``path`` and times a ``generate()`` when asked."""

    def __init__(self, path: Path, threads: int, size: dict, batch: int):
        env = {**os.environ, "PYTHONPATH": str(path), "OMP_WAIT_POLICY": "PASSIVE", "HF_HUB_OFFLINE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(threads), json.dumps(size), str(batch)], cwd=path, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit(f"the worker importing {path} did not start")

    def time(self, new_tokens: int) -> float:
        self.process.stdin.write(f"{new_tokens}\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def checkout(commit: str, into: Path) -> str:
    """``git archive COMMIT scratchformer`` unpacked into ``into``; returns the commit's short hash."""
    archive = subprocess.run(["git", "archive", commit, "scratchformer"], cwd=ROOT, check=True, capture_output=True)
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return subprocess.run(["git", "rev-parse", "--short", commit], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="b228458", help="the earlier commit (default: before the core split)")
    parser.add_argument("--size", default="overhead", choices=sorted(SIZES))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--new-tokens", type=int, default=64, help="N: each round generates N and 2N tokens")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE / "generate_vs_commit.json")
    args = parser.parse_args()

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as old_root:
        earlier = checkout(args.commit, Path(old_root))
        size = SIZES[args.size]
        workers = {"this tree": Worker(ROOT, args.threads, size, args.batch),
                   earlier: Worker(Path(old_root), args.threads, size, args.batch)}
        n = args.new_tokens
        for worker in workers.values():  # warm-up
            for _ in range(2):
                worker.time(n), worker.time(2 * n)
        times: dict[str, dict[int, list[float]]] = {name: {n: [], 2 * n: []} for name in workers}
        for round_ in range(args.rounds):
            order = list(workers) if round_ % 2 == 0 else list(reversed(workers))
            for name in order:
                for new in (n, 2 * n):
                    times[name][new].append(workers[name].time(new))
        for worker in workers.values():
            worker.close()
    medians = {name: {new: statistics.median(values) for new, values in by_length.items()}
               for name, by_length in times.items()}
    per_step = {name: (m[2 * n] - m[n]) / n for name, m in medians.items()}
    result = {
        "what": f"greedy generate() with the default dynamic cache, batch {args.batch}, size {args.size} {size}, "
                f"{args.threads} thread(s); per step = (median t({2 * n}) - median t({n})) / {n}",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{cpu_info()['cpu']}, {os.cpu_count()} logical CPUs; {platform.platform()}",
        "load_average_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "this_tree": head, "earlier": earlier, "rounds": args.rounds,
        "per_step_ms": {name: round(1000 * value, 4) for name, value in per_step.items()},
        "ratio_earlier_over_this": round(per_step[earlier] / per_step["this tree"], 4),
        "generate_ms_median": {name: {str(new): round(1000 * value, 3) for new, value in m.items()}
                               for name, m in medians.items()},
        "spread_iqr_over_median": {name: {str(new): round(_spread(values), 3) for new, values in by_length.items()}
                                   for name, by_length in times.items()},
        "generate_ms_all": {name: {str(new): [round(1000 * v, 3) for v in values] for new, values in by_length.items()}
                            for name, by_length in times.items()},
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({key: value for key, value in result.items() if key != "generate_ms_all"}, indent=2))


def _spread(values: list[float]) -> float:
    quartiles = statistics.quantiles(values, n=4)
    return (quartiles[2] - quartiles[0]) / statistics.median(values)


if __name__ == "__main__":
    main()
