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
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

    from ..models import MODEL_CLASSES

    config = AutoConfig.for_model("scratchformer")
    print(f"  {'AutoConfig':<35} 'scratchformer' -> {type(config).__name__}")
    for auto_cls in MODEL_CLASSES:  # every model class registered, read back from transformers' own mapping
        print(f"  {auto_cls.__name__:<35} -> {auto_cls._model_mapping[type(config)].__name__}")
    tokenizer = TOKENIZER_MAPPING[type(config)]
    tokenizer = tokenizer[0] if isinstance(tokenizer, tuple) else tokenizer
    print(f"  {'AutoTokenizer':<35} -> {getattr(tokenizer, '__name__', tokenizer)}")
    return 0


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:
    add_command(subparsers, "info", help="print versions and the registered Hugging Face classes").set_defaults(
        func=_info)
