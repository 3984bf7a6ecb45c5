"""``scratchformer compare``: the "bank" study (:mod:`scratchformer.analysis.bank`)."""

from __future__ import annotations

import argparse

from . import add_command


def _compare_command(args: argparse.Namespace) -> int:
    from ..analysis.bank import make_study, run_compare

    study = make_study(args.word, args.sentence, args.sense, args.context_word)
    run_compare(args.model, study=study, include_defaults=not args.no_defaults, layer=args.layer,
                output=args.output, plots=not args.no_plots)
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "compare",
        help="the 'bank' study: learned vs contextual embeddings, ours beside a real BERT (tables, JSON, plots)",
    )
    parser.add_argument("--model", action="append", help="add a model folder or Hub id (repeatable)")
    parser.add_argument("--no-defaults", action="store_true", help="only the --model models")
    parser.add_argument("--word", help="the word to follow (default: bank; needs --sentence)")
    parser.add_argument("--sentence", action="append", help="a sentence containing --word (repeat, at least 2)")
    parser.add_argument("--sense", action="append", help="sense label of each --sentence, in order (optional)")
    parser.add_argument("--context-word", action="append", help="word of the sentences to show in the projection")
    parser.add_argument("--layer", type=int, default=-1, help="contextual layer of the headline numbers: 1..N, or negative (-1 = last)")
    parser.add_argument("--output", default="compare_output", help="folder for compare.json and the plots")
    parser.add_argument("--no-plots", action="store_true", help="tables and JSON only")
    parser.set_defaults(func=_compare_command)
