"""``scratchformer info``: versions and the classes registered with the transformers Auto factories."""

from __future__ import annotations

import argparse

from . import add_command


def _info(args: argparse.Namespace) -> int:
    import platform

    import tokenizers
    import torch
    import transformers
    from transformers import AutoConfig

    import scratchformer

    scratchformer.register()

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
    add_command(subparsers, "info", help="print versions and the registered Hugging Face classes").set_defaults(
        func=_info)
