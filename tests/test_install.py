"""A real user's install: build the wheel, install it (not editable) into a clean venv, run the documented commands
from another folder.

Offline and quick: the wheel is built with this venv's setuptools (``pip wheel --no-build-isolation``, no download)
from a copy of the sources, and installed with ``--no-deps --no-index`` into a fresh venv made by :mod:`venv`,
without pip of its own (this venv's pip installs into it through ``--python``). The dependencies come from this venv:
a ``.pth`` file in the new venv appends this venv's site-packages to ``sys.path``. A ``.pth`` line only adds a folder,
it does not run the ``.pth`` files inside it, so this venv's editable scratchformer (a finder hook installed by its own
``.pth`` file) stays invisible: the new venv's own site-packages comes first and holds the wheel. The tests check
that ``import scratchformer`` resolves there and not to the repository.

That the dependency floors are right, and that a core install (no extras) works without the training packages, is
checked by scripts/floor_check.sh in a venv of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SENSE_SENTENCES = [("1", "the bank of the river was muddy", "sloping land"),
                   ("1", "we sat on the bank by the water", "sloping land"),
                   ("2", "the bank lent us money", "a financial institution"),
                   ("2", "he went to the bank to cash a cheque", "a financial institution")]

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict, timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (f"{' '.join(map(str, args))} exited {result.returncode}\n"
                                    f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def _build_wheel(tmp: Path) -> Path:
    """The wheel, built from a copy of the sources (the build writes build/ and *.egg-info next to them)."""
    source = tmp / "src"
    source.mkdir()
    for name in ("pyproject.toml", "LICENSE", "scratchformer_launcher.py"):
        shutil.copy2(REPO_ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "docs", source / "docs", ignore=ignore)
    shutil.copytree(REPO_ROOT / "scratchformer", source / "scratchformer", ignore=ignore)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
          "-w", str(tmp / "dist")], cwd=tmp, env=os.environ.copy())
    (wheel,) = (tmp / "dist").glob("scratchformer-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """A venv with the wheel installed; its interpreter, console script, environment and a working folder."""
    tmp = tmp_path_factory.mktemp("install")
    wheel = _build_wheel(tmp)
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
          str(wheel)], cwd=tmp, env=clean)
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    (site / "project_venv_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")
    work = tmp / "elsewhere"
    work.mkdir()
    env = dict(clean)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp / "hf_home"), MPLBACKEND="Agg",
               OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
               PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return dict(python=python, script=env_dir / "bin" / "scratchformer", env=env, work=work, venv=env_dir,
                wheel=wheel)


def test_the_wheel_carries_what_pypi_and_type_checkers_need(installed):
    import zipfile

    with zipfile.ZipFile(installed["wheel"]) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "scratchformer/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "scratchformer/pretrained/scratchformer-small/model.safetensors" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    for field in ("License-Expression: Apache-2.0", "Description-Content-Type: text/markdown",
                  "Project-URL: Source", "Classifier: Typing :: Typed", "Provides-Extra: train",
                  "Provides-Extra: reference"):
        assert field in metadata, field
    description = metadata.split("\n\n", 1)[1]
    assert description.startswith("# scratchformer") and "## Quick start" in description


def test_import_resolves_to_the_installed_wheel(installed):
    out = _run([str(installed["python"]), "-c", "import scratchformer, importlib.metadata as m; "
                "print(scratchformer.__file__); print(m.distribution('scratchformer')._path)"],
               cwd=installed["work"], env=installed["env"]).stdout.split()
    module_file, dist_info = (Path(p).resolve() for p in out)
    assert module_file.is_relative_to(installed["venv"].resolve()), module_file
    assert not module_file.is_relative_to(REPO_ROOT), module_file
    assert dist_info.is_relative_to(installed["venv"].resolve()), dist_info


def test_compare_writes_its_table_json_and_plots(installed):
    out = installed["work"] / "compare_out"
    result = _run([str(installed["script"]), "compare", "--output", str(out)], cwd=installed["work"],
                  env=installed["env"])
    written = sorted(p.name for p in out.iterdir())
    assert "compare.json" in written, written
    assert any(name.startswith("scratchformer-small") and name.endswith(".png") for name in written), written
    assert "cross sense" in result.stdout


def test_senses_on_a_tiny_tsv(installed):
    data = installed["work"] / "tiny.tsv"
    data.write_text("lemma\tpos\tsynset\tstart\tend\tsentence\tgloss\n" + "".join(
        f"bank\tn\t{synset}\t{text.index('bank')}\t{text.index('bank') + 4}\t{text}\t{gloss}\n"
        for synset, text, gloss in SENSE_SENTENCES))
    out = installed["work"] / "senses_out"
    _run([str(installed["script"]), "senses", "--data", str(data), "--model", "small", "--output", str(out)],
         cwd=installed["work"], env=installed["env"])
    assert (out / "senses.json").is_file()


def test_seq2seq_training_three_steps(installed):
    data = installed["work"] / "pairs.tsv"
    data.write_text("src\ttgt\n" + "".join(f"word {i} and {i + 1}\tmot {i} et {i + 1}\n" for i in range(40)))
    out = installed["work"] / "run"
    _run([str(installed["script"]), "train", "--objective", "seq2seq", "--train-files", str(data),
          "--source-column", "src", "--target-column", "tgt", "--output-dir", str(out), "--max-steps", "3",
          "--preset", "tiny", "--tokenizer-vocab-size", "300", "--batch-size", "4", "--eval-steps", "3",
          "--save-steps", "3", "--logging-steps", "1"],
         cwd=installed["work"], env=installed["env"])
    assert any(out.rglob("model.safetensors"))
    metrics = " ".join(path.read_text() for path in out.rglob("*.json"))
    assert "bleu" in metrics, "the evaluation at step 3 reported no BLEU (sacrebleu)"
