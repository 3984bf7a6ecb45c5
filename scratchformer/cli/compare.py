"""``scratchformer compare``: the "bank" study (:mod:`scratchformer.analysis.bank`)."""

from __future__ import annotations

import argparse

from . import add_command, checked_models, model_help


def _compare_command(args: argparse.Namespace) -> int:
    models = checked_models(args.model, defaults=not args.no_defaults)  # before torch loads: a typo costs a second
    from ..analysis.bank import make_study, run_compare

    study = make_study(args.word, args.sentence, args.sense, args.context_word)
    run_compare(models, study=study, include_defaults=False, layer=args.layer,
                output=args.output, plots=not args.no_plots, html=args.html or args.screenshot,
                screenshot=args.screenshot)
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "compare", help="the 'bank' study: learned vs contextual embeddings, ours "
                         "beside a real BERT (tables, JSON, plots)")
    parser.add_argument("--model", action="append",
                        help=model_help("a model to add beside the defaults (small and minilm)"))
    parser.add_argument("--no-defaults", action="store_true", help="only the --model models")
    parser.add_argument("--word", help="the word to follow (default: bank; another word needs its --sentence options)")
    parser.add_argument("--sentence", action="append",
                        help="a sentence containing --word (repeat, at least 2; needs --word)")
    parser.add_argument("--sense", action="append", help="sense label of each --sentence, in order (optional)")
    parser.add_argument("--context-word", action="append", help="word of the sentences to show in the projection")
    parser.add_argument("--layer", type=int, default=-1, help="contextual layer of the headline numbers: 1..N, or negative (-1 = last)")
    parser.add_argument("--output", default="compare_output", help="folder for compare.json and the plots")
    parser.add_argument("--no-plots", action="store_true", help="tables and JSON only")
    parser.add_argument("--html", action="store_true",
                        help="also write index.html: one self-contained page with the tables, every plot and an "
                        "interactive attention view (implies the plots)")
    parser.add_argument("--screenshot", action="store_true",
                        help="also save index.png, a screenshot of index.html taken with a headless Chromium where "
                        "one is installed (implies --html)")
    parser.set_defaults(func=_compare_command)
