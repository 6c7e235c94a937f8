"""Review F7: Claude Code writes each sub-agent's conversation to
``~/.claude/projects/<project>/<session>/subagents/agent-<agentId>.jsonl``, every record ``isSidechain: true``
with the sub-agent's ``agentId`` and the *parent's* ``sessionId``. Such a file was empty to the reader
(``replay``: unreadable, exit 2; ``watch``: nothing sent, no note). It is now read as its own conversation
and is a loop of its own (``claude-code-<session id>-agent-<agentId>``), while sidechain records interleaved
in a session's own file (older versions) are still left out of the session's buffer.

The sub-agent transcripts are made from real corpus sessions (picked because they hold compactions), marked
the way Claude Code marks a sub-agent's records."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from corpus_files import claude_code_compactions, of_kind
from replay_fixtures import ctxwatch, replay_json

from ctxwatch.demo.monitor_process import MonitorClient

AGENT_ID = "a5d0a13"
PARENT = "0cf3db51-1c73-43bb-8d05-dc02739514a5"


def compacting_sessions(corpus: Path) -> list[Path]:
    picked = sorted((p for p in of_kind("claude_code", corpus) if claude_code_compactions(p)),
                    key=lambda p: p.stat().st_size)
    if len(picked) < 2:
        pytest.skip("fewer than two corpus Claude Code sessions with a compaction")
    return picked[:2]


def as_subagent(source: Path, target: Path) -> Path:
    """`source`'s records as a sub-agent's transcript of the session `PARENT`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8") as out:
        for line in lines:
            record = json.loads(line)
            if isinstance(record, dict) and "sessionId" in record:
                record.update(sessionId=PARENT, isSidechain=True, agentId=AGENT_ID)
            out.write(json.dumps(record) + "\n")
    return target


def mutations(doc: dict) -> list[tuple]:
    (session,) = doc["sessions"]
    return [(m["kind"], m["line"], m["size"]["before"], m["size"]["after"]) for m in session["mutations"]]


def test_a_subagent_transcript_is_audited_as_its_own_loop(corpus: Path, tmp_path: Path) -> None:
    source = compacting_sessions(corpus)[0]
    subagent = as_subagent(source, tmp_path / PARENT / "subagents" / f"agent-{AGENT_ID}.jsonl")
    code, original, _ = replay_json(source)
    sub_code, doc, err = replay_json(subagent)
    assert (sub_code, err) == (code, ""), err
    assert mutations(doc) == mutations(original) and len(mutations(doc)) >= len(claude_code_compactions(source))
    assert doc["sessions"][0]["loop_id"] == f"claude-code-{PARENT}-agent-{AGENT_ID}"


def test_sidechain_records_interleaved_in_a_session_file_are_left_out(corpus: Path, tmp_path: Path) -> None:
    """A session's own file with a sub-agent's turns written between its records reads as the session alone."""
    main, other = compacting_sessions(corpus)
    mixed = tmp_path / "mixed.jsonl"
    side = [json.loads(line) for line in other.read_text(encoding="utf-8").splitlines()[:40]]
    with mixed.open("w", encoding="utf-8") as out:
        for number, line in enumerate(main.read_text(encoding="utf-8").splitlines()):
            out.write(line + "\n")
            if number % 7 == 3 and side:  # after the file's first records, which are the main chain's
                record = side.pop(0)
                if isinstance(record, dict) and "sessionId" in record:
                    record.update(isSidechain=True, agentId=AGENT_ID)
                    out.write(json.dumps(record) + "\n")
    _, original, _ = replay_json(main)
    _, doc, _ = replay_json(mixed)
    assert [(k, s, a) for k, _, s, a in mutations(doc)] == [(k, s, a) for k, _, s, a in mutations(original)]
    assert doc["sessions"][0]["loop_id"] == original["sessions"][0]["loop_id"]


def test_watch_follows_a_session_and_its_subagent_as_two_loops(corpus: Path, tmp_path: Path,
                                                               monitor: MonitorClient) -> None:
    parent_source, sub_source = compacting_sessions(corpus)
    project = tmp_path / "home" / ".claude" / "projects" / "-home-dev-shop"
    project.mkdir(parents=True)
    parent = project / f"{PARENT}.jsonl"
    parent.write_bytes(parent_source.read_bytes())
    subagent = as_subagent(sub_source, project / PARENT / "subagents" / f"agent-{AGENT_ID}.jsonl")
    proc = ctxwatch("watch", "--once", "--otlp", monitor.url, "--state", tmp_path / "watch.json",
                    env={**os.environ, "HOME": str(tmp_path / "home")}, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    loops = {loop["loop_id"]: loop for loop in monitor.loops()}
    _, parent_doc, _ = replay_json(parent)
    _, sub_doc, _ = replay_json(subagent)
    for doc in (parent_doc, sub_doc):
        (session,) = doc["sessions"]
        cycles = sum(m["cycle"] is not None for m in session["mutations"])  # a rewind or microcompaction is none
        assert loops[session["loop_id"]]["cycles"] == cycles > 0
    assert set(loops) == {f"claude-code-{PARENT}", f"claude-code-{PARENT}-agent-{AGENT_ID}"}
