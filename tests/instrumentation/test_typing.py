"""The package ships `py.typed` and type-checks with mypy under the project's configuration
(``[tool.mypy]`` in pyproject.toml) — run as a user of the dev extra runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_is_marked_typed():
    assert (ROOT / "instrumentation" / "ctxwatch" / "py.typed").is_file()


def test_mypy_passes_on_the_instrumentation_package():
    pytest.importorskip("mypy")
    done = subprocess.run([sys.executable, "-m", "mypy", "instrumentation/ctxwatch"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
