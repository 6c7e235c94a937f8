"""Test-wide setup: makes `tests/support` importable and points at the shared corpus."""

import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "support"))

def _find_corpus() -> Path:
    """CTXWATCH_CORPUS, else ../shared/corpus beside the checkout, else the workplace's /work/shared/corpus."""
    candidates = [os.environ.get("CTXWATCH_CORPUS"), TESTS.parent.parent / "shared" / "corpus",
                  "/work/shared/corpus"]
    for candidate in filter(None, candidates):
        if Path(candidate).is_dir():
            return Path(candidate).resolve()
    return (TESTS.parent.parent / "shared" / "corpus").resolve()


CORPUS = _find_corpus()


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus of recorded agent sessions (read in place, never copied)."""
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    return CORPUS
