"""Issue 18: the systemd user unit and the launchd agent docs/operations.md offers for ``ctxwatch watch``
are what they claim: the unit passes ``systemd-analyze verify`` (the real tool, when installed) with
its program pointing at this checkout's ``ctxwatch``, the agent is a well-formed property list, and
the command line of each parses as a ``ctxwatch watch`` invocation with the real parser."""

from __future__ import annotations

import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxwatch.cli import build_parser

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
PROGRAM = "%h/.local/bin/ctxwatch"


def block(language: str) -> str:
    (text,) = re.findall(rf"```{language}\n(.*?)```", OPERATIONS.read_text(encoding="utf-8"), re.S)
    return text


def exec_start(unit: str) -> list[str]:
    (line,) = [x for x in unit.splitlines() if x.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_the_systemd_unit_verifies_with_systemd_analyze(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    ctxwatch = Path(sys.executable).with_name("ctxwatch")
    unit = block("ini")
    assert exec_start(unit)[0] == PROGRAM
    path = tmp_path / "ctxwatch-watch.service"
    path.write_text(unit.replace(PROGRAM, str(ctxwatch)), encoding="utf-8")
    proc = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def test_the_launchd_agent_is_a_property_list_that_keeps_the_watcher_running() -> None:
    agent = plistlib.loads(block("xml").encode())
    assert agent["Label"] and agent["RunAtLoad"] is True and agent["KeepAlive"] is True
    assert agent["EnvironmentVariables"]["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("https://")
    assert Path(agent["ProgramArguments"][0]).name == "ctxwatch"


def test_both_command_lines_are_ctxwatch_watch_invocations() -> None:
    for argv in (exec_start(block("ini"))[1:], plistlib.loads(block("xml").encode())["ProgramArguments"][1:]):
        args = build_parser().parse_args(argv)
        assert args.command == "watch" and args.service == "payments" and not args.once
