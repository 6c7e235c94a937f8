"""Review F9: a Claude Code file cut between a ``compact_boundary`` record and its summary (a live session
mid-compaction, the summary not written yet) is replayed with the boundary pending, as ``ctxwatch watch`` keeps
it: no mutation and no span of it, the compaction reported as in progress at the end of the file. Its backfill
into a real monitor (subprocess, OTLP/HTTP on 127.0.0.1) followed by that of the completed file leaves the
monitor with the completed file's history, the compaction's figures included (an empty elision span sent for the
cut file took the compaction's place in the loop's sequence, and the completed file's could not correct it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_files import claude_code_compactions, of_kind
from replay_fixtures import ctxwatch, loop_detail, replay_json

from ctxwatch.demo.monitor_process import MonitorClient


def _cut_at_a_compaction(tmp_path: Path) -> tuple[Path, Path, int, dict]:
    """(the corpus file, a copy cut just after its first compaction's boundary record, the boundary's line, the
    boundary record), from the shortest Claude Code file of the corpus with a compaction of its own buffer."""
    files = sorted((p for p in of_kind("claude_code") if claude_code_compactions(p)), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip("no Claude Code file with a compaction in the corpus")
    full = files[0]
    line, boundary = claude_code_compactions(full)[0]
    cut = tmp_path / full.name
    cut.write_bytes(b"".join(full.read_bytes().splitlines(keepends=True)[:line]))
    return full, cut, line, boundary


def test_a_compaction_cut_before_its_summary_is_pending(tmp_path: Path) -> None:
    full, cut, line, boundary = _cut_at_a_compaction(tmp_path)
    _, whole, _ = replay_json(full)
    code, doc, err = replay_json(cut)
    assert code == 0 and err == ""
    (session,) = doc["sessions"]
    (completed,) = whole["sessions"]
    compacted = next(m for m in completed["mutations"] if m["line"] == line)
    assert [m["line"] for m in session["mutations"]] == [m["line"] for m in completed["mutations"] if m["line"] < line]
    meta = boundary["compactMetadata"]
    assert session["details"]["compaction_in_progress"] == {"line": line, "trigger": meta.get("trigger"),
                                                            "pre_tokens": meta.get("preTokens")}
    assert session["messages"] == compacted["messages"]["before"]  # the buffer at the end: the one before it
    assert "compaction_in_progress" not in completed["details"]
    table = ctxwatch("replay", cut)
    assert f"compaction in progress at end of file (boundary at line {line}" in table.stdout


def test_a_cut_backfill_leaves_the_completed_file_its_compaction(monitor: MonitorClient, tmp_path: Path) -> None:
    full, cut, line, _ = _cut_at_a_compaction(tmp_path)
    for path in (cut, full):  # the same session (loop), read while it compacted and once it had
        proc = ctxwatch("replay", path, "--otlp", monitor.url)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    _, doc, _ = replay_json(full)
    (session,) = doc["sessions"]
    detail = loop_detail(monitor.url, session["loop_id"])
    assert detail is not None
    rewrites = [c for c in detail["history"] if c["kind"] != "append"]
    assert [(c["kind"], c["cycle"]) for c in rewrites] == [(m["kind"], m["cycle"]) for m in session["mutations"]]
    for cycle, m in zip(rewrites, session["mutations"], strict=True):
        if m["cycle"] is not None:
            assert cycle["d"] == pytest.approx(m["hash_distance"], abs=1e-6)
    assert any(m["line"] == line and m["cycle"] is not None for m in session["mutations"])
