"""``scratchformer senses``: the word-sense evaluation (:mod:`scratchformer.analysis.senses`)."""

from __future__ import annotations

import argparse

from . import add_command, checked_models, model_help


def _senses_command(args: argparse.Namespace) -> int:
    models = checked_models(args.model, defaults=not args.model)  # before torch loads: a typo costs a second
    from ..analysis.senses import run_senses

    run_senses(args.data, models, output=args.output, pooling=args.pooling, group_by=args.group_by,
               batch_size=args.batch_size, max_groups=args.max_groups)
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "senses", help="word-sense evaluation: ROC-AUC and 1-NN accuracy of contextual "
                         "word vectors per layer")
    parser.add_argument("--data", required=True, help="TSV with columns lemma pos synset start end sentence gloss")
    parser.add_argument("--model", action="append", help=model_help(
        "a model to evaluate (default: small, and minilm where the [reference] extra is installed)"))
    parser.add_argument("--pooling", default="mean", choices=["mean", "first", "last"], help="sub-token pooling")
    parser.add_argument("--group-by", default="lemma", choices=("lemma", "lemma_pos"),
                        help="pair occurrences of the same lemma, or of the same lemma and part of speech")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    parser.add_argument("--max-groups", type=int, default=None, help="only the first N lemma groups (quick runs)")
    parser.add_argument("--output", default="outputs/senses", help="folder for senses.json and the PNG")
    parser.set_defaults(func=_senses_command)
