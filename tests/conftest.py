"""Test-wide setup: makes `tests/support` importable, points at the shared corpus and picks the
Hypothesis profile.

Property tests run derandomized by default (the same examples on every run, so a suite that passed
passes again); `HYPOTHESIS_PROFILE=fuzz ./scripts/test -k <name>` explores fresh random examples
(2,000 where a test does not set its own count) to hunt for new failures."""

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "support"))

from corpus_files import CORPUS  # noqa: E402 - importable once tests/support is on the path

settings.register_profile("default", derandomize=True, print_blob=True)
settings.register_profile("fuzz", max_examples=2000, derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus of recorded agent sessions (read in place, never copied)."""
    if not CORPUS.is_dir():
        pytest.skip(f"the shared corpus is not at {CORPUS}")
    return CORPUS
