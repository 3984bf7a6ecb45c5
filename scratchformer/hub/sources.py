"""What an export reads: the encoder-decoder and its tokenizer, from memory or through the one loader, checked to fit
each other, in the dtype to store (the dtype rules: docs/hub.md, "Export").
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from ..errors import HubError, ScratchformerError
from ..integrity import check_finite
from ..loading import check_readable, check_tokenizer_matches, load, load_model
from ..models import SAVE_DTYPES as DTYPES  # the dtypes an export may store its weights in (--dtype)
from .layout import README, is_card_asset

EXPORTABLE = "ScratchformerForConditionalGeneration"
# safetensors' names of the floating-point dtypes
_SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def model_and_tokenizer(model_or_folder: Any, tokenizer: Any = None, dtype: Any = None) -> tuple[Any, Any, str]:
    """The model (in ``dtype``, on a copy), a matching ``ScratchformerTokenizer`` and the config dtype to export."""
    if dtype is not None and _dtype_name(dtype) not in DTYPES:
        raise HubError(f"cannot store the weights as {dtype!r}: choose one of {', '.join(DTYPES)}")
    dtype = _dtype_name(dtype)
    source = Path(model_or_folder) if isinstance(model_or_folder, (str, os.PathLike)) else None
    if source is None:
        model = model_or_folder
        config_dtype = _dtype_name(getattr(model, "dtype", None)) or "float32"
    else:
        model, own_tokenizer, config_dtype = _load_folder(source, with_tokenizer=tokenizer is None, dtype=dtype)
        tokenizer = tokenizer if tokenizer is not None else own_tokenizer
    if type(model).__name__ != EXPORTABLE:
        raise HubError(f"export needs a {EXPORTABLE} (encoder + decoder + LM head), got {type(model).__name__}")
    tokenizer = _tokenizer(tokenizer)
    check_tokenizer_matches(tokenizer, model.config, error=HubError)
    target = dtype or _dtype_name(model.dtype)
    check_finite_when_stored(model, target)
    if target != _dtype_name(model.dtype):  # a copy: a model passed in memory is never changed
        import torch

        model = copy.deepcopy(model).to(getattr(torch, target))
    return model, tokenizer, config_dtype


def check_finite_when_stored(model: Any, dtype: str) -> None:
    """The publishing check (:func:`~scratchformer.integrity.check_finite`) on the weights as they will be stored in
    ``dtype``; a weight finite now that the cast would overflow gets the dtype to choose instead."""
    import torch

    target = getattr(torch, dtype)
    check_finite("the export", model.state_dict().items(), error=HubError,
                 advice="; the model is broken (retrain it, or export an earlier checkpoint)")
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(cast := tensor.to(target)).all():
            largest = tensor.flatten()[tensor.abs().argmax()].item()
            raise HubError(f"cannot store the weights as {dtype}: {name} holds values up to {largest:.6g}, beyond "
                           f"{dtype}'s largest number {torch.finfo(target).max:.6g} "
                           f"({int((~torch.isfinite(cast)).sum())} values would become inf); store them as float32 "
                           "or bfloat16 (--dtype)")


def check_source(source: Path) -> None:
    """Before anything is read or written: :class:`HubError` unless ``source`` is a folder this user may read."""
    try:
        check_readable(source, also=lambda name: name == README or is_card_asset(name))
    except ScratchformerError as error:
        raise HubError(f"cannot export {source}: {error}") from None
    if not source.is_dir():  # said first, before an output folder "contains" a source that is not there
        raise HubError(f"{source} is not a folder: pass a folder saved with save_pretrained, or the model itself")


def stored_dtype(folder: str | os.PathLike) -> str | None:
    """The one dtype of the floating-point weights in ``folder``'s safetensors headers, else ``None``."""
    from safetensors import safe_open

    found = set()
    for path in sorted(Path(folder).glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt") as handle:
                found |= {handle.get_slice(key).get_dtype() for key in handle.keys()}
        except Exception:  # SafetensorError, OSError: the loader names the broken file
            return None
    floats = {_SAFETENSORS_DTYPES[name] for name in found if name in _SAFETENSORS_DTYPES}
    return floats.pop() if len(floats) == 1 else None


def _dtype_name(dtype: Any) -> str | None:
    """``torch.float16`` or ``"float16"`` -> ``"float16"``; ``None`` stays ``None``."""
    return None if dtype is None else str(dtype).removeprefix("torch.")


def _config_dtype(source: Path, stored: str | None) -> str:
    """The ``dtype`` of the source's ``config.json`` (``torch_dtype`` in older files), else the stored one."""
    try:
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}  # the loader says what is wrong with it
    named = (config.get("dtype") or config.get("torch_dtype")) if isinstance(config, dict) else None
    return named if isinstance(named, str) and named in (*DTYPES, "float64") else (stored or "float32")


def _load_folder(source: Path, with_tokenizer: bool, dtype: str | None) -> tuple[Any, Any, str]:
    """The model of ``source`` in its stored dtype (else ``dtype``), its tokenizer when ``with_tokenizer``, and the
    dtype its config names; the caller casts to ``dtype``."""
    has_tokenizer = with_tokenizer and (source / "tokenizer.json").is_file()
    stored = stored_dtype(source)
    load_as = stored or dtype  # as stored, so that the cast to dtype is checked (check_finite_when_stored)
    config_dtype = _config_dtype(source, stored)
    try:
        if has_tokenizer:
            return (*load(source, task="seq2seq", dtype=load_as, strict=True), config_dtype)
        return load_model(source, task="seq2seq", dtype=load_as, strict=True), None, config_dtype
    except ScratchformerError as error:
        raise HubError(f"cannot export {source}: {error}") from error


def _tokenizer(tokenizer: Any) -> Any:
    """A ``ScratchformerTokenizer`` from an instance or a folder; :class:`HubError` for anything else."""
    from ..models import ScratchformerTokenizer

    if tokenizer is None:
        raise HubError("no tokenizer: pass tokenizer= (--tokenizer) or put tokenizer.json in the model folder; the "
                       "exported folder must hold one for Hub users")
    if isinstance(tokenizer, (str, os.PathLike)):
        try:
            check_readable(tokenizer)  # a named pipe for tokenizer.json would block the read: one line instead
        except ScratchformerError as error:
            raise HubError(f"cannot read the tokenizer {tokenizer}: {error}") from None
        if not (Path(tokenizer) / "tokenizer.json").is_file():
            raise HubError(f"{tokenizer} has no tokenizer.json")
        try:
            return ScratchformerTokenizer.from_pretrained(tokenizer)
        except (OSError, ValueError) as error:
            raise HubError(f"cannot load the tokenizer in {tokenizer}: {error}") from error
    if type(tokenizer).__name__ != "ScratchformerTokenizer":
        raise HubError(f"the tokenizer must be a ScratchformerTokenizer (it writes a tokenizer_config.json that loads "
                       f"without code), got {type(tokenizer).__name__}")
    return tokenizer
