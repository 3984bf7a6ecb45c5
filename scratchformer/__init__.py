"""scratchformer: the "Attention is All You Need" encoder-decoder, from scratch, as a Hugging Face model.

The package is layered; imports only go down:

- :mod:`scratchformer.models` - the model core (config, model, tokenizer): the files that travel with a checkpoint;
- :mod:`scratchformer.errors` and :mod:`scratchformer.loading` - the one error type and the one loader;
- :mod:`scratchformer.tokenizer` - the from-scratch BPE and tokenizer training;
- :mod:`scratchformer.training`, :mod:`scratchformer.analysis`, :mod:`scratchformer.hub` - training, embedding
  analysis, Hub export and upload;
- :mod:`scratchformer.cli` - the ``scratchformer`` command, one module per subcommand.

``import scratchformer`` itself is instant: the names below load on first use (PEP 562), so that
``scratchformer --help`` does not wait for torch. The first use of a model class, the config, the tokenizer or the
loader imports :mod:`scratchformer.models`, which registers the classes with transformers' ``Auto*`` factories;
call :func:`register` to do that explicitly before using only the ``Auto*`` classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_LAZY = {
    "ScratchformerConfig": ".models",
    "ScratchformerEncoderModel": ".models",
    "ScratchformerForConditionalGeneration": ".models",
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
        ScratchformerForSequenceClassification,
        ScratchformerForTokenClassification,
        ScratchformerModel,
        ScratchformerPreTrainedModel,
        ScratchformerTokenizer,
    )


def register() -> None:
    """Register the Scratchformer classes with ``AutoConfig``, ``AutoModel``, ``AutoModelForSeq2SeqLM``,
    ``AutoModelForSequenceClassification``, ``AutoModelForTokenClassification`` and ``AutoTokenizer`` (idempotent). Touching any class of this package does it too."""
    importlib.import_module(".models", __name__)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
