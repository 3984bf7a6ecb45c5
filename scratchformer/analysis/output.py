"""Where the analysis commands write: an output folder, made (or refused) before any model loads, and JSON files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import ScratchformerError


def output_folder(path: str | Path, option: str = "--output") -> Path:
    """Create the folder ``path`` (with its parents) or say why it cannot be used; ``option`` names it."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ScratchformerError(f"{option} {str(folder)!r} is a file, not a folder; give a folder to write into")
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
