"""Where the analysis commands write: an output folder, checked before any model loads and made only when there is
something to write (a failed run leaves no empty folder behind), apart from what the command reads, and files that
are replaced whole or not at all (:mod:`scratchformer.files`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import files
from ..errors import ScratchformerError


def check_output_folder(path: str | Path, option: str = "--output") -> Path:
    """Say now, creating nothing, why ``path`` could not become the output folder: a file there, or a nearest
    existing parent that is not a writable folder. ``option`` names it in the message."""
    folder = Path(path)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ScratchformerError(f"{option} {str(folder)!r} is a file, not a folder; give a folder to write into")
    parent = files.folder_of(folder)
    if not os.path.isdir(parent):
        raise ScratchformerError(f"{option} {str(folder)!r}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ScratchformerError(f"{option} {str(folder)!r}: {files.permission_denied(parent)}")
    return folder


def check_apart_from_inputs(output: str | Path, models: Iterable[str] = (), data: Iterable[str | Path] = (),
                            writes: Iterable[str] = (), option: str = "--output") -> None:
    """A command never writes into what it reads: the output folder may not be the folder of a model it reads
    (``small``'s own ``senses.json`` stays the shipped one, and no ``compare.json`` joins a model's files), and none
    of the files it writes there (``writes``, names) may be one of its ``data`` files. Paths are resolved (symbolic
    links, relative paths). A folder inside a model folder (``RUN/package/senses``, where packaging keeps its
    scores) is not the model's, and a folder that merely holds an input (``--data d/x.tsv --output d``) is fine:
    only the listed names are written there, never a file of the model or the data."""
    for name in models:
        folder = _model_folder(name)
        if folder is not None and files.overlap(output, folder) == "is":
            raise ScratchformerError(
                f"{option} {str(output)!r} is the folder of the model {name!r} ({folder}); write the results "
                "somewhere else: a command never writes into a model folder it reads")
    written = [Path(output) / name for name in writes]
    for path in data:
        clash = next((target for target in written if files.overlap(target, path) == "is"), None)
        if clash is not None:
            raise ScratchformerError(f"{option} {str(output)!r}: writing {clash.name} there would replace the data "
                                     f"file {path}; write the results somewhere else")


def _model_folder(name: str) -> Path | None:
    """The local folder a model name stands for (aliases resolved), or ``None`` (a Hub id, a random model)."""
    from ..loading import resolve

    try:
        path = Path(resolve(name))
    except ScratchformerError:  # an alias whose package is missing: the loader says so later
        return None
    return path if os.path.isdir(path) else None  # False, not PermissionError, for a folder it may not enter


def output_folder(path: str | Path, option: str = "--output") -> Path:
    """Create the folder ``path`` (with its parents) or say why it cannot be used; ``option`` names it."""
    folder = check_output_folder(path, option)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        failure = files.storage_error(error, folder)  # a full disk, a permission denied: said as such
        if failure is not None:
            raise failure from error
        raise ScratchformerError(f"{option} {str(folder)!r}: cannot create the folder ({error.strerror or error})"
                                 ) from error
    return folder


def write_json(path: Path, payload: Any) -> Path:
    """``payload`` as indented JSON (with a final newline), replacing ``path`` whole or not at all."""
    return files.write_json(path, payload)
