"""The package's layers (docs/architecture.md): imports only go down, and every module says what it is for."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "scratchformer"
# layer -> the layers of ours it may import (besides itself)
ALLOWED = {
    "models": set(),
    "errors": set(),
    "files": {"errors"},
    "integrity": {"models", "errors", "files"},
    "loading": {"models", "errors", "files", "integrity", "tokenizer"},
    "tokenizer": {"models", "errors", "files"},
    "training": {"models", "errors", "files", "integrity", "loading", "tokenizer"},
    "analysis": {"models", "errors", "files", "integrity", "loading", "tokenizer"},
    "hub": {"models", "errors", "files", "integrity", "loading", "tokenizer"},
    "cli": {"models", "errors", "files", "integrity", "loading", "tokenizer", "training", "analysis", "hub", "__init__"},
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


def test_the_paper_file_imports_only_torch_and_the_standard_library():
    """``models/paper_scratchformer.py`` is the Transformer of the paper, to read end to end: torch and the standard
    library only (no transformers, nothing of ours, not even its siblings)."""
    import sys

    path = PACKAGE / "models" / "paper_scratchformer.py"
    imported = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name} imports a sibling (from {'.' * node.level}{node.module or ''})"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= {"torch", *sys.stdlib_module_names}, sorted(imported)


# ----------------------------------------------------------------------------------------------------------------
# No import circles: result types sit below both the command that computes them and the renderer that draws them
# ----------------------------------------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("scratchformer", *(parts[:-1] if parts[-1] == "__init__" else parts)))


MODULES = {_module_name(p): p for p in _modules()}


def _import_nodes(body: list[ast.stmt], *, in_functions: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``body``: at module level (``if TYPE_CHECKING:`` and ``try:`` blocks included),
    and with ``in_functions`` also those inside functions and classes (imports deferred to the first call)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if in_functions:
                found += [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
        else:
            for block in ("body", "orelse", "finalbody", "handlers"):
                found += _import_nodes(getattr(node, block, None) or [], in_functions=in_functions)
    return found


def _imported_modules(path: Path, *, in_functions: bool = True) -> set[str]:
    """The modules of ours that ``path`` imports (``from .bank import Study`` -> ``scratchformer.analysis.bank``)."""
    name = _module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    imported = set()
    for node in _import_nodes(ast.parse(path.read_text()).body, in_functions=in_functions):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names if alias.name in MODULES)
            continue
        base = ".".join([*package[: len(package) - (node.level - 1)], *([node.module] if node.module else [])]) \
            if node.level else (node.module or "")
        for alias in node.names:  # "from . import x" imports the module x; "from .x import y" the module x
            module = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
            if module in MODULES:
                imported.add(module)
    return imported - {name}


def test_no_analysis_module_imports_the_bank_command():
    """``analysis/bank.py`` is the ``compare`` command; the renderers (plots, report) take its result types from
    ``analysis/results.py``. Only the CLI (``cli/compare.py``) imports bank, not even under ``TYPE_CHECKING``."""
    bank = "scratchformer.analysis.bank"
    importers = sorted(name for name, path in MODULES.items()
                       if name.startswith("scratchformer.analysis.") and bank in _imported_modules(path))
    assert importers == [], f"{importers} import {bank}: take the study's types from scratchformer.analysis.results"


def test_the_bank_study_types_are_still_importable_from_bank():
    from scratchformer.analysis import bank, results

    for name in ("Study", "StudySentence", "ModelStudy", "StudyVectors", "StudyRun", "LayerSummary", "PairScore"):
        assert getattr(bank, name) is getattr(results, name), name


def test_training_options_do_not_import_resume():
    """``--resume``'s constant (``LATEST``) lives with the options; ``training/resume.py`` imports the options,
    never the other way round."""
    options = MODULES["scratchformer.training.options"]
    assert "scratchformer.training.resume" not in _imported_modules(options)


def test_no_import_cycles():
    """No circle among the imports of the package: module level (``TYPE_CHECKING`` blocks count) and those deferred
    into a function alike, which only hide a circle until the first call (analysis geometry -> senses -> plots ->
    geometry, hub export <-> onnx came back that way)."""
    graph = {name: _imported_modules(path) for name, path in MODULES.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import cycle: " + " -> ".join([*trail[trail.index(name):], name]))
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_the_cycle_test_sees_imports_inside_functions():
    """``_imported_modules`` follows an import deferred into a function (``export`` imports ``onnx`` on first use)."""
    export = MODULES["scratchformer.hub.export"]
    assert "scratchformer.hub.onnx" in _imported_modules(export) - _imported_modules(export, in_functions=False)


# ----------------------------------------------------------------------------------------------------------------
# One place: each shared vocabulary and each file-system rule is written once, and the rest of the package uses it
# ----------------------------------------------------------------------------------------------------------------


def _literal_collections(path: Path) -> list[tuple[int, set[str]]]:
    """The strings of every literal tuple, list and set of ``path``, with its line."""
    return [(node.lineno, {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)})
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, (ast.Tuple, ast.List, ast.Set))]


def test_the_files_that_travel_with_a_checkpoint_are_listed_only_in_models():
    """``scratchformer.models.CODE_FILES`` is the list: export, folder checks and training's run files use it, so
    that a fifth file of the model core cannot be left out of one of them."""
    from scratchformer.models import CODE_FILES

    assert set(CODE_FILES) == {p.name for p in (PACKAGE / "models").glob("*_scratchformer.py")} - {
        "tokenization_scratchformer.py"}  # the tokenizer's code does not travel (a saved folder needs none)
    copies = [f"{path.relative_to(PACKAGE)}:{line}" for path in _modules() if "models" not in path.parts
              for line, strings in _literal_collections(path) if len(strings & set(CODE_FILES)) >= 2]
    assert copies == [], f"a literal list of the travelling files: {copies}; use scratchformer.models.CODE_FILES"


@pytest.mark.parametrize("probe", ["/proc", "/sys/", "sysconf", "cpu_count", "sched_getaffinity", "mem_get_info",
                                   "memory_reserved", "MemAvailable", "cgroup", "FLOPS", "SECONDS"])
def test_the_code_that_travels_with_the_weights_probes_nothing_of_the_machine(probe):
    """Hub users run the model core with trust_remote_code: it reads no system file, counts no CPU, asks no device
    for its memory and holds no time or speed constant. A long request is the caller's, as in transformers."""
    from scratchformer.models import CODE_FILES

    found = [name for name in CODE_FILES if probe in (PACKAGE / "models" / name).read_text()]
    assert found == [], f"{probe!r} in {found}"


def test_each_vocabulary_is_defined_once():
    """The dtypes weights are stored in, the model classes (derived from ``AUTO_MAP``) and the geometry files each
    have one definition; the CLI's copy of the dtypes (it may not import torch) is held equal to it."""
    from transformers import AutoConfig

    from scratchformer.cli.export import DTYPES as CLI_DTYPES
    from scratchformer.models import MODEL_CLASSES, SAVE_DTYPES
    from scratchformer.models.modeling_scratchformer import AUTO_MAP

    assert CLI_DTYPES == SAVE_DTYPES
    assert {auto.__name__: f"modeling_scratchformer.{cls.__name__}" for auto, cls in MODEL_CLASSES.items()} == {
        key: value for key, value in AUTO_MAP.items() if key != AutoConfig.__name__}
    mirror = PACKAGE / "cli" / "export.py"
    repeated = [f"{path.relative_to(PACKAGE)}:{line}" for path in _modules() if "models" not in path.parts
                and path != mirror for line, strings in _literal_collections(path) if len(strings & set(SAVE_DTYPES)) >= 2]
    assert repeated == [], f"the dtype names written again: {repeated}; use scratchformer.models.SAVE_DTYPES"
    written = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in _modules() if path.name != "geometry.py"
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Constant) and node.value in ("geometry.json", "geometry_words.csv")]
    assert written == [], f"geometry's file names written again: {written}; use analysis.geometry's constants"


def test_the_card_options_are_the_fields_of_one_dataclass():
    """``export``, ``push`` and ``model_card`` take the card options as ``**card`` and build one
    :class:`~scratchformer.hub.card.CardOptions`; the CLI's shared card arguments give only its fields."""
    import argparse
    import dataclasses

    from scratchformer.cli.export import card_options
    from scratchformer.hub.card import CardOptions

    class Unset(argparse.Namespace):
        def __getattr__(self, name):
            return None

    given = set(card_options(Unset())) - {"tokenizer", "scores", "onnx", "dtype"}  # export's own arguments
    assert given and given <= {field.name for field in dataclasses.fields(CardOptions)}
    with pytest.raises(TypeError, match="licence"):
        CardOptions(licence="mit")  # a misspelt option fails at once, before any model loads


def test_the_file_system_rules_are_called_from_files_only():
    """Turning a refusal of the file system into a StorageError (``files.writing``, ``files.storage_error``) and
    asking for permissions (``files.may``, ``files.check_output_folder``) live in ``files.py``; the rest of the
    package calls them, checkpoint saves included (they add to the message that the earlier checkpoints are
    intact)."""
    allowed = {"storage_error": {"files.py"}, "access": {"files.py"}}
    calls = [f"{path.relative_to(PACKAGE)}:{node.lineno} {name}" for path in _modules()
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
             for name in [getattr(node.func, "attr", getattr(node.func, "id", None))]  # files.x(...) or x(...)
             if name in allowed and str(path.relative_to(PACKAGE)) not in allowed[name]]
    assert calls == [], f"write through scratchformer.files instead: {calls}"


@pytest.mark.parametrize("rule, home", [
    ("MemAvailable", "files.py"),  # the memory available: one reader, cgroup-aware
    ("the training corpus is empty", "tokenizer/bpe.py"),  # both trainers: bpe.TrainingTexts
    ("special tokens plus the", "tokenizer/bpe.py"),  # both trainers: bpe.check_base_size
    ("not UTF-8 text", "analysis/sense_data.py"),  # the sense TSV and the geometry data: sense_data.utf8_lines
    ("no Chromium found", "analysis/report.py"),  # the screenshot and the page height: report.chromium_command
    ('"WORLD_SIZE"', "training/options.py"),  # the process counts: options.process_counts
])
def test_a_rule_merged_into_one_place_is_written_only_there(rule, home):
    """Rules that were written twice or more, and now once: a new copy of one fails here."""
    found = sorted(str(path.relative_to(PACKAGE)) for path in _modules() if rule in path.read_text())
    assert found == [home], f"{rule!r} is written in {found}: call the one in {home}"


def test_a_message_is_made_one_line_in_errors_only():
    """``errors.one_line`` joins a library's message of several lines and redacts it; the CLI prints every error
    through it, so a command that quotes a library cannot print two lines or a secret."""
    joined = [f"{path.relative_to(PACKAGE)}:{node.lineno}" for path in _modules() if path.name != "errors.py"
              for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
              and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
              and isinstance(node.func.value, ast.Constant) and node.func.value.value == " " and node.args
              and isinstance(node.args[0], ast.Call) and getattr(node.args[0].func, "attr", None) == "split"]
    assert joined == [], f"use scratchformer.errors.one_line: {joined}"


@pytest.mark.parametrize("package", ["", "training", "analysis", "hub", "tokenizer"])
def test_each_package_docstring_names_every_module(package):
    """A package's docstring is its map for a reader: a module added without a line there is one nobody finds."""
    folder = PACKAGE / package
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
    modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")}
    modules |= {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    prefix = ".".join(["scratchformer", package] if package else ["scratchformer"])
    missing = sorted(m for m in modules if not re.search(rf"{re.escape(prefix)}\.{m}\b", docstring))
    assert not missing, f"the docstring of {prefix} does not name {missing}"
