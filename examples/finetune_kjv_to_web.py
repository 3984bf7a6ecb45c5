"""Fine-tune a pre-trained Scratchformer on KJV -> WEB (archaic to modern English) and report BLEU / chrF.

The verse-aligned Bible file is split by *book*: the books in ``--validation-books`` are never trained on, and the
scores are computed by ``sacrebleu`` on greedy generations for verses of those books. For scale, the script also
scores the trivial system that copies the KJV verse unchanged.

    python examples/finetune_kjv_to_web.py                                   # the shipped scratchformer-small
    python examples/finetune_kjv_to_web.py --model outputs/pretrain-small    # or a pretraining output folder
    python examples/finetune_kjv_to_web.py --max-steps 50 --max-eval-samples 64     # a quick look

Any other ``scratchformer train`` option (``--batch-size``, ``--learning-rate``, ``--resume`` ...) is passed on. An
``--output-dir`` that holds an earlier run is refused: ``--resume`` continues it, ``--overwrite_output_dir`` replaces it.
It runs ``scratchformer train --objective seq2seq --source-column kjv --target-column web --group-column ref
--group-pattern BOOK_OF_REF``: the Bible-specific part, what a book is, lives here, not in the training code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scratchformer.loading import pretrained_path
from scratchformer.training import config_from_args, load_raw_splits, run_training

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "parallel_kjv_web_spa.tsv.gz"
HELD_OUT_BOOKS = ["Joshua", "Mark", "Hosea", "Galatians"]  # ~5.6% of the verses, Old and New Testament
# The book of a reference is everything before "<chapter>:<verse>": "Genesis 1:1", "I Samuel 3:10", "Song of
# Solomon 2:1" -> "Genesis", "I Samuel", "Song of Solomon"
BOOK_OF_REF = r"^(.*?\S)\s+\d+[:.]\d+\s*$"


def copy_baseline(options, seed: int) -> dict[str, float]:
    """BLEU / chrF of copying the source verse, on the same held-out verses the evaluation uses."""
    import sacrebleu

    valid = load_raw_splits(options, seed).validation
    hyps, refs = valid[options.source_column], valid[options.target_column]
    return {"bleu": sacrebleu.corpus_bleu(hyps, [refs]).score, "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
            "verses": len(valid)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], add_help=True)
    parser.add_argument("--model", default=None,
                        help="pre-trained checkpoint folder (model + tokenizer); default: the shipped scratchformer-small")
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--output-dir", default=str(REPO / "outputs" / "finetune-kjv-web"))
    parser.add_argument("--validation-books", nargs="+", default=HELD_OUT_BOOKS)
    opts, rest = parser.parse_known_args(argv)
    options, args = config_from_args([
        "--objective", "seq2seq", "--train-files", opts.data, "--source-column", "kjv", "--target-column", "web",
        "--group-column", "ref", "--group-pattern", BOOK_OF_REF, "--validation-groups", *opts.validation_books,
        "--model", opts.model or str(pretrained_path("small")), "--output-dir", opts.output_dir,
        "--max-steps", "1500", "--batch-size", "32", "--max-source-length", "96", "--max-target-length", "96",
        "--lr-schedule", "inverse_sqrt", "--learning-rate", "5e-4", "--warmup-steps", "100",
        "--eval-steps", "500", "--save-steps", "500", "--logging-steps", "25", "--max-eval-samples", "300",
        "--generation-max-length", "96", *rest,
    ])
    result = run_training(options, args)
    if "metrics" not in result:
        return 0
    baseline = copy_baseline(options, args.seed)
    metrics = result["metrics"]
    report = {"held_out_books": opts.validation_books, "verses": baseline["verses"],
              "fine_tuned": {"bleu": metrics["eval_bleu"], "chrf": metrics["eval_chrf"]},
              "copy_source": {"bleu": baseline["bleu"], "chrf": baseline["chrf"]}}
    print(json.dumps(report, indent=2))
    Path(args.output_dir, "kjv_to_web_scores.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
