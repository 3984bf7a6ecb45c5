"""Seq2seq evaluation inside the training loop against the same evaluation after training (issue 34, item 9).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/seq2seq_eval_in_loop.py             # 5 runs, about 2 minutes on 2 cores
    python benchmarks/seq2seq_eval_in_loop.py --repeats 3 --data FILE.tsv[.gz]     # another verse-aligned file

The issue's run: ``scratchformer train --objective seq2seq`` from the shipped checkpoint (scratchformer-small) for 5
steps on 200 training rows (``kjv`` -> ``web``), 16 validation rows, the evaluation batch = the training batch (32),
greedy generation up to 128 tokens. The Trainer evaluates at the last step (in the loop); the benchmark then
evaluates the same weights again after training (the pipeline itself no longer does: one evaluation per run). Each run is a fresh process (so the first evaluation pays the first-call
costs a user's run pays); it records both ``eval_runtime`` values, the time spent in ``generate()``, and what the
generation ran with (model in eval mode, ``use_cache``, whether each decoding step after the first got the key/value
cache and one new token, the generation arguments, autocast, threads), which must be the same for both. We report
the medians over the runs and the per-run ratio in-loop / after.

The data: the first ``--train-rows`` rows of ``--data`` (default ``../shared/data/parallel_kjv_web_spa.tsv.gz``,
development data, not shipped) for training and ``--eval-rows`` rows from row ``--eval-start`` (5000) on for
validation. Writes ``benchmarks/seq2seq_eval_in_loop.json`` and ``.md`` (or ``--json``/``--md``).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "parallel_kjv_web_spa.tsv.gz"


def write_splits(data: Path, folder: Path, train_rows: int, eval_rows: int, eval_start: int) -> None:
    opener = gzip.open if data.suffix == ".gz" else open
    with opener(data, "rt", encoding="utf-8", newline="") as f:
        rows = [row for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)]
    for name, chosen in (("train.tsv", rows[:train_rows]), ("valid.tsv", rows[eval_start:eval_start + eval_rows])):
        lines = ["kjv\tweb"] + [f"{row['kjv']}\t{row['web']}" for row in chosen]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------------------------------
# One run (a child process)
# --------------------------------------------------------------------------------------------------------------------


def one_run(folder: Path, steps: int) -> dict:
    import torch
    from transformers import TrainerCallback

    from scratchformer.training import config_from_args, run_training

    class Watch(TrainerCallback):
        """Wraps the model's ``generate`` once, and records each evaluation: in the loop or after training."""

        def __init__(self):
            self.training_done = False
            self.generations: list[dict] = []
            self.evaluations: list[dict] = []

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            watch, generate, decoder_calls = self, model.generate, []

            def record_decoder(module, args, kwargs):
                ids = kwargs.get("input_ids", args[0] if args else None)
                cache = kwargs.get("cache", kwargs.get("past_key_values"))
                decoder_calls.append((None if ids is None else ids.shape[-1], cache is not None
                                      and int(cache.get_seq_length()) > 0))

            def timed_generate(*args, **kwargs):
                decoder_calls.clear()
                hook = model.get_decoder().register_forward_pre_hook(record_decoder, with_kwargs=True)
                start = time.perf_counter()
                try:
                    out = generate(*args, **kwargs)
                finally:
                    hook.remove()
                later = decoder_calls[1:]
                watch.generations.append({
                    "seconds": time.perf_counter() - start, "model_training": model.training,
                    "generation_use_cache": model.generation_config.use_cache,
                    "config_use_cache": model.config.use_cache,
                    "decoding_steps": len(decoder_calls),
                    "steps_with_cache_and_one_token": sum(1 for n, cached in later if n == 1 and cached),
                    "kwargs": {k: v for k, v in kwargs.items() if isinstance(v, (int, float, bool, type(None)))},
                    "autocast": torch.is_autocast_enabled("cpu"), "threads": torch.get_num_threads(),
                    "generated_shape": list(out.shape)})
                return out

            model.generate = timed_generate

        def on_train_end(self, args, state, control, **kwargs):
            self.training_done = True

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            self.evaluations.append({"after_training": self.training_done, "step": state.global_step,
                                     "eval_runtime": metrics["eval_runtime"],
                                     "eval_bleu": metrics.get("eval_bleu"), "eval_loss": metrics.get("eval_loss"),
                                     "generation": self.generations[-1] if self.generations else None})

    # A run evaluates its final weights once (issue 43): the Trainer's evaluation of the last step is the run's. The
    # evaluation after training that this benchmark compares it with is asked for here, just before the run ends.
    from scratchformer.training import pipeline

    finish = pipeline._finish

    def finish_after_one_more_evaluation(options, args, trainer, *rest):
        trainer.evaluate()
        return finish(options, args, trainer, *rest)

    pipeline._finish = finish_after_one_more_evaluation
    watch = Watch()
    options, args = config_from_args([
        "--objective", "seq2seq", "--train-files", str(folder / "train.tsv"), "--validation-files",
        str(folder / "valid.tsv"), "--source-column", "kjv", "--target-column", "web",
        "--model", "small", "--output-dir", str(folder / "out"), "--overwrite_output_dir",
        "--max-steps", str(steps), "--disable_tqdm", "true", "--save-steps", "1000"])
    run_training(options, args, callbacks=[watch])
    return {"evaluations": watch.evaluations}


# --------------------------------------------------------------------------------------------------------------------
# The measurement
# --------------------------------------------------------------------------------------------------------------------


def summarise(runs: list[dict]) -> dict:
    in_loop = [next(e for e in r["evaluations"] if not e["after_training"]) for r in runs]
    after = [next(e for e in r["evaluations"] if e["after_training"]) for r in runs]

    def settings(e):
        g = dict(e["generation"])
        g.pop("seconds")
        return g

    return {
        "in_loop_eval_runtime_median": statistics.median(e["eval_runtime"] for e in in_loop),
        "after_training_eval_runtime_median": statistics.median(e["eval_runtime"] for e in after),
        "in_loop_generate_seconds_median": statistics.median(e["generation"]["seconds"] for e in in_loop),
        "after_training_generate_seconds_median": statistics.median(e["generation"]["seconds"] for e in after),
        "per_run_ratio_in_loop_over_after": [round(a["eval_runtime"] / b["eval_runtime"], 3)
                                             for a, b in zip(in_loop, after)],
        "same_metrics": all(a["eval_bleu"] == b["eval_bleu"] and a["eval_loss"] == b["eval_loss"]
                            for a, b in zip(in_loop, after)),
        "same_generation_settings": all(settings(a) == settings(b) for a, b in zip(in_loop, after)),
        "generation_settings": settings(in_loop[0]),
        "in_loop_eval_runtimes": [e["eval_runtime"] for e in in_loop],
        "after_training_eval_runtimes": [e["eval_runtime"] for e in after],
    }


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_markdown(result: dict, path: Path) -> None:
    s = result["summary"]
    lines = [
        "# Seq2seq evaluation: in the training loop vs after training", "",
        f"`{result['command']}` on {result['machine']}, {result['date']}, commit {result['commit']}; "
        f"torch {result['torch']}, transformers {result['transformers']}; OMP_WAIT_POLICY={result['omp_wait_policy']}; "
        f"load average (1 min) before / after: {result['load_before']} / {result['load_after']}.", "",
        f"{result['repeats']} runs, each a fresh process: {result['setup']}.", "",
        "| evaluation | eval_runtime, median | of which generate(), median | runs |",
        "| --- | ---: | ---: | --- |",
        f"| in the loop (step {result['steps']}) | {s['in_loop_eval_runtime_median']:.2f} s | "
        f"{s['in_loop_generate_seconds_median']:.2f} s | {', '.join(f'{x:.2f}' for x in s['in_loop_eval_runtimes'])} |",
        f"| after training, same weights | {s['after_training_eval_runtime_median']:.2f} s | "
        f"{s['after_training_generate_seconds_median']:.2f} s | "
        f"{', '.join(f'{x:.2f}' for x in s['after_training_eval_runtimes'])} |", "",
        f"Per-run ratio in-loop / after: {', '.join(str(r) for r in s['per_run_ratio_in_loop_over_after'])}. "
        f"Same metrics in both: {s['same_metrics']}. Same generation settings in both: "
        f"{s['same_generation_settings']}: `{json.dumps(s['generation_settings'])}`.", "",
    ]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a TSV with kjv and web columns (.gz or not)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--train-rows", type=int, default=200)
    parser.add_argument("--eval-rows", type=int, default=16)
    parser.add_argument("--eval-start", type=int, default=5000, help="the first validation row of --data")
    parser.add_argument("--json", default=str(HERE / "seq2seq_eval_in_loop.json"))
    parser.add_argument("--md", default=str(HERE / "seq2seq_eval_in_loop.md"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(one_run(Path(args.child), args.steps)), flush=True)
        return
    data = Path(args.data)
    if not data.is_file():
        sys.exit(f"{data} not found: pass --data, a TSV with kjv and web columns")
    load_before = round(os.getloadavg()[0], 2)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_splits(data, folder, args.train_rows, args.eval_rows, args.eval_start)
        for i in range(args.repeats):
            done = subprocess.run([sys.executable, __file__, "--child", str(folder), "--steps", str(args.steps)],
                                  capture_output=True, text=True, check=False)
            lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            if done.returncode != 0 or not lines:
                sys.exit(f"run {i + 1} failed:\n{done.stderr[-4000:]}")
            runs.append(json.loads(lines[-1][len("RESULT "):]))
            e = runs[-1]["evaluations"]
            print(f"run {i + 1}: " + ", ".join(f"{'after' if x['after_training'] else 'in loop'} "
                                               f"{x['eval_runtime']:.2f} s" for x in e), flush=True)
    import torch
    import transformers

    result = {
        "command": " ".join(["python benchmarks/seq2seq_eval_in_loop.py", *sys.argv[1:]]),
        "machine": f"{_cpu()}, {os.cpu_count()} logical CPUs", "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                     time.gmtime()),
        "commit": _commit(), "torch": torch.__version__, "transformers": transformers.__version__,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"), "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2), "repeats": args.repeats, "steps": args.steps,
        "setup": (f"{args.steps} steps of `scratchformer train --objective seq2seq --model small` on {args.train_rows} "
                  f"training rows, {args.eval_rows} validation rows (kjv -> web), batch 32, greedy, at most 128 tokens"),
        "summary": summarise(runs), "runs": runs}
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    write_markdown(result, Path(args.md))
    print(Path(args.md).read_text())


if __name__ == "__main__":
    main()
