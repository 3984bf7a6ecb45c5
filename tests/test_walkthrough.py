"""The walk-through notebook: its paired source, and a run top to bottom in a real Jupyter kernel.

``examples/walkthrough.py`` (jupytext "percent" format) is the source; ``examples/walkthrough.ipynb`` is generated
from it (``jupytext --to ipynb examples/walkthrough.py``, or ``jupytext --sync`` after editing either). The
notebook is executed with nbclient in a kernel of the Python running the tests (the project's venv), from
``examples/``, and any cell error fails the test. It needs ``nbformat``, ``nbclient``, ``ipykernel`` and
``jupytext`` (dev extras) and skips without them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
SOURCE = EXAMPLES / "walkthrough.py"
NOTEBOOK = EXAMPLES / "walkthrough.ipynb"
RUNTIME_BUDGET_S = 240  # measured: about a minute on 2 shared CPU cores


def _cells(notebook) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in notebook.cells]


def test_notebook_is_in_sync_with_its_source():
    jupytext = pytest.importorskip("jupytext", reason="jupytext is not installed (dev extras)")
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (dev extras)")
    from_source = jupytext.read(SOURCE)
    stored = nbformat.read(NOTEBOOK, as_version=4)
    assert _cells(stored) == _cells(from_source), (
        "examples/walkthrough.ipynb differs from examples/walkthrough.py: regenerate it with "
        "`jupytext --to ipynb examples/walkthrough.py` (or `jupytext --sync examples/walkthrough.py`)")
    assert all(not cell.get("outputs") for cell in stored.cells if cell.cell_type == "code"), \
        "keep the stored notebook without outputs (CI executes it)"


def _venv_kernel(folder: Path) -> str:
    """A kernel spec that starts this very interpreter (the project's venv), under ``folder``."""
    name = "scratchformer-walkthrough"
    spec = folder / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "scratchformer (tests)",
        "language": "python",
    }))
    return name


@pytest.mark.slow
def test_walkthrough_notebook_runs_top_to_bottom(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (dev extras)")
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (dev extras)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (dev extras)")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    kernel = _venv_kernel(tmp_path / "jupyter")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name=kernel, timeout=300,
                                     resources={"metadata": {"path": str(EXAMPLES)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on the first failing cell
    elapsed = time.perf_counter() - start
    print(f"walkthrough.ipynb ran in {elapsed:.0f} s")
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    images = [out for out in outputs if "image/png" in out.get("data", {})]
    assert len(images) >= 4  # the PE plot, one head, the attention figure, the projection (and the senses plot)
    text = "".join(out.get("text", "") for out in outputs)
    assert "senses separated:" in text and "match ScratchformerAttention" in text
    assert elapsed < RUNTIME_BUDGET_S, f"the walkthrough took {elapsed:.0f} s; keep it to about a minute"


def test_the_word_sense_cell_skips_cleanly_without_the_data(monkeypatch, capsys):
    """Where ../shared is absent the data cell prints one line and defines no scores (run here on its own)."""
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (dev extras)")
    (cell,) = [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if "def find_senses_data" in c.source]
    monkeypatch.setenv("SCRATCHFORMER_SENSES_DATA", str(REPO_ROOT / "no" / "such" / "file.tsv"))
    namespace = {"os": os, "Path": Path}
    exec(compile(cell.source, "walkthrough-senses-cell", "exec"), namespace)
    assert namespace["data"] is None and "reports" not in namespace
    assert capsys.readouterr().out.startswith("skipped: the word-sense data")
