"""Test-wide setup: makes `tests/support` importable and points at the shared corpus."""

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "support"))

CORPUS = (TESTS.parent.parent / "shared" / "corpus").resolve()


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus of recorded agent sessions (read in place, never copied)."""
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    return CORPUS
