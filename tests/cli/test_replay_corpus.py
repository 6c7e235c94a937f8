"""Issue 7 §2 and issue 14 "Must show": `ctxwatch replay` run as a user runs it on every real
session of ../shared/corpus (read in place), checked against facts the test reads from the raw file.

Files are picked by what they hold (`corpus_files` classifies the raw content), never by name:
- Claude Code: every ``compact_boundary`` found at its line with its trigger, pre-compaction tokens
  and summary; the literal-like strings counted lost were present before and are absent from the
  summary (record 003); every tool pair found, no orphan (record 000).
- Codex: every ``compacted`` record, its replacement items, and the hash tags carried over.
- SWE-agent with per-step buffers: one buffer per step, the outputs elided in place, the shrinks.
- OpenHands: its pairs (and pending calls) and no mutation.
- The whole corpus in one run: what is expected of each format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus_files import (
    READ_FORMATS,
    claude_code_boundaries,
    claude_code_summary_after,
    claude_code_tool_ids,
    document,
    jsonl,
    kind_of,
    of_kind,
    openhands_tool_ids,
    session_files,
)
from replay_fixtures import ctxwatch, replay_json

from ctxwatch.literals import LiteralRegistry

CLAUDE_CODE_COMPACTED = [p for p in of_kind("claude_code") if claude_code_boundaries(p)]
SWE_AGENT_BUFFERS = [p for p in of_kind("swe_agent")
                     if all("messages" in step for step in document(p)["trajectory"])]


def name(path: Path) -> str:
    return path.name[:60]


def strings(value: object):
    """Every string in a decoded JSON value, and each object also as JSON text (tool inputs)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        yield json.dumps(value, ensure_ascii=False)
        yield json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


@pytest.mark.parametrize("path", CLAUDE_CODE_COMPACTED, ids=name)
def test_claude_code_compactions_at_their_boundaries_literals_lost_and_no_orphan(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    records = jsonl(path)
    assert (session["format"], session["records"], session["status"]) == ("claude_code", len(records), "ok")
    compactions = [m for m in session["mutations"] if m["source"] == "claude_code.compact_boundary"]
    boundaries = claude_code_boundaries(path)
    assert [m["line"] for m in compactions] == [line for line, _ in boundaries]
    for m, (line, record) in zip(compactions, boundaries, strict=True):
        meta = record.get("compactMetadata") or {}
        summary_line, summary = claude_code_summary_after(path, line)
        assert (m["kind"], m["where"]) == ("compact", f"line {line}")
        assert (m["trigger"], m["pre_tokens"]) == (meta.get("trigger"), meta.get("preTokens"))
        assert m["summary"] == {"line": summary_line, "chars": len(summary)}
        assert m["messages"]["after"] == 1 and m["messages"]["dropped"] == m["messages"]["before"]
        assert m["orphans"] == {"tool_use": [], "tool_result": []}
        assert m["contraction"]["state"] == "healthy"

    # every pair of the raw file found, no orphan in any buffer
    calls, results = claude_code_tool_ids(path)
    assert session["tool_pairs"]["paired"] == len(calls.keys() & results.keys())
    assert session["tool_pairs"]["orphans_in_buffers"] == []

    # the literal-like strings counted lost at the last compaction were present before its
    # boundary and are absent from its summary
    m, (line, _) = compactions[-1], boundaries[-1]
    registry = LiteralRegistry()
    before: set[str] = set()
    for n, record in records:
        if n < line and isinstance(record.get("message"), dict) and not record.get("isSidechain"):
            for text in strings(record["message"]):
                before |= registry.extract(text)
    after = registry.extract(claude_code_summary_after(path, line)[1])
    lost = set(m["literals"]["lost_values"])
    assert len(lost) == m["literals"]["lost"] or len(lost) == 50  # --json lists at most 50 by default
    assert lost <= before, sorted(lost - before)[:5]
    assert not lost & after


@pytest.mark.parametrize("path", CLAUDE_CODE_COMPACTED[:2], ids=name)
def test_claude_code_table_shows_the_row(path: Path) -> None:
    _, doc, _ = replay_json(path)
    m = next(m for m in doc["sessions"][0]["mutations"] if m["source"] == "claude_code.compact_boundary")
    proc = ctxwatch("replay", path)
    assert proc.returncode == 0 and proc.stderr == ""
    row = next(line for line in proc.stdout.splitlines() if f"line {m['line']} " in line)
    assert "claude_code.compact_boundary" in row and "compact" in row
    assert f"{m['literals']['lost']}/{m['literals']['before']}" in row
    assert f"{m['size']['before']:,} -> {m['size']['after']:,}" in row
    cycle = doc["sessions"][0]["mutations"].index(m) + 1
    assert (f"cycle {cycle}: summary of {m['summary']['chars']:,} chars at line {m['summary']['line']}, "
            f"trigger {m['trigger']}, {m['pre_tokens']:,} tokens before") in proc.stdout
    assert "findings: none" in proc.stdout and "(exit 0)" in proc.stdout


@pytest.mark.parametrize("path", [p for p in of_kind("codex") if any(
    r.get("type") == "compacted" for _, r in jsonl(p))], ids=name)
def test_codex_compacted_records_and_hash_tags_carried_over(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    assert session["format"] == "codex" and session["tool_pairs"]["orphans_in_buffers"] == []
    records = jsonl(path)
    calls = {r["payload"]["call_id"] for _, r in records if r.get("type") == "response_item"
             and r["payload"].get("type") in ("function_call", "custom_tool_call")}
    outputs = {r["payload"]["call_id"] for _, r in records if r.get("type") == "response_item"
               and r["payload"].get("type") in ("function_call_output", "custom_tool_call_output")}
    assert session["tool_pairs"]["paired"] == len(calls & outputs)
    compacted = [(n, r) for n, r in records if r.get("type") == "compacted"]
    assert [(m["kind"], m["source"], m["line"]) for m in session["mutations"]] == [
        ("compact", "codex.compacted", n) for n, _ in compacted]
    tag = re.compile(r"sha=([0-9a-f]{8})")
    for m, (line, record) in zip(session["mutations"], compacted, strict=True):
        replacement = record["payload"]["replacement_history"]
        assert m["details"] == {"replacement_items": len(replacement)} and m["messages"]["after"] == len(replacement)
        assert m["orphans"] == {"tool_use": [], "tool_result": []}
        earlier = [r["payload"] for n, r in records if n < line and r.get("type") == "response_item"]
        assert m["messages"]["kept"] == sum(item in earlier for item in replacement)
        carried = set(tag.findall(json.dumps(replacement))) & set(
            tag.findall("\n".join(json.dumps(r) for n, r in records if n < line)))
        assert not carried & set(m["literals"]["lost_values"]), "a hash tag carried over was counted lost"
        assert m["literals"]["before"] - m["literals"]["lost"] >= len(carried)


@pytest.mark.parametrize("path", SWE_AGENT_BUFFERS, ids=name)
def test_swe_agent_buffers_elided_outputs_and_shrinks(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    trajectory = document(path)["trajectory"]
    assert session["steps"] == len(trajectory) and session["format"] == "swe_agent"
    mutations = session["mutations"]
    marker = re.compile(r"^Old environment output: \(\d+ lines omitted\)")

    def elided(step: int) -> int:
        return sum(bool(marker.match(str(msg.get("content", "")))) for msg in trajectory[step]["messages"])

    def chars(step: int) -> int:
        return sum(len(str(msg.get("content", ""))) for msg in trajectory[step]["messages"])

    assert [m["step"] for m in mutations] == [s for s in range(1, len(trajectory)) if elided(s) > elided(s - 1)]
    for m in mutations:
        step = m["step"]
        assert (m["kind"], m["source"], m["where"]) == ("prune", "snapshot_diff", f"trajectory[{step}]")
        assert m["messages"]["elided"] == elided(step) - elided(step - 1)
        assert m["messages"]["dropped"] == 0 and m["orphans"] == {"tool_use": [], "tool_result": []}
    if mutations:  # the step whose raw buffer shrinks the most is the mutation that shrinks the most
        largest = max(mutations, key=lambda m: chars(m["step"] - 1) - chars(m["step"]))
        assert largest["size"]["after"] < largest["size"]["before"]
        assert largest == max(mutations, key=lambda m: m["size"]["before"] - m["size"]["after"])


@pytest.mark.parametrize("path", of_kind("openhands"), ids=name)
def test_openhands_pairs_and_no_mutation(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    actions, observations = openhands_tool_ids(path)
    assert session["mutations"] == [] and session["findings"] == 0
    assert session["tool_pairs"] == {"paired": len(actions & observations), "pending": len(actions - observations),
                                     "orphans_in_buffers": []}
    assert session["verdict"]["state"] == "healthy"
    proc = ctxwatch("replay", path)
    assert proc.returncode == 0
    assert (f"{len(actions & observations)} tool pairs ({len(actions - observations)} pending), 0 mutation(s)"
            in proc.stdout)
    assert "no context mutation" in proc.stdout


def test_whole_corpus_in_one_run(corpus: Path) -> None:
    files = session_files(corpus)
    kinds = [kind_of(p) for p in files]
    assert None not in kinds, [p.name for p, k in zip(files, kinds, strict=True) if k is None]
    code, doc, err = replay_json(*files)
    expected = ["ok" if k in READ_FORMATS else "unreadable" for k in kinds]  # a format not read: exit 2
    assert [s["path"] for s in doc["sessions"]] == [str(p) for p in files]
    assert [s["status"] for s in doc["sessions"]] == expected
    assert [s["format"] for s, status in zip(doc["sessions"], expected, strict=True) if status == "ok"] == [
        k for k, status in zip(kinds, expected, strict=True) if status == "ok"]
    unreadable = expected.count("unreadable")
    assert code == (2 if unreadable else 0) and len(err.splitlines()) == unreadable
    assert doc["schema"] == "ctxwatch.replay" and doc["version"] == 1
    assert doc["summary"] == {"sessions": len(files), "unreadable": unreadable, "with_findings": 0,
                              "mutations": sum(len(s["mutations"]) for s in doc["sessions"]), "exit_code": code}
    assert len({s["loop_id"] for s in doc["sessions"]}) == len(files)
