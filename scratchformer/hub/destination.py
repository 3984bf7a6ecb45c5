"""Where an export may go, decided before any file is touched: no export deletes or overwrites what it did not create
(the rules: docs/hub.md, "Export").
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import files
from ..errors import HubError
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
    """Raise :class:`HubError` unless ``out_dir`` may receive an export of ``source``; it changes nothing."""
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


def move_into_place(staging: Path, out_dir: Path, new: bool) -> None:
    """Put the checked export in ``staging`` at ``out_dir``: a ``new`` one is ``staging`` renamed; into an existing
    one (perhaps a working directory) its files are moved, and the export files it does not write removed."""
    if new:
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
    """Why ``folder`` is not an earlier export (the files every export writes, our code among them, and no
    subfolder but an export's: a training run has ``checkpoint-*``), or ``None`` if it looks like one."""
    if subfolders := [path.name for path in sorted(folder.iterdir())
                      if path.is_dir() and path.name not in EXPORT_FOLDERS]:
        return f"it has subfolders ({', '.join(subfolders[:5])}), which an export never writes"
    if missing := [name for name in EXPORT_SIGNATURE if not (folder / name).is_file()]:
        return f"it lacks {', '.join(missing)}"
    return None
