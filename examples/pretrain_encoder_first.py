"""Pre-training in two phases, the encoder first: the candidate recipe for checkpoint v4 (issue 40).

Phase one trains the encoder alone with BERT's masked-token loss (the decoder's loss off); phase two trains the decoder
alone on the frozen encoder, so the word vectors that ``scratchformer senses`` scores are phase one's, bit for bit.
It is v4c's command, then v4e's (docs/experiments.md has every run behind them): one command, one sitting on 2 CPU
cores (phase one stops at 130 minutes, phase two at 44); after a cut, the same command with ``--resume`` continues the
phase that was running and skips a finished one:

    python examples/pretrain_encoder_first.py                          # both phases, into outputs/pretrain-v4
    python examples/pretrain_encoder_first.py --resume                 # continue a cut run
    python examples/pretrain_encoder_first.py --train-files data.txt --phase-one --max-steps 100 --phase-two --max-steps 20

Options before ``--phase-one`` / ``--phase-two`` go to both phases; after either marker, to that phase alone (any
``scratchformer train`` option; each wins over the recipe's). Phase one writes OUTPUT_DIR/encoder, phase two the
final model to OUTPUT_DIR/model. The tokenizer is trained as v3's was (v4c reused it). fp32, unless ``--bf16`` is given:
it pays on a CPU with bf16 instructions (AMX, AVX-512 BF16); below AVX-512 it is emulated, and refused
(docs/training.md).
On a GPU add ``--batch-size 128 --gradient-accumulation-steps 1 --bf16 --dataloader-num-workers 4`` before the markers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scratchformer.cli import main

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("--phase-one", "--phase-two")

# Both phases: the corpus, 128 sequences per optimizer step as 32 x 4, `batch_rebalance` splitting each step's draw
# by length so that less of it is padding, a linear schedule to zero.
COMMON = [
    "--objective", "denoise",
    "--train-files", str(REPO.parent / "shared" / "data" / "corpus_en.txt.gz"),
    "--batch-size", "32",
    "--gradient-accumulation-steps", "4",
    "--learning-rate", "2e-3",
    "--lr-schedule", "linear",
    "--train-sampling-strategy", "batch_rebalance",
    "--seed", "42",
    "--eval-steps", "0",
]

# Phase one, v4c's: the encoder's masked-token loss alone (BERT's 15 % of the tokens chosen), warm-up over 55 % of the
# steps (v4c was cut by its 130 minutes at step 3245 of 3300, on an Intel Xeon at 2.4 s per step; its --bf16 did
# not reach this phase's loss before f98510f, so it trained in float32, as this recipe does).
# --mask-ratio shapes only the decoder's noise, which this phase does not train: kept as v4c's command had it.
PHASE_ONE = [
    "--preset", "small",
    "--config-overrides", "pre_layer_norm=true,dropout=0.0,position_embedding_type=rope",
    "--tokenizer-vocab-size", "16000",
    "--warmup-steps", "1815",
    "--max-steps", "3300",
    "--mask-ratio", "0.5",
    "--encoder-mlm-weight", "1",
    "--denoising-weight", "0",
    "--save-steps", "250",
    "--save-total-limit", "2",
    "--max-minutes", "130",
]

# Phase two, v4e's: the decoder alone on the frozen encoder (and its shared embedding table), at v1's lighter noise,
# so that most of each target is there to copy while it learns to.
PHASE_TWO = [
    "--freeze-encoder",
    "--warmup-steps", "75",
    "--max-steps", "750",
    "--mask-ratio", "0.3",
    "--save-steps", "250",
    "--save-total-limit", "2",
    "--max-minutes", "44",
]


def split_phases(argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """The options for both phases, for phase one alone and for phase two alone (see the module's docstring)."""
    parts: dict[str | None, list[str]] = {None: [], **{marker: [] for marker in MARKERS}}
    current = None
    for arg in argv:
        if arg in MARKERS:
            current = arg
        else:
            parts[current].append(arg)
    return parts[None], parts["--phase-one"], parts["--phase-two"]


def finished(folder: Path) -> bool:
    """A phase is done once its run wrote its final metrics (at --max-steps, or stopped by --max-minutes)."""
    return (folder / "all_results.json").is_file()


def main_two_phases(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--output-dir", "--output_dir", default=str(REPO / "outputs" / "pretrain-v4"))
    parser.add_argument("--resume", action="store_true")
    both, one, two = split_phases(argv)
    where, common = parser.parse_known_args(both)
    out = Path(where.output_dir)
    encoder, model = out / "encoder", out / "model"
    phases = [("one", encoder, [*COMMON, *PHASE_ONE, *common, *one]),
              ("two", model, [*COMMON, *PHASE_TWO, "--model", str(encoder), *common, *two])]
    for name, folder, options in phases:
        if finished(folder):
            print(f"phase {name}: already finished in {folder}; skipped", flush=True)
            continue
        resume = ["--resume"] if where.resume and folder.is_dir() else []
        print(f"phase {name}: training into {folder}", flush=True)
        status = main(["train", *options, "--output-dir", str(folder), *resume])
        if status or not finished(folder):  # an error (already reported), or stopped before its end
            return status or 1
    print(f"the model: {model} (its encoder: phase one's, unchanged)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main_two_phases(sys.argv[1:]))
