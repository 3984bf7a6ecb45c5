"""Where the analysis commands write: an output folder, checked before any model loads and made only when there is
something to write (a failed run leaves no empty folder behind), and JSON files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ScratchformerError


def check_output_folder(path: str | Path, option: str = "--output") -> Path:
    """Say now, creating nothing, why ``path`` could not become the output folder: a file there, or a nearest
    existing parent that is not a writable folder. ``option`` names it in the message."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ScratchformerError(f"{option} {str(folder)!r} is a file, not a folder; give a folder to write into")
    parent = folder.absolute()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ScratchformerError(f"{option} {str(folder)!r}: {parent} is not a folder this user can write into")
    return folder


def output_folder(path: str | Path, option: str = "--output") -> Path:
    """Create the folder ``path`` (with its parents) or say why it cannot be used; ``option`` names it."""
    folder = check_output_folder(path, option)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ScratchformerError(f"{option} {str(folder)!r}: cannot create the folder ({error.strerror or error})"
                                 ) from error
    return folder


def write_json(path: Path, payload: Any) -> Path:
    """``payload`` as indented JSON (with a final newline)."""
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path
