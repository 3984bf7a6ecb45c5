"""Denoising pre-training (BART text infilling) on an English corpus: the recipe of the shipped checkpoint.

This is ``scratchformer train --objective denoise`` with the options of docs/training.md filled in; any option given
here is passed on and wins over the defaults (see ``scratchformer train --help``):

    python examples/pretrain_denoising.py                                   # the shipped recipe (~2 h on 2 quiet cores)
    python examples/pretrain_denoising.py --max-steps 50 --output-dir outputs/smoke --eval-steps 25
    python examples/pretrain_denoising.py --resume                          # continue an interrupted run
    python examples/pretrain_denoising.py --overwrite_output_dir            # start over in the same folder
    torchrun --nproc_per_node=2 examples/pretrain_denoising.py ...          # data-parallel

It trains a 16k byte-level BPE on the corpus (saved in OUTPUT_DIR/tokenizer), then the model; checkpoints go to
OUTPUT_DIR/checkpoint-*, the final model, ``loss_curve.png`` and ``loss_history.json`` to OUTPUT_DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scratchformer.cli import main

REPO = Path(__file__).resolve().parents[1]

# The recipe of the shipped checkpoint (docs/training.md explains every choice).
DEFAULTS = [
    "--objective", "denoise",
    "--train-files", str(REPO.parent / "shared" / "data" / "corpus_en.txt.gz"),
    "--output-dir", str(REPO / "outputs" / "pretrain-small"),
    "--preset", "small",
    "--config-overrides", "pre_layer_norm=true,dropout=0.0",
    "--tokenizer-vocab-size", "16000",
    "--max-length", "128",
    "--batch-size", "32",
    "--max-steps", "3191",
    "--lr-schedule", "inverse_sqrt",
    "--learning-rate", "2e-3",
    "--warmup-steps", "300",
    "--save-dtype", "float16",
    "--eval-steps", "500",
    "--save-steps", "250",
    "--save-total-limit", "2",
    "--logging-steps", "25",
    "--max-eval-samples", "512",
    "--seed", "42",
]


if __name__ == "__main__":
    sys.exit(main(["train", *DEFAULTS, *sys.argv[1:]]))
