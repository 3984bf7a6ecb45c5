"""``scratchformer export MODEL OUT``: a folder that loads for someone who has only ``torch`` and ``transformers``,
staged beside ``OUT``, checksummed and checked before it is moved into place (docs/hub.md, "Export").
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import files
from ..errors import HubError
from ..integrity import write_checksums
from ..loading import SHIPPED_ALIASES, pretrained_path
from ..models.modeling_scratchformer import AUTO_MAP
from .card import CardOptions, load_scores, model_card
from .checks import check_folder
from .destination import check_destination, check_repo_id, move_into_place
from .layout import (
    DROPPED_CODE_KEYS,
    ONNX_FILE,
    README,
    SCORES_FILE,
    is_card_asset,
    require_onnx,
    sentence_transformers_files,
)
from .sources import check_source, model_and_tokenizer


def export(model_or_folder: Any, out_dir: str | os.PathLike, tokenizer: Any = None, *,
           scores: str | os.PathLike | Mapping | Sequence | None = None, repo_id: str | None = None,
           onnx: bool = False, dtype: Any = None, overwrite: bool = False, **card: Any) -> Path:
    """Write a self-contained, Hub-ready folder for a ``ScratchformerForConditionalGeneration`` (a model or a folder)
    and return it; a :class:`HubError` leaves ``out_dir`` as it was (arguments: docs/hub.md, "Export")."""
    options = CardOptions(**card)  # an unknown card option is a TypeError, as an unknown keyword always was
    if onnx:
        require_onnx()
    for name, path in (("model folder", model_or_folder), ("export folder", out_dir)):
        if isinstance(path, str) and not path.strip():  # Path("") is the working folder
            raise HubError(f"no {name} named {path!r}: give a folder")
    if isinstance(model_or_folder, str) and model_or_folder in SHIPPED_ALIASES:  # as load() reads them
        model_or_folder = str(pretrained_path("small"))
    out_dir = Path(out_dir)
    source = Path(model_or_folder) if isinstance(model_or_folder, (str, os.PathLike)) else None
    if repo_id is not None:
        check_repo_id(repo_id)
    if source is not None:
        check_source(source)
    with _file_system_errors(out_dir):
        check_destination(out_dir, source, overwrite)
    try:  # the staging folder goes there, and tokenizers writes only to paths that are text
        os.fsencode(out_dir.resolve().parent).decode("utf-8")
    except UnicodeDecodeError:
        raise HubError(f"cannot export to {out_dir}: the path of the folder it goes in is not valid UTF-8, and the "
                       "tokenizers library cannot write there; choose a folder whose path is") from None
    model, tokenizer, config_dtype = model_and_tokenizer(model_or_folder, tokenizer, dtype)
    results = _scores(scores, source)
    # a folder name that is not UTF-8 (caf\xe9) has no text to title a card with: its bytes are shown as U+FFFD
    model_name = options.model_name or (repo_id.split("/")[-1] if repo_id else
                                        os.fsencode(out_dir.resolve().name).decode("utf-8", "replace"))
    readme = model_card(model, results, repo_id=repo_id, source_card=_source_card(source), onnx=onnx,
                        **{**card, "model_name": model_name})
    with _file_system_errors(out_dir), files.signals_end_the_block():  # SIGTERM, SIGHUP: the staging folder goes
        _write(model, tokenizer, results, readme, out_dir, source=source, onnx=onnx, config_dtype=config_dtype,
               overwrite=overwrite)
    return out_dir


def _scores(scores: Any, source: Path | None) -> list[dict]:
    """The measured scores for the card: ``scores``, else the source folder's ``scores.json``, else none."""
    if scores is None and source is not None and (source / SCORES_FILE).is_file():
        scores = source / SCORES_FILE
    return load_scores(scores) if scores is not None else []


def _write(model: Any, tokenizer: Any, results: list[dict], card: Any, out_dir: Path, *, source: Path | None,
           onnx: bool, config_dtype: str, overwrite: bool) -> None:
    """Stage the export beside ``out_dir``, check it, move it into place; the staging folder never survives."""
    target = out_dir.resolve()  # "." or "x/..": the staging folder must be beside OUT, not inside it
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=target.parent))  # a short name, whatever OUT's length
    try:
        if source is not None:  # first, so that every file the export writes itself replaces a same-named asset
            for path in sorted(source.iterdir()):
                if path.is_file() and is_card_asset(path.name):
                    shutil.copyfile(path, staging / path.name)
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        _keep_only_our_code(staging / "config.json", dict(AUTO_MAP), dtype=config_dtype)
        _keep_only_our_code(staging / "tokenizer_config.json", None)
        write_checksums(staging)  # of the weights, the final config.json and the tokenizer: load() verifies them
        for name, content in sentence_transformers_files(model.config.d_model, tokenizer.model_max_length).items():
            (staging / name).parent.mkdir(exist_ok=True)
            (staging / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
        if onnx:
            from .onnx import export_onnx

            export_onnx(model, staging / ONNX_FILE)
        if results:
            (staging / SCORES_FILE).write_text(json.dumps({"results": results}, indent=2) + "\n", encoding="utf-8")
        card.save(staging / README)
        check_folder(staging, where=out_dir, checksums=False)  # write_checksums just hashed these weights
        folder_mode = 0o777 & ~files.current_umask()  # the umask's permissions: mkdtemp and safetensors make private
        for path in [staging, *staging.rglob("*")]:
            path.chmod(folder_mode if path.is_dir() else folder_mode & 0o666)
        check_destination(out_dir, source, overwrite)  # again: another export may have written OUT meanwhile
        move_into_place(staging, target, new=not target.exists())
    finally:  # also on SIGTERM and SIGHUP (files.signals_end_the_block) and Ctrl-C
        shutil.rmtree(staging, ignore_errors=True)


def _source_card(source: Path | None) -> str | None:
    """The text of the source folder's ``README.md``, kept (hand-written part and metadata) by the new card."""
    if source is None or not (source / README).is_file():
        return None
    try:
        return (source / README).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise HubError(f"cannot read the model card {source / README}: {error}") from error


def _keep_only_our_code(path: Path, auto_map: dict | None, dtype: str | None = None) -> None:
    """A saved JSON config with exactly our ``auto_map`` (``None``: none), no other key that names code, and
    ``dtype`` in place of the one ``save_pretrained`` wrote."""
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("auto_map", None)
    if auto_map is not None:
        data["auto_map"] = auto_map
    if dtype is not None:
        data["dtype"] = dtype
    for key in DROPPED_CODE_KEYS:
        data.pop(key, None)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def _file_system_errors(out_dir: Path) -> Any:
    """An ``OSError`` as a :class:`HubError` naming the export folder (a refused write as ``files.writing`` says it)."""
    return files.writing(out_dir, error=HubError, what=f"cannot export to {out_dir}: ", every_os_error=True)
