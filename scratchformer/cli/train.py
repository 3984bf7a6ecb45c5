"""``scratchformer train``: denoising pre-training or seq2seq training (:mod:`scratchformer.training`)."""

from __future__ import annotations

import argparse
import dataclasses

from . import add_command


def _train_command(args: argparse.Namespace) -> int:
    from ..training.pipeline import TrainConfig, run_training

    run_training(TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}))
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    from ..training.pipeline import add_arguments

    parser = add_command(
        subparsers, "train",
        help="train a model (denoising pre-training or seq2seq); works under torchrun / accelerate launch")
    add_arguments(parser)
    parser.set_defaults(func=_train_command)
