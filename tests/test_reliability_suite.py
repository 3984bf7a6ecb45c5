"""The reliability suite (tests/conftest.py's RELIABILITY table): every test it names exists, and README.md says how
many cases it holds."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from conftest import RELIABILITY, RELIABILITY_CATEGORY, RELIABILITY_COLLECTED, REPO_ROOT, reliability_key


def _collected(config) -> list[str]:
    """The reliability cases: as this session collected them when it collected the whole suite (the CI run), else
    from ``pytest --collect-only`` in a subprocess."""
    suite = {REPO_ROOT.resolve(), (REPO_ROOT / "tests").resolve()}
    whole = bool(config.args) and {Path(arg).resolve() for arg in config.args} <= suite
    if whole and not (config.getoption("ignore") or config.getoption("ignore_glob") or config.getoption("deselect")):
        return list(RELIABILITY_COLLECTED)
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "reliability",
                           "-p", "no:cacheprovider", str(REPO_ROOT / "tests")], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_every_named_test_exists_and_the_readme_counts_are_current(request):
    cases = _collected(request.config)
    found = {reliability_key(case) for case in cases}
    named = {name for names in RELIABILITY.values() for name in names}
    assert named <= found, f"named in RELIABILITY but not collected: {sorted(named - found)}"
    readme = (REPO_ROOT / "README.md").read_text()
    match = re.search(r"reliability suite[^\n]*?: (\d+) cases in (\d+) categories", readme)
    assert match, "README.md must state the reliability suite's size"
    assert (int(match.group(1)), int(match.group(2))) == (len(cases), len(RELIABILITY)), (
        f"README says {match.group(1)} cases in {match.group(2)} categories; pytest collects {len(cases)} in "
        f"{len(RELIABILITY)}: update README.md")
    counted = Counter(RELIABILITY_CATEGORY[reliability_key(case)] for case in cases)
    stated = {category: int(re.search(rf"{re.escape(category)} \((\d+)\)", readme[match.end():]).group(1))
              for category in RELIABILITY if re.search(rf"{re.escape(category)} \(\d+\)", readme[match.end():])}
    assert stated == dict(counted), f"README's counts by category {stated}; pytest collects {dict(counted)}"


def test_an_entry_names_its_file_and_a_same_named_test_elsewhere_is_not_counted():
    """Membership is by file and function: the key of a parametrized case and of a same-named test in another file."""
    entry = next(iter(RELIABILITY_CATEGORY))
    file, name = entry.split("::")
    assert reliability_key(f"tests/{file}::{name}[case-1]") == entry
    assert reliability_key(f"tests/test_elsewhere.py::{name}") not in RELIABILITY_CATEGORY
    assert all(re.fullmatch(r"test_\w+\.py::test_\w+", key) for key in RELIABILITY_CATEGORY), (
        "every RELIABILITY entry is test_file.py::test_function")
