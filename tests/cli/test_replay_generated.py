"""`ctxwatch replay` on generated sessions: findings and exit codes (records 000 and 003), every
snapshot message format, both terminal renderings, and a multi-hundred-MB session streamed with
bounded memory (issue 7 §2: "Large files are streamed with bounded memory").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from replay_fixtures import ctxwatch, replay_json, write_claude_code, write_snapshots

from ctxwatch.model import Message, ToolCall, ToolResult
from ctxwatch.simulate.loops import absorption_loop, summarizing_loop
from ctxwatch.simulate.meter import judge


def _loop_file(tmp_path: Path, loop, fmt: str = "openai_chat") -> Path:
    """A messages_jsonl recording of a synthetic loop: P_1, Q_1, P_2, Q_2, ..."""
    return write_snapshots(tmp_path / f"{loop.family}-{fmt}.jsonl", [b for c in loop.cycles for b in (c.pre, c.post)],
                           fmt)


def test_record_000_a_compaction_that_orphans_tool_pairs_is_a_finding(tmp_path: Path) -> None:
    system = Message("system", "You are an operations agent.")
    history = [
        system, Message("user", "Check the two hosts."),
        Message("assistant", [ToolCall("call_a1", "ping", '{"host": "db-1"}')]),
        Message("tool", [ToolResult("call_a1", "db-1 is up")]),
        Message("assistant", [ToolCall("call_b2", "ping", '{"host": "db-2"}')]),
        Message("tool", [ToolResult("call_b2", "db-2 is down: ECONNREFUSED")]),
        Message("assistant", "db-2 is down."),
    ]
    # the compaction drops the first call but keeps its result, and drops the second result
    compacted = [system, Message("user", "Summary: two hosts checked."), history[3], history[4], history[6]]
    path = write_snapshots(tmp_path / "orphaning.jsonl", [history, compacted])
    code, doc, _ = replay_json(path)
    assert code == 1
    (m,) = doc["sessions"][0]["mutations"]
    assert m["orphans"] == {"tool_use": ["call_b2"], "tool_result": ["call_a1"]}
    (finding,) = [f for f in m["findings"] if f["enforced"]]
    assert finding["invariant"] == "tool_pairing" and "call_b2" in finding["message"]
    proc = ctxwatch("replay", path)
    assert proc.returncode == 1 and "[tool_pairing]" in proc.stdout and "(exit 1)" in proc.stdout


def test_record_003_a_contracting_loop_is_flagged_at_the_cycle_the_guard_would(tmp_path: Path) -> None:
    loop = absorption_loop(2)  # every cycle of this seed rewrites, so replay cycles are the loop's cycles
    path = _loop_file(tmp_path, loop)
    code, doc, _ = replay_json(path)
    assert code == 1
    session = doc["sessions"][0]
    in_process = judge([(c.pre, c.post) for c in loop.cycles])
    assert len(session["mutations"]) == len(in_process)
    for m, (_, figures, verdict) in zip(session["mutations"], in_process, strict=True):
        assert m["hash_distance"] == pytest.approx(verdict.d, abs=1e-6)
        assert (m["literals"]["before"], m["literals"]["lost"]) == (figures.literals_before, figures.literals_lost)
        assert sorted(figures.lost) == m["literals"]["lost_values"]
    entered = next(j.verdict for j in in_process if j.verdict.entered)
    assert session["verdict"]["state"] == "contracting"
    assert (session["verdict"]["entered_at"], session["verdict"]["onset"]) == (entered.cycle, entered.onset)
    assert [f["invariant"] for m in session["mutations"] for f in m["findings"] if f["enforced"]] == ["contraction"]


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic", "langchain"])
def test_healthy_summarizing_loop_in_every_message_format(tmp_path: Path, fmt: str) -> None:
    loop = summarizing_loop(1000)
    code, doc, err = replay_json(_loop_file(tmp_path, loop, fmt))
    assert (code, err) == (0, "")
    session = doc["sessions"][0]
    assert session["format"] == "messages_jsonl" and session["steps"] == 2 * len(loop.cycles)
    assert session["verdict"]["state"] == "healthy" and session["mutations"]


def test_literal_loss_is_listed_and_a_finding_only_when_asked(tmp_path: Path) -> None:
    before = [Message("user", "Deploy build 3f9a2c71 of ORD-4411 to /srv/app/releases/current today.")]
    after = [Message("user", "Deploy the build of the order to the current release today.")]
    path = write_snapshots(tmp_path / "paraphrase.jsonl", [before, after])
    code, doc, _ = replay_json(path)
    assert code == 0
    (m,) = doc["sessions"][0]["mutations"]
    assert set(m["literals"]["lost_values"]) >= {"3f9a2c71", "ORD-4411", "/srv/app/releases/current"}
    assert [(f["invariant"], f["enforced"]) for f in m["findings"]] == [("literal_loss", False)]
    code, doc, _ = replay_json(path, "--fail-on-literal-loss")
    assert code == 1 and doc["fail_on_literal_loss"] is True
    assert doc["sessions"][0]["mutations"][0]["findings"][0]["enforced"] is True


def test_table_with_rich_on_a_terminal_and_plain_without_rich(tmp_path: Path) -> None:
    path = _loop_file(tmp_path, absorption_loop(2))
    rich = ctxwatch("replay", path, env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "220"})
    assert rich.returncode == 1 and "\x1b[" in rich.stdout and "┃" in rich.stdout
    assert "CONTRACTING from cycle" in rich.stdout
    no_rich = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['rich'] = None\nfrom ctxwatch.cli import main\n"
         f"sys.exit(main(['replay', {str(path)!r}]))"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "FORCE_COLOR": "1"})
    assert no_rich.returncode == 1 and "\x1b[" not in no_rich.stdout and "Traceback" not in no_rich.stderr
    assert "CONTRACTING from cycle" in no_rich.stdout and "snapshot_diff" in no_rich.stdout


def test_a_multi_hundred_mb_session_is_streamed_with_bounded_memory(tmp_path: Path) -> None:
    """~260 MB of Claude Code JSONL (30,000 tool rounds, a compaction every 150): the replay's peak
    RSS (the kernel's high-water mark for that process) stays well under half the file."""
    path = write_claude_code(tmp_path / "long.jsonl", 30_000, compact_every=150, payload_chars=7_600)
    size = path.stat().st_size
    assert size > 200e6
    code, out, err, peak = _run_measured(["replay", str(path), "--json"], tmp_path, timeout=900)
    assert err == b"", err[-2000:]
    session = json.loads(out)["sessions"][0]
    assert code == 0 and session["records"] > 30_000 * 3
    assert len(session["mutations"]) == 30_000 // 150 and session["tool_pairs"]["paired"] == 30_000
    assert all(m["line"] and m["summary"] for m in session["mutations"])
    assert peak < min(size / 2, 200e6), f"peak RSS {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB file"


def _run_measured(args: list[str], tmp_path: Path, timeout: float) -> tuple[int, bytes, bytes, int]:
    """Exit code, stdout, stderr and peak RSS in bytes of `python -m ctxwatch.cli ARGS`. The peak is the
    child's own VmHWM, read as it exits (getrusage would also count this pytest process's RSS at the
    moment of spawning: Linux carries it over exec)."""
    hwm = tmp_path / "vmhwm"
    wrapper = ("import runpy, sys\nsys.argv = ['ctxwatch', *sys.argv[1:]]\ntry:\n"
               "    runpy.run_module('ctxwatch.cli', run_name='__main__', alter_sys=True)\nfinally:\n"
               f"    open({str(hwm)!r}, 'w').write(open('/proc/self/status').read())\n")
    proc = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True, timeout=timeout)
    status = dict(line.split(":", 1) for line in hwm.read_text().splitlines() if ":" in line)
    return proc.returncode, proc.stdout, proc.stderr, int(status["VmHWM"].split()[0]) * 1024
