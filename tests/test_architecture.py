"""The package's layers (docs/architecture.md): imports only go down, and every module says what it is for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "scratchformer"
# layer -> the layers of ours it may import (besides itself)
ALLOWED = {
    "models": set(),
    "errors": set(),
    "loading": {"models", "errors", "tokenizer"},
    "tokenizer": {"models", "errors"},
    "training": {"models", "errors", "loading", "tokenizer"},
    "analysis": {"models", "errors", "loading", "tokenizer"},
    "hub": {"models", "errors", "loading", "tokenizer"},
    "cli": {"models", "errors", "loading", "tokenizer", "training", "analysis", "hub", "__init__"},
}


def _layer(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "pretrained" not in p.parts)


def _imported_layers(path: Path) -> set[str]:
    """The layers of ours that ``path`` imports (relative imports resolved against its package)."""
    package = path.relative_to(PACKAGE).parent.parts
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            target = (*base, *(node.module.split(".") if node.module else ()))
            if target:
                layers.add(target[0])
            else:  # "from .. import x": names of the top-level package
                layers.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("scratchformer"):
            parts = node.module.split(".")
            layers.add(parts[1] if len(parts) > 1 else "__init__")
    return layers


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path):
    layer = _layer(path)
    if layer in ("__init__", "__main__") or path.name == "__main__.py":
        return  # entry points (`import scratchformer`, `python -m ...`) may reach everything
    assert layer in ALLOWED, f"{path}: a new layer? add it to docs/architecture.md and ALLOWED"
    forbidden = _imported_layers(path) - ALLOWED[layer] - {layer, "__version__"}
    assert not forbidden, f"{path.relative_to(PACKAGE)} ({layer}) imports {sorted(forbidden)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_says_what_it_is_for(path):
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring and len(docstring.split()) >= 5, f"{path.relative_to(PACKAGE)} needs a module docstring"
