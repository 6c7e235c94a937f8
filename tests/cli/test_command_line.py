"""What a newcomer types first, run as they would (the installed `ctxwatch` script in a subprocess):
`--version`, a mistyped option named as such by the command it was given to, a rewrite module
next to its helpers, replay refusing what is not a session file (a symlink loop, a FIFO, a
device) with exit 2 and one line, and `import ctxwatch` exporting only its API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ctxwatch

CTXWATCH = Path(sys.executable).with_name("ctxwatch")


def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed `ctxwatch ARGS...`, stdout and stderr captured (bounded: none of these waits on input)."""
    return subprocess.run([str(CTXWATCH), *map(str, args)], capture_output=True, text=True, timeout=60, cwd=cwd)


def usage_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The `error:` line of an argparse usage error (exit 2, no traceback)."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if ": error: " in line]
    return line


def test_version_prints_the_package_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ctxwatch {ctxwatch.__version__}"


@pytest.mark.parametrize(("args", "error"), [
    (["--bogus"], "ctxwatch: error: unrecognized arguments: --bogus"),
    (["--bogus", "demo"], "ctxwatch: error: unrecognized arguments: --bogus"),
    (["demo", "--bogus"], "ctxwatch demo: error: unrecognized arguments: --bogus"),
    (["replay", "x.jsonl", "--bogus"], "ctxwatch replay: error: unrecognized arguments: --bogus"),
    (["check-idempotence", "m:f", "--sample", "s.json", "--bogus"],
     "ctxwatch check-idempotence: error: unrecognized arguments: --bogus"),
    ([], "ctxwatch: error: the following arguments are required: COMMAND"),
    (["bogus"], "ctxwatch: error: argument COMMAND: invalid choice: 'bogus'"),
])
def test_a_bad_command_line_is_named_by_the_command_it_was_given_to(args: list[str], error: str) -> None:
    assert usage_error(run(*args)).startswith(error)


def test_demo_usage_names_the_demo() -> None:
    proc = run("demo", "--bogus")
    assert proc.stderr.startswith("usage: ctxwatch demo "), proc.stderr


def test_check_idempotence_on_a_file_imports_its_siblings(tmp_path: Path) -> None:
    rewrites = tmp_path / "rewrites"
    rewrites.mkdir()
    (rewrites / "window.py").write_text("def last(messages, n):\n    return messages[:1] + messages[1:][-n:]\n")
    (rewrites / "compact.py").write_text(textwrap.dedent("""
        from window import last

        def keep_last_three(messages):
            return last(messages, 3)
    """))
    sample = tmp_path / "sample.json"
    sample.write_text(json.dumps([{"role": "system", "content": "Be brief."}]
                                 + [{"role": "user", "content": f"turn {i}"} for i in range(6)]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # neither the module's folder nor its parent is the working directory
    proc = run("check-idempotence", tmp_path / "rewrites" / "compact.py:keep_last_three", "--sample", sample,
               cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr
    assert "1 of 1 sample(s) stable under re-application (exit 0)" in proc.stdout
    relative = run("check-idempotence", "rewrites/compact.py:keep_last_three", "--sample", sample, cwd=tmp_path)
    assert relative.returncode == 0, relative.stderr


def refused(proc: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a replay that could not read its only file (exit 2)."""
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "1 unreadable (exit 2)" in proc.stdout
    return line


def test_replay_of_a_symlink_loop_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").symlink_to(tmp_path / "b.jsonl")
    (tmp_path / "b.jsonl").symlink_to(tmp_path / "a.jsonl")
    line = refused(run("replay", tmp_path / "a.jsonl"))
    assert line.startswith(f"ctxwatch replay: {tmp_path / 'a.jsonl'}: cannot be read (") and "symbolic links" in line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_replay_refuses_a_fifo_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    assert refused(run("replay", fifo)) == f"ctxwatch replay: {fifo}: is a FIFO, not a session file"
    check = run("check-idempotence", "json:loads", "--sample", fifo)
    assert check.returncode == 2
    assert check.stderr == f"ctxwatch check-idempotence: {fifo}: is a FIFO, not a session file\n"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_replay_refuses_a_device(device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device} here")
    assert refused(run("replay", device)) == f"ctxwatch replay: {device}: is a device, not a session file"


def test_the_package_exports_only_its_api() -> None:
    stray = {name for name, value in vars(ctxwatch).items()
             if not name.startswith("_") and name not in ctxwatch.__all__ and type(value).__name__ != "module"}
    assert stray == set()
    assert "PackageNotFoundError" not in dir(ctxwatch)
