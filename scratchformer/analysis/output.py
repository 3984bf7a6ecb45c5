"""Where the analysis commands write: an output folder, checked before any model loads and made only when there is
something to write (a failed run leaves no empty folder behind), apart from what the command reads, and files that
are replaced whole or not at all (:mod:`scratchformer.files`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .. import files
from ..errors import ScratchformerError


def check_output_folder(output: str | Path, models: Iterable[str] = (), data: Iterable[str | Path] = (),
                        writes: Iterable[str] = (), option: str = "--output") -> Path:
    """Say now, creating nothing, why ``output`` could not become the output folder, also when it is a model's folder
    or a file it ``writes`` would replace one of its ``data`` files."""
    inputs = [(f"the folder of the model {name!r} ({folder})", folder) for name in models
              if (folder := _model_folder(name)) is not None]
    inputs += [(f"the data file {path}", path) for path in data]
    return files.check_output_folder(output, inputs, writes=writes, name=f"{option} {str(output)!r}",
                                     why="write the results somewhere else: a command never writes into a model folder "
                                     "or over the data it reads")


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
    folder = check_output_folder(path, option=option)
    with files.writing(folder, every_os_error=True, what=f"{option} {str(folder)!r}: cannot create the folder: "):
        folder.mkdir(parents=True, exist_ok=True)  # a full disk, a permission denied: said as such
    return folder
