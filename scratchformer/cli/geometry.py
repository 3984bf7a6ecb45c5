"""``scratchformer geometry``: how contextual are the vectors, per layer (:mod:`scratchformer.analysis.geometry`)."""

from __future__ import annotations

import argparse
import os

from . import add_command, checked_models, model_help, seed

# the defaults of scratchformer.analysis.geometry_data, repeated here so that --help needs no import of torch
MIN_OCCURRENCES, MAX_WORDS, MAX_OCCURRENCES, SAMPLE_SENTENCES = 5, 2000, 50, 1000


def _geometry_command(args: argparse.Namespace) -> int:
    # OpenMP threads that sleep, not spin (benchmarks/geometry_speed.md); torch reads this when it loads
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    models = checked_models(args.model, defaults=not args.model)  # before torch loads: a typo costs a second
    from ..analysis.geometry_run import run_geometry

    run_geometry(args.data, models, output=args.output, min_occurrences=args.min_occurrences,
                 max_words=args.max_words, max_occurrences=args.max_occurrences,
                 sample_sentences=args.sample_sentences, max_sentences=args.max_sentences, pooling=args.pooling,
                 standardise=args.standardise, batch_size=args.batch_size, seed=args.seed, plots=not args.no_plots)
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "geometry", help="embedding geometry per layer (Ethayarajh 2019): "
                         "self-similarity, intra-sentence similarity, MEV, anisotropy baseline, raw and standardised")
    parser.add_argument("--data", required=True,
                        help="a word-sense TSV (the format senses reads) or plain text, one sentence a line (.gz ok)")
    parser.add_argument("--model", action="append",
                        help=model_help("a model to measure (default: small, and minilm where the [reference] extra "
                                        "is installed)"))
    parser.add_argument("--output", default="compare_output",
                        help="folder for geometry.json, geometry_words.csv and the PNGs; compare --html shows "
                        "the geometry.json it finds in its own folder")
    parser.add_argument("--min-occurrences", type=int, default=MIN_OCCURRENCES,
                        help="words seen in at least this many sentences are measured (at least 2)")
    parser.add_argument("--max-words", type=int, default=MAX_WORDS,
                        help="most words measured: a seeded sample of the eligible words beyond")
    parser.add_argument("--max-occurrences", type=int, default=MAX_OCCURRENCES,
                        help="occurrences kept per word (a seeded sample): self-similarity pairs and MEV use these")
    parser.add_argument("--sample-sentences", type=int, default=SAMPLE_SENTENCES,
                        help="sentences sampled for the anisotropy baseline (one word each) and the standardisation")
    parser.add_argument("--max-sentences", type=int, default=None, help="only the first N distinct sentences")
    parser.add_argument("--pooling", default="mean", choices=["mean", "first", "last"], help="sub-token pooling")
    parser.add_argument("--standardise", action=argparse.BooleanOptionalAction, default=True,
                        help="also report every measure after per-dimension standardisation (Timkey & van "
                        "Schijndel 2021)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass")
    parser.add_argument("--seed", type=seed, default=0, help="seed of every sample")
    parser.add_argument("--no-plots", action="store_true", help="JSON and CSV only")
    parser.set_defaults(func=_geometry_command)
