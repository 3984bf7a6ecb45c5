"""``scratchformer train``: denoising pre-training or seq2seq training (:mod:`scratchformer.training`).

The command's options are read by ``transformers.HfArgumentParser`` from two dataclasses
(:class:`~scratchformer.training.options.TrainArgumentParser`), and building that parser imports transformers and
torch - seconds that ``scratchformer --help`` must not wait for. So the ``train`` subparser registered here does not
know the options: it takes the words after ``train`` verbatim, and the real parser is built only when the command
runs (``scratchformer train --help`` is answered by it, with every option and its default).

Taking the words verbatim needs one argparse setting: ``nargs=REMAINDER`` alone refuses a first word that looks
like an option (``--train-files``), so this subparser's ``prefix_chars`` is the NUL character, which no word of a
command line can contain: every word is then a plain value, and they all go to the REMAINDER list.
"""

from __future__ import annotations

import argparse

HELP = "train a model (denoising pre-training or seq2seq); works under torchrun / accelerate launch"
NO_OPTION_PREFIX = "\0"  # see the module docstring


def _train_command(args: argparse.Namespace) -> int:
    from ..training import config_from_args, run_training

    options, training_args = config_from_args(args.train_arguments)
    run_training(options, training_args)
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help=HELP, description=f"{HELP}. Run 'scratchformer train --help' for its options.",
        add_help=False, prefix_chars=NO_OPTION_PREFIX)
    parser.add_argument("train_arguments", nargs=argparse.REMAINDER, metavar="OPTIONS",
                        help="the options of scratchformer train (see scratchformer train --help)")
    parser.set_defaults(func=_train_command)
