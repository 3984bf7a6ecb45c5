"""Packaging rules that hold without building anything: dependency floors agree with the floor check's pins, the
PyPI page is self-contained, optional packages are asked for in one line, and inference never needs the [train]
extra. (tests/test_install.py builds and installs the wheel; scripts/floor_check.sh runs the floors.)"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from scratchformer.cli import check_optional_dependencies, main
from scratchformer.errors import MissingDependencyError, ScratchformerError, missing_modules, require

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

REPO_ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
TRAINING_ONLY = ("datasets", "accelerate", "sacrebleu")


def _floors(requirements: list[str]) -> dict[str, Version]:
    floors = {}
    for line in requirements:
        requirement = Requirement(line)
        lower = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        if lower:
            floors[requirement.name.lower().replace("_", "-")] = lower[0]
    return floors


def _pins() -> tuple[dict[str, Version], dict[str, Version]]:
    """The pins of scripts/floor-constraints.txt: (core, [train])."""
    core, train, current = {}, {}, None
    current = core
    for line in (REPO_ROOT / "scripts" / "floor-constraints.txt").read_text().splitlines():
        if line.startswith("# [train]"):
            current = train
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            current[name.lower().replace("_", "-")] = Version(version)
    return core, train


def test_floor_pins_are_the_floors_of_pyproject():
    core_pins, train_pins = _pins()
    core_floors = _floors(PYPROJECT["project"]["dependencies"])
    train_floors = _floors(PYPROJECT["project"]["optional-dependencies"]["train"])
    # torch is installed as the CPU build torch==2.13.0 by the floor check; its floor is transformers' own
    assert set(core_floors) - {"torch"} == set(core_pins), "a core dependency without a floor pin, or the reverse"
    assert set(train_floors) == set(train_pins), "a [train] dependency without a floor pin, or the reverse"
    for pins, floors in ((core_pins, core_floors), (train_pins, train_floors)):
        for name, pin in pins.items():
            assert pin == floors[name], f"{name}: floor check pins {pin}, pyproject.toml says >={floors[name]}"


def test_transformers_floor_is_at_least_the_measured_one():
    # 5.0: no AttentionInterface.get_interface; 5.1-5.3: a new config is not an encoder-decoder (see the
    # constraints file). Lowering this needs scripts/floor_check.sh to pass on the lower version first.
    assert _floors(PYPROJECT["project"]["dependencies"])["transformers"] >= Version("5.4")


def test_training_packages_are_not_core_dependencies():
    core = {Requirement(r).name for r in PYPROJECT["project"]["dependencies"]}
    assert not core & set(TRAINING_ONLY)
    assert "matplotlib" in core  # compare's plots are the main job


def test_readme_starts_with_the_two_commands_and_pypi_gets_its_own_page():
    readme = (REPO_ROOT / "README.md").read_text()
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first_block[0].startswith("bash scripts/main.sh") and first_block[1].startswith("bash scripts/test.sh")
    assert PYPROJECT["project"]["readme"]["file"] == "docs/pypi.md"


def test_pypi_page_has_only_absolute_links_and_the_quick_start_first():
    page = (REPO_ROOT / "docs" / "pypi.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", page) + re.findall(r'(?:src|href)="([^"]+)"', page)
    assert targets, "no links found: the pattern is stale"
    relative = [t for t in targets if not re.match(r"https?://", t)]
    assert not relative, f"relative links do not work on PyPI: {relative}"
    sections = re.findall(r"^## (.+)$", page, flags=re.M)
    assert sections[0] == "Quick start", sections
    assert "scripts/main.sh" not in page


def test_license_and_py_typed_ship():
    license_text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert (REPO_ROOT / "scratchformer" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["scratchformer"]


# ---------------------------------------------------------------------------------------------------------------
# Optional dependencies: one line naming the extra
# ---------------------------------------------------------------------------------------------------------------


def test_require_names_the_missing_packages_and_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)  # find_spec treats a None entry as not installed
    with pytest.raises(MissingDependencyError) as caught:
        require("sacrebleu", "json", extra="train", for_what="BLEU/chrF in seq2seq training")
    message = str(caught.value)
    assert message == ('BLEU/chrF in seq2seq training needs sacrebleu, which is not installed: '
                       'pip install "scratchformer[train]"')
    assert isinstance(caught.value, ScratchformerError) and isinstance(caught.value, ImportError)
    require("json", "os.path", extra="train", for_what="nothing")  # present: no error
    assert missing_modules("json", "no_such_module_at_all") == ["no_such_module_at_all"]


@pytest.mark.parametrize("argv, missing, named", [
    (["train", "--objective", "seq2seq", "--train-files", "x.tsv", "--output-dir", "{tmp}/run"], ["sacrebleu"],
     "sacrebleu"),
    (["train", "--objective", "seq2seq", "--train-files", "x.tsv", "--output-dir", "{tmp}/run"],
     ["datasets", "accelerate"], "datasets and accelerate"),
    (["train", "--train-files", "x.txt", "--output-dir", "{tmp}/run"], ["datasets"], "datasets"),
    (["train-tokenizer", "x.txt", "--output", "{tmp}/tok"], ["datasets"], "datasets"),
])
def test_a_training_command_without_its_extra_is_one_line(argv, missing, named, monkeypatch, capsys, tmp_path):
    for name in missing:
        monkeypatch.setitem(sys.modules, name, None)
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"scratchformer {argv[0]}: error: ") and f"needs {named}" in err[0]
    assert err[0].endswith('pip install "scratchformer[train]"')
    assert not list(tmp_path.iterdir()), "a refused command wrote files"


def test_denoising_does_not_need_sacrebleu(monkeypatch):
    monkeypatch.setitem(sys.modules, "sacrebleu", None)
    for words in (["--objective", "denoise"], [], ["--objective=seq2seq", "--objective", "denoise"]):
        check_optional_dependencies(argparse.Namespace(command="train", train_arguments=words))
    for words in (["--objective", "seq2seq"], ["--objective=seq2seq"]):
        with pytest.raises(MissingDependencyError, match="sacrebleu"):
            check_optional_dependencies(argparse.Namespace(command="train", train_arguments=words))


def test_train_help_needs_no_training_package(monkeypatch):
    for name in TRAINING_ONLY:
        monkeypatch.setitem(sys.modules, name, None)
    check_optional_dependencies(argparse.Namespace(command="train", train_arguments=["--objective", "seq2seq",
                                                                                     "--help"]))


def test_inference_never_imports_the_training_packages(tmp_path):
    """With datasets, accelerate and sacrebleu unimportable: the CLI parser (every subcommand's --help), loading,
    generate and the analysis and Hub modules all work. (scripts/floor_check.sh does the same on a real install.)"""
    code = textwrap.dedent(f"""
        import sys
        for name in {TRAINING_ONLY!r}:
            sys.modules[name] = None
        import contextlib, io
        from scratchformer.cli import build_parser
        parser = build_parser()
        for name, sub in parser._subparsers._group_actions[0].choices.items():
            sub.format_help()
        from scratchformer.cli import main
        with contextlib.redirect_stdout(io.StringIO()) as listed:
            try:
                main(["train", "--help"])  # builds the real (HfArgumentParser) parser of the training options
            except SystemExit as stop:
                assert stop.code in (0, None), stop.code
        assert "--objective" in listed.getvalue()
        import scratchformer.analysis.bank, scratchformer.analysis.senses, scratchformer.hub  # noqa: F401
        from scratchformer import load
        model, tokenizer = load("small", task="seq2seq")
        batch = tokenizer(["The bank of the river."], return_tensors="pt")
        assert model.generate(**batch, max_new_tokens=3, do_sample=False).shape[1] > 1
        leaked = sorted(n for n in {TRAINING_ONLY!r} if sys.modules.get(n) is not None)
        assert not leaked, leaked
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_every_extra_is_in_the_install_lists_of_the_readme_and_the_pypi_page():
    """What an error message tells users to install (``pip install "scratchformer[onnx]"``) is where they look."""
    extras = sorted(set(PYPROJECT["project"]["optional-dependencies"]) - {"dev"})
    readme_install = (REPO_ROOT / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    pypi_install = (REPO_ROOT / "docs" / "pypi.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "onnx" in extras
    for extra in extras:
        assert f'pip install ".[{extra}]"' in readme_install, extra
        assert f"| `scratchformer[{extra}]` |" in pypi_install, extra
        packages = [Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"][extra]]
        row = pypi_install.split(f"| `scratchformer[{extra}]` |", 1)[1].split("\n", 1)[0]
        assert all(name in row for name in packages), (extra, packages, row)
