"""Integrity of a saved checkpoint (whole safetensors, checksums, a config that fits the weights' shapes), run by
:mod:`scratchformer.loading`; docs/hub.md, "What loading refuses", says what each check finds.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import ScratchformerError
from .files import write_text

# the integrity manifest written beside the weights: "<sha256>  <file name>" per line, as sha256sum writes it
CHECKSUMS = "checksums.sha256"
# what checksums.sha256 lists beside the weights, where present: what says what the weights and their ids mean
CHECKSUMMED_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                     "added_tokens.json")


def safetensors_file_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a complete safetensors file (cut short, grown, garbled), or ``None``, reading no tensor."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        return f"no {path.name}"
    try:
        with safe_open(str(path), framework="numpy") as handle:
            handle.keys()
    except (SafetensorError, OSError) as err:
        reason = str(err).removeprefix("Error while deserializing header: ")
        return f"{path.name} is truncated or corrupted ({reason})"
    return None


_CHECKSUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")  # sha256sum: "<hex>  name" (text) or "<hex> *name"


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in 1 MiB pieces (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for piece in iter(lambda: handle.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def write_checksums(folder: str | os.PathLike) -> Path:
    """Write :data:`CHECKSUMS` in ``folder`` once its files are final: a line for each weights file and each of
    :data:`CHECKSUMMED_FILES` there (an edited head count keeps the shapes: only a checksum tells)."""
    folder = Path(folder)
    paths = [*folder.glob("*.safetensors"), *(folder / name for name in CHECKSUMMED_FILES if (folder / name).is_file())]
    lines = [f"{file_sha256(path)}  {path.name}\n" for path in sorted(paths, key=lambda path: path.name)]
    return write_text(folder / CHECKSUMS, "".join(lines))


def checksum_problems(folder: str | os.PathLike) -> list[str]:
    """What :data:`CHECKSUMS` in ``folder`` (if any) says is wrong, a weights file it does not list included."""
    folder = Path(folder)
    manifest = folder / CHECKSUMS
    if not manifest.is_file():
        return []
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        return [f"{CHECKSUMS} cannot be read ({error})"]
    problems, listed = [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        match = _CHECKSUM_LINE.match(line)
        name = match.group(2) if match else ""
        if not match or name in (".", "..") or "/" in name or "\\" in name:
            problems.append(f"line {number} of {CHECKSUMS} is not '<sha256>  <file in this folder>': {line[:80]!r}")
            continue
        listed.add(name)
        # a listed file that is missing is not damaged: the loader (or the folder check) says what is missing
        if (folder / name).is_file() and (actual := file_sha256(folder / name)) != match.group(1).lower():
            problems.append(f"{name} is damaged: its sha256 is {actual[:16]}..., {CHECKSUMS} lists "
                            f"{match.group(1).lower()[:16]}...")
    unlisted = sorted(path.name for path in folder.glob("*.safetensors") if path.name not in listed)
    if unlisted:
        problems.append(f"{CHECKSUMS} lists no checksum for {', '.join(unlisted)}, so damage to it would go unnoticed")
    return problems


def check_checksums(folder: str | os.PathLike) -> None:
    """Raise :class:`ScratchformerError` naming each file that :data:`CHECKSUMS` in ``folder`` disagrees with."""
    if problems := checksum_problems(folder):
        raise ScratchformerError(
            f"the files in {folder} do not match their checksums ({'; '.join(problems)}): restore the file from a "
            f"backup, or download or export it again (if you changed it on purpose, write the checksums again with "
            f"scratchformer.integrity.write_checksums, or delete {CHECKSUMS})")


# ---------------------------------------------------------------------------------------------------------------
# What is published is finite
# ---------------------------------------------------------------------------------------------------------------


def check_finite(what: str, weights: Iterable[tuple[str, Any]] = (), metrics: Mapping[str, Any] | None = None, *,
                 error: type[ScratchformerError] = ScratchformerError, advice: str = "") -> None:
    """The publishing invariant: nothing is published whose own evaluation (an ``eval_*`` value of ``metrics``) is
    NaN or infinite, or that holds such a weight (``weights``: ``(name, tensor)`` pairs, as they are written). Raises
    ``error``, one line: ``"<what> is not published: <the first bad value>"`` and ``advice``. Every step that makes a
    model visible calls it first: each training checkpoint, a run's final model, ``export`` and the packaging script.
    A weight can be finite and its evaluation not: a learning rate of 1e7 leaves weights near 5e6, whose loss is NaN."""
    import torch

    bad = next((f"its {key} is {value}" for key, value in (metrics or {}).items()
                if key.startswith("eval_") and isinstance(value, (int, float)) and not math.isfinite(value)), None)
    for name, tensor in weights if bad is None else ():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = f"its weight {name} holds NaN or infinite values"
            break
    if bad is not None:
        raise error(f"{what} is not published: {bad}{advice}")


# ---------------------------------------------------------------------------------------------------------------
# A config.json that contradicts its weights
# ---------------------------------------------------------------------------------------------------------------

# config fields that size a tensor of a Scratchformer, tried in this order for a dimension that differs (a field
# named by the tensor comes first: see _size_field)
_SIZE_FIELDS = ("d_model", "vocab_size", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings",
                "num_labels")
_LAYER_INDEX = re.compile(r"(?:^|\.)(encoder|decoder)\.layers\.(\d+)\.")


def config_contradicts_weights(source: str, build: Any, config: Any = None, scratchformer: bool = False
                               ) -> str | None:
    """One line naming each field where the folder's ``config.json`` contradicts its weights' shapes, or ``None``;
    from the headers and ``build(config)`` on the ``meta`` device, before transformers' table and ``RuntimeError``."""
    import torch

    stored = _stored_shapes(source)
    if not stored:
        return None
    try:
        if config is None:
            from .models import ScratchformerConfig

            config = ScratchformerConfig.from_pretrained(source)
        with torch.device("meta"):
            built = build(config)
            expected = {key: tuple(value.shape) for key, value in built.state_dict().items()}
    except Exception:  # an invalid config, a class that cannot be built: from_pretrained says what is wrong
        return None
    found = _shape_disagreements(expected, stored, config, getattr(built, "base_model_prefix", ""))
    if scratchformer:
        found.update(_layer_count_disagreements(stored, config, found))
    if not found:
        return None
    return (f"the config.json of {source} contradicts its weights: " + "; ".join(found.values())
            + ". Use the config.json the weights were saved with, or fix these fields")


def _stored_shapes(source: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{tensor name: (shape, file name)}`` from the folder's safetensors headers; empty where none can be read."""
    from safetensors import safe_open

    folder = Path(source)
    if not folder.is_dir():
        return {}
    stored = {}
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy") as handle:
                for key in handle.keys():
                    stored[key] = (tuple(handle.get_slice(key).get_shape()), path.name)
        except Exception:  # SafetensorError, OSError: from_pretrained names the broken file
            return {}
    return stored


def _shape_disagreements(expected: dict[str, tuple[int, ...]], stored: dict[str, tuple[tuple[int, ...], str]],
                         config: Any, base: str) -> dict[str, str]:
    """``{field: "d_model is 64 in config.json but 32 in model.safetensors (...)"}``, one entry per field."""
    prefix, strip = _key_alignment(base, list(expected), stored)
    found: dict[str, str] = {}
    for key, shape in expected.items():
        stored_key = prefix + key[len(strip):] if key.startswith(strip) else None
        if stored_key not in stored or stored[stored_key][0] == shape:
            continue
        stored_shape, file_name = stored[stored_key]
        example = (f"{stored_key} has shape {list(stored_shape)} in {file_name}, config.json needs {list(shape)}")
        if len(stored_shape) != len(shape):
            found.setdefault(stored_key, example)
            continue
        for size, stored_size in zip(shape, stored_shape):
            if size != stored_size:
                field = _size_field(key, size, config)
                label = field or stored_key
                found.setdefault(label, f"{field} is {size} in config.json but {stored_size} in {file_name} "
                                        f"({example})" if field else example)
    return found


def _key_alignment(base: str, model_keys: list[str], stored: dict) -> tuple[str, str]:
    """``(prefix, strip)`` matching the most keys, where a model key ``strip + rest`` is stored as ``prefix + rest``
    (transformers' base-model prefix ``base`` added, removed or neither)."""
    candidates = [("", "")] + ([(base + ".", ""), ("", base + ".")] if base else [])

    def matches(candidate: tuple[str, str]) -> int:
        prefix, strip = candidate
        return sum(1 for key in model_keys if key.startswith(strip) and prefix + key[len(strip):] in stored)

    return max(candidates, key=matches)


def _size_field(key: str, size: int, config: Any) -> str | None:
    """The config field whose value ``size`` is, for a dimension of the tensor ``key``: the one its name points to
    first, then a Scratchformer's sizes, then any integer field."""
    side = "decoder" if "decoder" in key else "encoder"
    hinted = []
    if any(word in key for word in ("embed_tokens", "word_embeddings", "shared", "lm_head")):
        hinted.append("vocab_size")
    if any(word in key for word in ("fc1", "fc2", "feed_forward", "intermediate")):
        hinted += [f"{side}_ffn_dim", "intermediate_size"]
    if "position" in key:
        hinted.append("max_position_embeddings")
    others = sorted(name for name, value in config.to_dict().items() if isinstance(value, int)
                    and not isinstance(value, bool))
    for field in (*hinted, *_SIZE_FIELDS, "hidden_size", *others):
        if getattr(config, field, None) == size:
            return field
    return None


def _layer_count_disagreements(stored: dict[str, tuple[tuple[int, ...], str]], config: Any,
                               found: dict[str, str]) -> dict[str, str]:
    """``encoder_layers`` / ``decoder_layers`` against the layers stored (a side with none stored is not compared)."""
    counts: dict[str, int] = {}
    files: dict[str, str] = {}
    for key, (_, file_name) in stored.items():
        if match := _LAYER_INDEX.search(key):
            side, index = match.group(1), int(match.group(2))
            counts[side] = max(counts.get(side, 0), index + 1)
            files[side] = file_name
    problems = {}
    for side, count in counts.items():
        field = f"{side}_layers"
        configured = getattr(config, field, None)
        if configured is not None and configured != count and field not in found:
            problems[field] = f"{field} is {configured} in config.json but {files[side]} holds {count} {side} layers"
    return problems
