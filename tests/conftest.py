"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The development data folder ``../shared/data``; tests that need it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"development data not found at {SHARED_DATA}")
    return SHARED_DATA
