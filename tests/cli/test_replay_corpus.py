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

import corpus_files as raw
import pytest
from replay_fixtures import ctxwatch, replay_json

from ctxwatch.literals import LiteralRegistry

CLAUDE_CODE_COMPACTED = [p for p in raw.of_kind("claude_code") if raw.claude_code_compactions(p)]
SWE_AGENT_BUFFERS = [p for p in raw.of_kind("swe_agent")
                     if all("messages" in step for step in raw.document(p)["trajectory"])]


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


@pytest.mark.parametrize("path", raw.of_kind("claude_code"), ids=name)
def test_claude_code_every_mutation_against_the_raw_file(path: Path) -> None:
    """Compactions at their boundaries, microcompacts, rewinds (branches), the compaction copied from
    the parent session, the calls in flight when a compaction hit, the pairs: all read from the file."""
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    records = raw.jsonl(path)
    assert (session["format"], session["records"], session["status"]) == ("claude_code", records[-1][0], "ok")
    expected = sorted([(n, "claude_code.compact_boundary") for n, _ in raw.claude_code_compactions(path)]
                      + [(n, "claude_code.microcompact_boundary") for n, _ in raw.claude_code_microcompacts(path)]
                      + [(n, "claude_code.rewind") for n in raw.claude_code_branches(path)])
    assert [(m["line"], m["source"]) for m in session["mutations"]] == expected
    in_flight = raw.claude_code_in_flight(path)
    cycles = [m["cycle"] for m in session["mutations"] if m["cycle"] is not None]
    assert cycles == list(range(1, len(cycles) + 1))  # compactions only, numbered in order
    for m in session["mutations"]:
        assert m["where"] == f"line {m['line']}" and m["orphans"] == {"tool_use": [], "tool_result": []}
        assert m["findings"] == [f for f in m["findings"] if not f["enforced"]]
        if m["source"] == "claude_code.compact_boundary":  # a summary: a rewrite cycle of the alarm
            assert m["contraction"]["state"] == "healthy" and "no_cycle" not in m
        else:  # a microcompaction or a rewind writes nothing of its own: an elision, no cycle and no verdict
            assert (m["cycle"], m["hash_distance"], m["loss_rate"], m["contraction"], m["no_cycle"]) == (
                None, None, None, None, "elision")
            assert m["literals"]["lost"] == len(m["literals"]["lost_values"]) <= m["literals"]["before"]
        record = dict(records)[m["line"]]
        if m["source"] == "claude_code.compact_boundary":
            meta = record.get("compactMetadata") or {}
            summary_line, summary = raw.claude_code_summary_after(path, m["line"])
            assert m["kind"] == "compact"
            assert (m["trigger"], m["pre_tokens"]) == (meta.get("trigger"), meta.get("preTokens"))
            assert m["summary"] == {"line": summary_line, "chars": len(summary)}
            assert m["messages"]["after"] == 1 and m["messages"]["dropped"] == m["messages"]["before"]
            assert m["in_flight_dropped"] == [{"id": cid, "where": f"line {n}", "kind": "tool_use"}
                                              for cid, n in in_flight[m["line"]]]
        elif m["source"] == "claude_code.microcompact_boundary":
            meta = record["microcompactMetadata"]
            assert (m["kind"], m["trigger"], m["pre_tokens"]) == ("prune", meta.get("trigger"), meta.get("preTokens"))
            assert m["details"]["compacted_tool_ids"] == len(meta["compactedToolIds"])
            assert m["details"].get("tokens_saved") == meta.get("tokensSaved")
            _, results = raw.claude_code_tool_ids(path)
            assert m["details"]["cleared_results"] == sum(
                results.get(cid, m["line"]) < m["line"] for cid in meta["compactedToolIds"])
            assert m["messages"]["before"] == m["messages"]["after"] and m["messages"]["elided"] > 0
            assert m["size"]["after"] < m["size"]["before"]
        else:
            assert m["kind"] == "prune" and m["messages"]["after"] < m["messages"]["before"]

    inherited = raw.claude_code_inherited(path)
    if inherited:
        (line,) = inherited
        summary_line, summary = raw.claude_code_summary_after(path, line)
        assert session["details"]["inherited_compaction"]["line"] == line
        assert session["details"]["inherited_compaction"]["summary"] == {"line": summary_line, "chars": len(summary)}
    else:
        assert "inherited_compaction" not in session["details"]

    # every pair of the raw file found, no orphan in any buffer; the calls never answered are in
    # flight at a compaction or pending at the end
    calls, results = raw.claude_code_tool_ids(path)
    assert session["tool_pairs"]["paired"] == len(calls.keys() & results.keys())
    assert session["tool_pairs"]["orphans_in_buffers"] == [] and session["session_findings"] == []
    unanswered = len(calls.keys() - results.keys())
    assert unanswered == session["tool_pairs"]["pending"] + sum(len(m["in_flight_dropped"])
                                                                for m in session["mutations"])


@pytest.mark.parametrize("path", CLAUDE_CODE_COMPACTED, ids=name)
def test_claude_code_literals_lost_were_there_and_are_not_in_the_summary(path: Path) -> None:
    """The literal-like strings counted lost at the last compaction were present before its
    boundary and are absent from its summary (record 003)."""
    _, doc, _ = replay_json(path)
    m = [m for m in doc["sessions"][0]["mutations"] if m["source"] == "claude_code.compact_boundary"][-1]
    line = m["line"]
    registry = LiteralRegistry()
    before: set[str] = set()
    for n, record in raw.claude_code_message_records(path):
        if n < line:
            for text in strings(record["message"]):
                before |= registry.extract(text)
    after = registry.extract(raw.claude_code_summary_after(path, line)[1])
    lost = set(m["literals"]["lost_values"])
    assert len(lost) == m["literals"]["lost"]
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
    assert (f"cycle {m['cycle']}: summary of {m['summary']['chars']:,} chars at line {m['summary']['line']}, "
            f"trigger {m['trigger']}, {m['pre_tokens']:,} tokens before") in proc.stdout
    assert "findings: none" in proc.stdout and "(exit 0)" in proc.stdout


@pytest.mark.parametrize("path", [p for p in raw.of_kind("codex") if any(
    r.get("type") == "compacted" for _, r in raw.jsonl(p))], ids=name)
def test_codex_compacted_records_and_hash_tags_carried_over(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    assert session["format"] == "codex" and session["tool_pairs"]["orphans_in_buffers"] == []
    records = raw.jsonl(path)
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
        if any(item.get("type") == "compaction" and "encrypted_content" in item for item in replacement):
            # a remote compaction: its summary is encrypted, so what left view is hidden, r unknown, no cycle
            assert (m["cycle"], m["hash_distance"], m["loss_rate"], m["contraction"], m["no_cycle"]) == (
                None, None, None, None, "opaque")
            assert m["literals"]["lost"] is None and m["literals"]["lost_values"] == []
            assert 0 < m["literals"]["hidden"] <= m["literals"]["before"] - len(carried)
            assert [f["invariant"] for f in m["findings"]] == ["literal_loss"] and not m["findings"][0]["enforced"]
        else:
            assert m["cycle"] is not None and "no_cycle" not in m and "hidden" not in m["literals"]
            assert m["literals"]["before"] - m["literals"]["lost"] >= len(carried)


@pytest.mark.parametrize("path", SWE_AGENT_BUFFERS, ids=name)
def test_swe_agent_buffers_elided_outputs_and_shrinks(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    trajectory = raw.document(path)["trajectory"]
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


@pytest.mark.parametrize("path", raw.of_kind("openhands"), ids=name)
def test_openhands_pairs_and_no_mutation(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    actions, observations = raw.openhands_tool_ids(path)
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
    files = raw.session_files(corpus)
    kinds = [raw.kind_of(p) for p in files]
    assert None not in kinds, [p.name for p, k in zip(files, kinds, strict=True) if k is None]
    code, doc, err = replay_json(*files)
    expected = ["ok" if k in raw.READ_FORMATS else "unreadable" for k in kinds]  # a format not read: exit 2
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


@pytest.mark.parametrize("path", raw.of_kind("gemini_cli"), ids=name)
def test_gemini_cli_pairs_steps_and_no_mutation(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    messages = raw.document(path)["messages"]
    calls, answered = raw.gemini_tool_calls(path)
    assert (session["format"], session["status"]) == ("gemini_cli", "ok")
    assert session["steps"] == sum(m["type"] == "gemini" for m in messages)
    assert session["tool_pairs"] == {"paired": len(answered), "pending": len(calls.keys() - answered),
                                     "orphans_in_buffers": []}
    assert session["mutations"] == [] and session["findings"] == 0
