"""scratchformer: the "Attention is All You Need" encoder-decoder, from scratch, as a Hugging Face model.

Its layers, imports only going down (docs/architecture.md): scratchformer.models (the core that travels with a
checkpoint), scratchformer.errors, scratchformer.files, scratchformer.integrity, scratchformer.loading (the one
loader), scratchformer.tokenizer, scratchformer.training, scratchformer.analysis, scratchformer.hub and
scratchformer.cli (the command). ``import scratchformer`` registers the classes with transformers' ``Auto*``
factories, except under the command, which defers it (and torch) to keep ``--help`` fast.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_LAZY = {
    "ScratchformerConfig": ".models",
    "ScratchformerEncoderModel": ".models",
    "ScratchformerForConditionalGeneration": ".models",
    "ScratchformerForMaskedLM": ".models",
    "ScratchformerForSequenceClassification": ".models",
    "ScratchformerForTokenClassification": ".models",
    "ScratchformerModel": ".models",
    "ScratchformerPreTrainedModel": ".models",
    "ScratchformerTokenizer": ".models",
    "ScratchformerError": ".errors",
    "load": ".loading",
    "load_pretrained": ".loading",
    "pretrained_path": ".loading",
}

__all__ = [
    "ScratchformerConfig",
    "ScratchformerEncoderModel",
    "ScratchformerError",
    "ScratchformerForConditionalGeneration",
    "ScratchformerForMaskedLM",
    "ScratchformerForSequenceClassification",
    "ScratchformerForTokenClassification",
    "ScratchformerModel",
    "ScratchformerPreTrainedModel",
    "ScratchformerTokenizer",
    "__version__",
    "load",
    "load_pretrained",
    "pretrained_path",
    "register",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ below does this lazily
    from .errors import ScratchformerError
    from .loading import load, load_pretrained, pretrained_path
    from .models import (
        ScratchformerConfig,
        ScratchformerEncoderModel,
        ScratchformerForConditionalGeneration,
        ScratchformerForMaskedLM,
        ScratchformerForSequenceClassification,
        ScratchformerForTokenClassification,
        ScratchformerModel,
        ScratchformerPreTrainedModel,
        ScratchformerTokenizer,
    )


def register() -> None:
    """Register the Scratchformer classes with transformers' ``Auto*`` factories (idempotent)."""
    importlib.import_module(".models", __name__)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _started_as_the_command() -> bool:
    """Whether this import is ``python -m scratchformer`` (or ``scratchformer.cli``) locating its ``__main__``
    (``sys.argv[0]`` is ``"-m"`` only then), which defers the registration as the console script does."""
    argv = getattr(sys, "orig_argv", [])
    return sys.argv[:1] == ["-m"] and any(
        flag == "-m" and module in ("scratchformer", "scratchformer.cli") for flag, module in zip(argv, argv[1:]))


# the launcher is "scratchformer_launcher" under the console script, "__main__" under python -m scratchformer_launcher
if not (any(getattr(sys.modules.get(name), "DEFER_REGISTRATION", False) for name in ("scratchformer_launcher",
                                                                                      "__main__"))
        or _started_as_the_command()):
    register()
