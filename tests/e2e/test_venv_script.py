"""scripts/venv.sh (sourced by scripts/test and scripts/demo) skips pip when nothing it depends on changed.

Run for real on a fresh folder: the shipped venv.sh copied verbatim beside a runner shaped like
scripts/test, and a small setuptools project, so creating `.venv` and installing it costs seconds and
leaves the project's own `.venv` alone. Whether pip ran is read from the installed distribution: an
install (editable or not) writes a new `*.dist-info` folder, so its inode changes on every reinstall
and stays the same when pip was skipped.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from mixin_stack import REPO

RUNNER = """#!/usr/bin/env bash
CTXWATCH_EXTRAS="$1"
source "$(dirname "$0")/venv.sh"
exec .venv/bin/python -c "import stampdemo; print(stampdemo.VALUE)"
"""
PYPROJECT = """[build-system]
requires = ["setuptools>=68", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "stampdemo"
version = "0.1.0"
dependencies = []

[project.optional-dependencies]
one = []
two = []

[tool.setuptools]
packages = ["stampdemo"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "venv.sh", tmp_path / "scripts" / "venv.sh")
    runner = tmp_path / "scripts" / "run"
    runner.write_text(RUNNER)
    runner.chmod(0o755)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "stampdemo").mkdir()
    (tmp_path / "stampdemo" / "__init__.py").write_text('VALUE = "first"\n')
    return tmp_path


def run(project: Path, extras: str = "one") -> subprocess.CompletedProcess:
    return subprocess.run([str(project / "scripts" / "run"), extras], capture_output=True, text=True,
                          timeout=600, cwd="/")


def installed(project: Path) -> Path:
    [dist_info] = project.glob(".venv/lib/python*/site-packages/stampdemo-*.dist-info")
    return dist_info


def inode(project: Path) -> int:
    return installed(project).stat().st_ino


def test_pip_runs_on_a_fresh_folder_and_again_only_when_pyproject_or_the_extras_change(project: Path) -> None:
    first = run(project)
    assert first.returncode == 0 and first.stdout == "first\n", first.stderr
    fresh = inode(project)

    again = run(project)
    assert again.returncode == 0 and inode(project) == fresh, "pip ran although nothing changed"

    (project / "stampdemo" / "__init__.py").write_text('VALUE = "edited"\n')
    edited = run(project)
    assert edited.stdout == "edited\n" and inode(project) == fresh, "a source change needs no reinstall"

    # another helper adds a dependency to pyproject.toml: the next run installs it
    with_dependency = PYPROJECT.replace("dependencies = []", 'dependencies = ["pip"]')
    (project / "pyproject.toml").write_text(with_dependency)
    added = run(project)
    assert added.returncode == 0 and inode(project) != fresh, added.stderr
    assert "Requires-Dist: pip" in (installed(project) / "METADATA").read_text()
    after_dependency = inode(project)

    other = run(project, "two")
    assert other.returncode == 0 and inode(project) != after_dependency, "other extras were not installed"
    both = inode(project)
    assert run(project, "one").returncode == 0 and run(project, "two").returncode == 0
    assert inode(project) == both, "each set of extras keeps its own stamp"

    # a failed install leaves no valid stamp: back at the last good pyproject.toml, pip runs again
    (project / "pyproject.toml").write_text(with_dependency + "this is not TOML\n")
    assert run(project).returncode != 0
    (project / "pyproject.toml").write_text(with_dependency)
    retried = run(project)
    assert retried.returncode == 0 and inode(project) != both, "the failed install left a valid stamp"
