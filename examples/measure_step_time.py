"""Measure seconds per optimizer step of candidate model sizes with the real training pipeline.

Runs ``scratchformer train`` (denoising) for a few steps per candidate with a timing callback and prints one table
row per candidate: wall seconds/step, CPU seconds/step of this process (less sensitive to other programs on the
machine), target tokens/step, parameters and the size of the weights in fp32 / fp16. The numbers in
docs/experiments.md ("Measured seconds per step") come from this script:

    python examples/measure_step_time.py --corpus ../shared/data/corpus_en.txt.gz --tokenizer outputs/tok16k \\
        --presets mini small-sym small --steps 25

``--tokenizer`` is a folder with a trained tokenizer (``scratchformer train`` writes one to OUTPUT_DIR/tokenizer);
without it, a 16k byte-level BPE is trained on the corpus sample first. ``--precision fp32 bf16 --rounds 2`` times
both precisions, alternating, so that a busy moment of the machine does not fall on one of them; the phase-one step
(the encoder's masked-token loss alone, 32 x 4) is

    python examples/measure_step_time.py --presets small --tokenizer scratchformer/pretrained/scratchformer-small \\
        --config-overrides pre_layer_norm=true,dropout=0.0,position_embedding_type=rope,bias=false \\
        --encoder-mlm-weight 1 --denoising-weight 0 --gradient-accumulation-steps 4 --max-tokens-per-character 0.3 \\
        --train-sampling-strategy batch_rebalance --steps 14 --skip 4 --precision fp32 bf16 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

from scratchformer.errors import ScratchformerError
from scratchformer.training import ScratchformerTrainingArguments, TrainOptions, run_training


class StepTimer(TrainerCallback):
    """Wall and process-CPU time between consecutive step ends (data, forward, backward and optimizer)."""

    def __init__(self):
        self.wall, self.cpu, self.tokens = [], [], []
        self._last = None

    def on_step_end(self, args, state, control, **kwargs):
        now = (time.perf_counter(), time.process_time())
        if self._last is not None:
            self.wall.append(now[0] - self._last[0])
            self.cpu.append(now[1] - self._last[1])
        self._last = now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared/data/corpus_en.txt.gz"))
    parser.add_argument("--tokenizer", default=None)
    parser.add_argument("--presets", nargs="+", default=["mini", "small-sym", "small"])
    parser.add_argument("--config-overrides", default=None, help="applied to every preset")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--skip", type=int, default=5, help="first steps not counted (warm-up)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--rows", type=int, default=4000, help="corpus rows to use")
    parser.add_argument("--gradient-accumulation-steps", type=int, default=1)
    parser.add_argument("--encoder-mlm-weight", type=float, default=0.0, help="the encoder's masked-token loss")
    parser.add_argument("--denoising-weight", type=float, default=1.0, help="0 skips the decoder's pass")
    parser.add_argument("--max-tokens-per-character", type=float, default=None, help="the corpus filter")
    parser.add_argument("--train-sampling-strategy", default="random", help="batch_rebalance: less padding")
    parser.add_argument("--precision", nargs="+", choices=("fp32", "bf16"), default=["fp32"],
                        help="bf16: bfloat16 autocast; several are timed in turn")
    parser.add_argument("--rounds", type=int, default=1, help="times each preset and precision is timed")
    parser.add_argument("--json", default=None, help="also write the table here")
    opts = parser.parse_args()
    if opts.rounds < 1 or opts.skip < 0 or opts.steps - 1 - opts.skip < 1:  # a step's time is between two step ends
        parser.error(f"need --rounds >= 1 and --steps > --skip + 1 >= 1 (got --rounds {opts.rounds}, --steps "
                     f"{opts.steps}, --skip {opts.skip})")
    try:
        rows = measure(opts)
    except ScratchformerError as error:  # a bad option or file, said as scratchformer train says it
        parser.error(str(error))
    print(f"\n{'preset':<10} {'precision':<9} {'params':>10} {'fp32 MB':>8} {'fp16 MB':>8} {'wall s/step':>11} "
          f"{'CPU s/step':>10}")
    for r in rows:
        print(f"{r['preset']:<10} {r['precision']:<9} {r['params']:>10,} {r['fp32_mb']:>8.1f} {r['fp16_mb']:>8.1f} "
              f"{r['wall_s_per_step']:>11.2f} {r['cpu_s_per_step']:>10.2f}")
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2))


def measure(opts: argparse.Namespace) -> list[dict]:
    """One row per round, preset and precision: a short run of the real pipeline, timed step by step."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(round_, preset, precision) for round_ in range(opts.rounds) for preset in opts.presets
                for precision in opts.precision]
        for round_, preset, precision in runs:
            timer = StepTimer()
            options = TrainOptions(train_files=[opts.corpus], preset=preset, config_overrides=opts.config_overrides,
                                   tokenizer=opts.tokenizer, max_train_samples=opts.rows,
                                   tokenizer_max_rows=opts.rows, max_length=opts.max_length, max_eval_samples=32,
                                   encoder_mlm_weight=opts.encoder_mlm_weight,
                                   denoising_weight=opts.denoising_weight,
                                   max_tokens_per_character=opts.max_tokens_per_character)
            args = ScratchformerTrainingArguments(
                output_dir=os.path.join(tmp, f"{preset}-{precision}-{round_}"), max_steps=opts.steps,
                per_device_train_batch_size=opts.batch_size,
                gradient_accumulation_steps=opts.gradient_accumulation_steps, eval_steps=0, save_steps=10**6,
                logging_steps=10**6, disable_tqdm=True, warmup_steps=opts.steps, bf16=precision == "bf16",
                train_sampling_strategy=opts.train_sampling_strategy)
            result = run_training(options, args, callbacks=[timer])
            weights = Path(args.output_dir) / "model.safetensors"
            from scratchformer import ScratchformerForConditionalGeneration

            model = ScratchformerForConditionalGeneration.from_pretrained(args.output_dir)
            params = model.num_parameters()
            wall, cpu = timer.wall[opts.skip:], timer.cpu[opts.skip:]
            rows.append(dict(preset=preset, precision=precision, round=round_, params=params,
                             fp32_mb=weights.stat().st_size / 1e6, fp16_mb=params * 2 / 1e6,
                             wall_s_per_step=statistics.median(wall),
                             cpu_s_per_step=statistics.median(cpu), steps_timed=len(wall),
                             load_average=os.getloadavg()[0],
                             train_loss=result["metrics"].get("train_loss")))
            print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
