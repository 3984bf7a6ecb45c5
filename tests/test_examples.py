"""The scripts in examples/ run as a user would run them."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO_ROOT


def test_reverse_task_learns_to_99_percent_exact_match():
    """A from-scratch model that cannot learn to reverse short sequences is broken; ours gets >= 99% exact match
    on 500 held-out sequences (the script prints the training time; it is about a minute on 2 CPU cores)."""
    result = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "reverse_task.py")],
                            capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r"held-out exact match: ([\d.]+)%", result.stdout)
    assert match, result.stdout
    assert float(match.group(1)) >= 99.0, result.stdout
