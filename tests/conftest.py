"""Test-wide setup: makes `tests/support` importable and points at the shared corpus."""

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "support"))

from corpus_files import CORPUS  # noqa: E402 - importable once tests/support is on the path


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus of recorded agent sessions (read in place, never copied)."""
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    return CORPUS
