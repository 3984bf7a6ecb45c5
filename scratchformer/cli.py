"""The ``scratchformer`` command line.

Each feature module contributes its subcommand through an ``add_subcommand(subparsers)`` function listed in
``SUBCOMMAND_MODULES``; heavy imports happen inside the command functions so that ``scratchformer --help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Modules providing ``add_subcommand(subparsers)``, in the order they appear in ``--help``.
SUBCOMMAND_MODULES = [
    "scratchformer.cli",  # info (below)
    "scratchformer.compare", "scratchformer.senses",  # compare, senses (embedding extraction, issue 4)
    "scratchformer.hub",  # export, push (Hub-ready folder and upload, issue 6)
    "scratchformer.training",  # train (denoising / seq2seq, torchrun / accelerate launch, issue 5)
    "scratchformer.tokenizer_cli",  # train-tokenizer (BPE, issue 3)
]


def _info(args: argparse.Namespace) -> int:
    import platform

    import tokenizers
    import torch
    import transformers
    from transformers import AutoConfig

    import scratchformer

    print(f"scratchformer {scratchformer.__version__}")
    print(f"python        {platform.python_version()} ({platform.machine()})")
    print(f"torch         {torch.__version__} (cuda available: {torch.cuda.is_available()})")
    print(f"transformers  {transformers.__version__}")
    print(f"tokenizers    {tokenizers.__version__}")
    print("registered classes:")
    config = AutoConfig.for_model("scratchformer")
    print(f"  AutoConfig            'scratchformer' -> {type(config).__name__}")
    for auto_name in ("AutoModel", "AutoModelForSeq2SeqLM", "AutoTokenizer"):
        auto_cls = getattr(transformers, auto_name)
        target = auto_cls._model_mapping[type(config)] if auto_name != "AutoTokenizer" else None
        if auto_name == "AutoTokenizer":
            from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

            target = TOKENIZER_MAPPING[type(config)]
            target = target[0] if isinstance(target, tuple) else target
        print(f"  {auto_name:<21} -> {getattr(target, '__name__', target)}")
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    info = subparsers.add_parser("info", help="print versions and the registered Hugging Face classes")
    info.set_defaults(func=_info)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scratchformer",
        description="The 'Attention is All You Need' Transformer from scratch, as a Hugging Face model.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).add_subcommand(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
