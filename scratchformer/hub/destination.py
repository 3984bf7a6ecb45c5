"""Where an export may go, decided before any file is touched: the output folder and the Hub repo id.

No export deletes or overwrites what it did not create. The rules for ``OUT`` (``scratchformer export MODEL OUT``):

- OUT is never MODEL, a folder that contains MODEL, or a folder inside MODEL, with or without ``--overwrite``: an
  export neither writes into its source nor replaces it (``export run/checkpoint-6 run --overwrite`` is refused).
- OUT may be new, or an empty folder.
- A non-empty OUT needs ``--overwrite`` and must look like an earlier export: the files every export writes are
  there (``config.json`` of a scratchformer model, ``README.md``, ``model.safetensors``, ...;
  :data:`~scratchformer.hub.layout.EXPORT_SIGNATURE`), it has no subfolder but those an export makes (``1_Pooling``,
  ``onnx``; a training run has ``checkpoint-*``) and no pickled file (a training checkpoint has ``optimizer.pt``).
  Overwriting replaces the files this export writes (:data:`~scratchformer.hub.layout.EXPORT_FILES` and the source's
  card assets), removes the files of :data:`~scratchformer.hub.layout.EXPORT_FILES` it does not write this time (a
  ``scores.json``, ``onnx/model.onnx``) and those earlier versions wrote (``tokenization_scratchformer.py``), and
  keeps every other file in OUT as it is.

A repo id is what huggingface_hub's validator accepts (``name`` or ``namespace/name``), checked before anything is
exported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import files
from ..errors import HubError
from ..models.modeling_scratchformer import PICKLE_SUFFIXES
from .layout import EXPORT_FILES, EXPORT_FOLDERS, EXPORT_SIGNATURE, RETIRED_FILES


def check_repo_id(repo_id: object) -> str:
    """``repo_id`` if huggingface_hub's ``validate_repo_id`` accepts it, else its words as a :class:`HubError`."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise HubError(f"invalid repo id {repo_id!r}: {error}") from None
    return repo_id


def check_destination(out_dir: Path, source: Path | None, overwrite: bool) -> None:
    """Raise :class:`HubError` unless ``out_dir`` may receive an export of ``source`` (see the module docstring).
    Reads the file system, changes nothing."""
    inputs = [] if source is None else [(f"the source folder {source}", source)]
    files.check_output_folder(out_dir, inputs, error=HubError, name=f"the export folder {out_dir}",
                              why="choose a folder apart from it")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    if not overwrite:
        raise HubError(f"{out_dir} is not empty: choose a new folder or pass overwrite=True (--overwrite)")
    problem = _earlier_export_problem(out_dir)
    if problem:
        raise HubError(f"--overwrite replaces only an earlier export, and {out_dir} does not look like one: "
                       f"{problem}. Choose a new folder (nothing was changed)")


def move_into_place(staging: Path, out_dir: Path) -> None:
    """Put the checked export in ``staging`` at ``out_dir``, which :func:`check_destination` accepted. A new folder is
    the staging folder renamed; into an existing one (empty, or an earlier export) the files are moved one by one,
    replacing only the files this export writes and removing only export files it does not write this time. The
    folder itself is never removed (it may be someone's working directory)."""
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    written = {path.relative_to(staging).as_posix() for path in staging.rglob("*") if path.is_file()}
    for name in sorted(written):
        (out_dir / name).parent.mkdir(exist_ok=True)
        os.replace(staging / name, out_dir / name)
    for name in sorted((EXPORT_FILES | RETIRED_FILES) - written):
        if (out_dir / name).is_file():
            (out_dir / name).unlink()  # a file of the earlier export that this one does not write
    for name in sorted(EXPORT_FOLDERS):
        if (out_dir / name).is_dir() and not any((out_dir / name).iterdir()):
            (out_dir / name).rmdir()


def _earlier_export_problem(folder: Path) -> str | None:
    """Why ``folder`` is not an earlier export, or ``None`` if it looks like one."""
    entries = sorted(folder.iterdir())
    if subfolders := [path.name for path in entries if path.is_dir() and path.name not in EXPORT_FOLDERS]:
        return f"it has subfolders ({', '.join(subfolders[:5])}), which an export never writes"
    if pickles := [path.name for path in folder.rglob("*") if path.suffix in PICKLE_SUFFIXES]:
        return f"it has pickled files ({', '.join(pickles[:5])}), which an export never writes"
    if missing := [name for name in EXPORT_SIGNATURE if not (folder / name).is_file()]:
        return f"it lacks {', '.join(missing)}"
    try:
        model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return "its config.json is not a readable JSON object"
    if model_type != "scratchformer":
        return f"its config.json is for model_type {model_type!r}, not 'scratchformer'"
    return None
