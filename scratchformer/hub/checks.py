"""Would this folder load for a Hub user? :func:`check_folder`, the last step of every export, lists every reason
it would not."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import HubError
from ..integrity import checksum_problems, safetensors_file_problem
from ..models.configuration_scratchformer import checkpoint_format_problem
from ..models.modeling_scratchformer import AUTO_MAP, PICKLE_SUFFIXES, safetensors_problem
from .layout import DROPPED_CODE_KEYS, REQUIRED_FILES


def check_folder(folder: str | os.PathLike, where: str | os.PathLike | None = None, checksums: bool = True) -> None:
    """Raise :class:`HubError` listing every reason ``folder`` would not load for a Hub user (docs/hub.md lists
    them); ``where`` names it, ``checksums=False`` skips re-hashing weights whose checksums were just written."""
    folder = Path(folder)
    problems = [f"{name} is missing" for name in REQUIRED_FILES if not (folder / name).is_file()]
    problems += [f"{path.relative_to(folder)} is a pickle-based file: only safetensors may be shipped"
                 for path in sorted(folder.rglob("*")) if path.suffix in PICKLE_SUFFIXES]
    if (config := _read_json(folder / "config.json", problems)) is not None:
        problems += _config_problems(config)
    if (tokenizer_config := _read_json(folder / "tokenizer_config.json", problems)) is not None:
        problems += _remote_code_problems("tokenizer_config.json", tokenizer_config, {})
    problems += [problem for path in sorted(folder.glob("*.safetensors")) if (problem := safetensors_file_problem(path))]
    weights = any((folder / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json"))
    if weights and (problem := safetensors_problem(folder)):
        problems.append(problem)  # weights that are not floats
    problems += checksum_problems(folder) if checksums else []  # checksums.sha256, when there is one
    if problems:
        raise HubError(f"{where or folder} would not load for Hub users: " + "; ".join(problems))


def _config_problems(config: dict) -> list[str]:
    problems = []
    if config.get("model_type") != "scratchformer":
        problems.append(f"config.json: model_type is {config.get('model_type')!r}, not 'scratchformer'")
    fmt = config.get("scratchformer_format", 1)
    if problem := checkpoint_format_problem(fmt):
        problems.append(f"config.json: scratchformer_format={fmt!r}: {problem}")
    return problems + _remote_code_problems("config.json", config, dict(AUTO_MAP))


def _remote_code_problems(name: str, data: dict, expected: dict) -> list[str]:
    """The ``auto_map`` of the JSON file ``name`` must be exactly ``expected``: each of our entries present, nothing
    else that names code (a foreign entry or ``custom_pipelines`` would run code we never reviewed)."""
    auto_map = data.get("auto_map") or {}
    if not isinstance(auto_map, dict):
        return [f"{name}: auto_map must be an object, got {auto_map!r}"]
    problems = [f"{name}: auto_map[{auto_class!r}] is {auto_map.get(auto_class)!r}, expected {target!r}"
                for auto_class, target in expected.items() if auto_map.get(auto_class) != target]
    if foreign := sorted(set(auto_map) - set(expected)):
        problems.append(f"{name}: auto_map has entries that name code we did not ship: {foreign}")
    if others := [key for key in DROPPED_CODE_KEYS if key in data]:
        problems.append(f"{name}: {', '.join(others)} names code we did not ship")
    return problems


def _read_json(path: Path, problems: list[str]) -> dict | None:
    """The JSON object in ``path``; ``None`` (and a problem unless the file is absent) if there is none."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        problems.append(f"{path.name} is not valid JSON: {error}")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name} must hold a JSON object")
        return None
    return data
