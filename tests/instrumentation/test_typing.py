"""Both packages ship `py.typed` and type-check with mypy under the project's configuration
(``[tool.mypy]`` in pyproject.toml) — run as a user of the dev extra runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("instrumentation/ctxwatch", "monitor/ctxwatch_monitor")


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_is_marked_typed(package: str) -> None:
    assert (ROOT / package / "py.typed").is_file()


def test_mypy_passes_on_both_packages() -> None:
    pytest.importorskip("mypy")
    done = subprocess.run([sys.executable, "-m", "mypy", *PACKAGES],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
