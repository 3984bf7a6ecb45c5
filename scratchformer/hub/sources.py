"""What an export reads: the encoder-decoder and its tokenizer, from memory or from a folder.

A folder loads through the one loader, :func:`scratchformer.loading.load` (our own classes, never the folder's code;
safetensors only; every weight of the encoder-decoder present), and the tokenizer must fit the model
(:func:`scratchformer.loading.check_tokenizer_matches`). Every refusal is a :class:`HubError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import HubError, ScratchformerError
from ..loading import check_tokenizer_matches, load, load_model

EXPORTABLE = "ScratchformerForConditionalGeneration"


def model_and_tokenizer(model_or_folder: Any, tokenizer: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` to export, checked: the full encoder-decoder and a ``ScratchformerTokenizer`` that
    matches it. ``tokenizer`` (an instance or a folder) replaces the one in the model's folder."""
    source = Path(model_or_folder) if isinstance(model_or_folder, (str, os.PathLike)) else None
    if source is None:
        model = model_or_folder
    else:
        model, own_tokenizer = _load_folder(source, with_tokenizer=tokenizer is None)
        tokenizer = tokenizer if tokenizer is not None else own_tokenizer
    if type(model).__name__ != EXPORTABLE:
        raise HubError(f"export needs a {EXPORTABLE} (encoder + decoder + LM head), got {type(model).__name__}")
    tokenizer = _tokenizer(tokenizer)
    check_tokenizer_matches(tokenizer, model.config, error=HubError)
    return model, tokenizer


def _load_folder(source: Path, with_tokenizer: bool) -> tuple[Any, Any]:
    """The model of ``source`` in the dtype it was saved in, and its tokenizer when ``with_tokenizer``."""
    if not source.is_dir():
        raise HubError(f"{source} is not a folder: pass a folder saved with save_pretrained, or the model itself")
    has_tokenizer = (source / "tokenizer.json").is_file()
    if with_tokenizer and not has_tokenizer:
        raise HubError("no tokenizer: pass tokenizer= (--tokenizer) or put tokenizer.json in the model folder; the "
                       "exported folder must hold one for Hub users")
    try:
        if has_tokenizer:
            return load(source, task="seq2seq", dtype=None, strict=True)
        return load_model(source, task="seq2seq", dtype=None, strict=True), None
    except HubError:
        raise
    except ScratchformerError as error:
        raise HubError(f"cannot export {source}: {error}") from error


def _tokenizer(tokenizer: Any) -> Any:
    """A ``ScratchformerTokenizer`` from an instance or a folder; :class:`HubError` for anything else."""
    from ..models import ScratchformerTokenizer

    if tokenizer is None:
        raise HubError("no tokenizer: pass tokenizer= (--tokenizer); the exported folder must hold one for Hub users")
    if isinstance(tokenizer, (str, os.PathLike)):
        if not (Path(tokenizer) / "tokenizer.json").is_file():
            raise HubError(f"{tokenizer} has no tokenizer.json")
        try:
            return ScratchformerTokenizer.from_pretrained(tokenizer)
        except (OSError, ValueError) as error:
            raise HubError(f"cannot load the tokenizer in {tokenizer}: {error}") from error
    if type(tokenizer).__name__ != "ScratchformerTokenizer":
        raise HubError(f"the tokenizer must be a ScratchformerTokenizer (it writes a tokenizer_config.json that loads "
                       f"without code), got "
                       f"{type(tokenizer).__name__}")
    return tokenizer
