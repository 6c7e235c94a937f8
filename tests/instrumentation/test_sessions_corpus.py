"""Issue 2 "Must show", issue 7 §2 and issue 14: the session readers on every file of
../shared/corpus, picked by what they hold (`corpus_files` classifies the raw content).

All tool pairs found and no false orphan (Claude Code ``progress`` records carry tool ids but are
not results); every Claude Code compaction at its boundary record with its trigger, preTokens
and summary; every Codex ``compacted`` record and its replacement items; a SWE-agent trajectory's
per-step buffers, its elided outputs and its shrinks; OpenHands' pairs and pending calls, and no
mutation. Pairs are counted from `Message.call_ids` / `Message.result_ids` and checked with the
pairing invariant (record 000). The facts are read from the raw file by the test itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import corpus_files as raw
import pytest

from ctxwatch.invariants.pairing import index_pairs, strict_for
from ctxwatch.model import Message
from ctxwatch.sessions import Mutation, SessionReadError, Snapshot, detect_session_format, read_session


def name(path: Path) -> str:
    return path.name[:60]


def read_all(path: Path) -> tuple[list[Snapshot], list[Mutation]]:
    session = read_session(path)
    events = list(session)
    assert session.skipped == []
    snapshots = [e for e in events if isinstance(e, Snapshot)]
    mutations = [e for e in events if isinstance(e, Mutation)]
    assert [s.step for s in snapshots] == list(range(len(snapshots)))
    return snapshots, mutations


def all_messages(snapshots: list[Snapshot], mutations: list[Mutation]) -> list[Message]:
    """Every distinct message that was part of some buffer, first seen first."""
    seen: dict[tuple[int, str | None], Message] = {}
    for group in [s.messages for s in snapshots] + [m.before + m.after for m in mutations]:
        for m in group:
            seen.setdefault((m.digest, m.id), m)
    return list(seen.values())


def ids(messages: list[Message]) -> tuple[set[str], set[str]]:
    return ({c for m in messages for c in m.call_ids}, {r for m in messages for r in m.result_ids})


@pytest.mark.parametrize("path", raw.session_files(), ids=name)
def test_formats_are_detected(path: Path) -> None:
    expected = raw.kind_of(path)
    if expected in raw.READ_FORMATS:
        assert detect_session_format(path) == expected
        assert read_session(path).format == expected
    else:
        with pytest.raises(SessionReadError, match="unrecognised session format"):
            detect_session_format(path)


@pytest.mark.parametrize("path", raw.of_kind("claude_code"), ids=name)
def test_claude_code_pairs_and_compactions(path: Path) -> None:
    snapshots, mutations = read_all(path)
    calls, results = ids(all_messages(snapshots, mutations))
    raw_calls, raw_results = raw.claude_code_tool_ids(path)
    assert calls == raw_calls.keys() and results == raw_results.keys()
    progress_ids = set(re.findall(r'"toolUseID":\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    assert not (progress_ids - calls) & results, "a progress record was taken for a tool result"

    compactions = [m for m in mutations if m.source == "claude_code.compact_boundary"]
    boundaries = raw.claude_code_compactions(path)
    assert [m.line for m in compactions] == [line for line, _ in boundaries]
    assert read_session(path).facts == {}  # facts are gathered while reading
    session = read_session(path)
    list(session)
    assert ("inherited_compaction" in session.facts) == bool(raw.claude_code_inherited(path))
    for compaction, (line, record) in zip(compactions, boundaries, strict=True):
        meta = record.get("compactMetadata") or {}
        summary_line, summary = raw.claude_code_summary_after(path, line)
        assert compaction.kind == "compact"
        assert (compaction.trigger, compaction.pre_tokens) == (meta.get("trigger"), meta.get("preTokens"))
        assert compaction.summary_line == summary_line
        assert compaction.summary is not None and compaction.summary.text == summary
        assert compaction.after == (compaction.summary,)
    # the assistant turns were merged: several tool_use blocks of one message.id in one message
    if len(raw_calls) > len({line for line in raw_calls.values()}):
        assert max(len(m.call_ids) for m in all_messages(snapshots, mutations)) > 1
    assert snapshots[-1].final and snapshots[-1].line == raw.jsonl(path)[-1][0]
    assert all(not index_pairs(s.messages).orphan_results for s in snapshots)


def test_claude_code_synthetic_rewind_then_compaction(corpus: Path) -> None:
    """A hand-written edge case (no sessionId-linked tool ids): a rewind (two branches) then a compaction."""
    (path,) = [p for p in raw.of_kind("claude_code", corpus) if p.name.endswith(".SYNTHETIC.jsonl")]
    snapshots, mutations = read_all(path)
    rewind, compaction = mutations
    assert (rewind.source, rewind.kind, rewind.line) == ("claude_code.rewind", "prune", 5)
    assert [m.text for m in rewind.before] == ["Start", "Ready", "First attempt", "First answer"]
    assert [m.text for m in rewind.after] == ["Start", "Ready"]
    assert (compaction.line, compaction.trigger, compaction.pre_tokens, compaction.summary_line) == (
        9, "auto", 150000, 10)
    assert [m.text for m in compaction.before] == ["Start", "Ready", "Second attempt", "Second answer",
                                                   "Keep going", "Kept going"]
    assert snapshots[-1].final and snapshots[-1].messages[-1].text == "Final answer"


@pytest.mark.parametrize("path", raw.of_kind("codex"), ids=name)
def test_codex_pairs_and_compacted_records(path: Path) -> None:
    snapshots, mutations = read_all(path)
    calls, results = ids(all_messages(snapshots, mutations))
    records = raw.jsonl(path)
    raw_calls = {r["payload"]["call_id"] for _, r in records if r.get("type") == "response_item"
                 and r["payload"].get("type") in ("function_call", "custom_tool_call")}
    assert calls == raw_calls and calls == results
    compacted = [(n, r) for n, r in records if r.get("type") == "compacted"]
    assert [(m.kind, m.source, m.line) for m in mutations] == [("compact", "codex.compacted", n) for n, _ in compacted]
    tags = re.compile(r"sha=[0-9a-f]{8}")
    for compaction, (_, record) in zip(mutations, compacted, strict=True):
        replacement = record["payload"]["replacement_history"]
        assert compaction.details["replacement_items"] == len(replacement) == len(compaction.after)
        assert len(compaction.before) > len(compaction.after)
        # the replacement history carries earlier messages over verbatim (same redaction hash tags)
        before_tags = {t for m in compaction.before for t in tags.findall(m.text)}
        raw_tags = set(tags.findall(str(replacement)))
        assert {t for m in compaction.after for t in tags.findall(m.text)} & before_tags == raw_tags & before_tags
    for s in snapshots:
        # Codex puts developer messages between a function_call and its output: the Responses API
        # accepts that, so the rollout is paired under the lax rule
        pairs = index_pairs(s.messages, strict=strict_for("codex"))
        assert not pairs.orphan_calls and not pairs.orphan_results


@pytest.mark.parametrize("path", raw.of_kind("swe_agent"), ids=name)
def test_swe_agent_buffers_elisions_and_shrink(path: Path) -> None:
    snapshots, mutations = read_all(path)
    trajectory = raw.document(path)["trajectory"]
    if not all("messages" in step for step in trajectory):  # the older format: one final history
        assert len(snapshots) == 1 and mutations == []
        assert len(snapshots[0].messages) == len(raw.document(path)["history"])
        return
    assert len(snapshots) == len(trajectory) and not any(s.final for s in snapshots)
    for s, step in zip(snapshots, trajectory, strict=True):
        assert len(s.messages) == len(step["messages"])
        pairs = index_pairs(s.messages)
        assert not pairs.orphan_calls and not pairs.orphan_results and not pairs.pending
        assert sum(len(m.call_ids) for m in s.messages) == sum(len(m.result_ids) for m in s.messages)
    assert all(m.source == "snapshot_diff" and m.kind == "prune" for m in mutations)
    elided = re.compile(r"^Old environment output: \((\d+) lines omitted\)$")
    for m in mutations:
        assert m.changed and all(elided.match(m.after[i].text) for i in m.changed)
        assert all(m.before[i].role == "tool" and not elided.match(m.before[i].text) for i in m.changed)
        assert m.where == f"trajectory[{m.step}]"


@pytest.mark.parametrize("path", raw.of_kind("openhands"), ids=name)
def test_openhands_pairs_pending_and_no_mutation(path: Path) -> None:
    snapshots, mutations = read_all(path)
    assert mutations == []
    actions, observations = raw.openhands_tool_ids(path)
    pairs = index_pairs(snapshots[-1].messages)
    assert pairs.pairs == len(actions & observations) and pairs.pending == actions - observations
    assert not pairs.orphan_calls and not pairs.orphan_results


@pytest.mark.parametrize("path", raw.of_kind("gemini_cli"), ids=name)
def test_gemini_cli_pairs_and_buffers(path: Path) -> None:
    snapshots, mutations = read_all(path)
    messages = raw.document(path)["messages"]
    model_turns = [m for m in messages if m["type"] == "gemini"]
    assert len(snapshots) == len(model_turns) + 1 and snapshots[-1].final
    assert mutations == []  # the JSON recording holds the history as shown, no compression record
    calls, answered = raw.gemini_tool_calls(path)
    final = snapshots[-1].messages
    pairs = index_pairs(final)
    assert set(pairs.calls) == calls.keys() and pairs.pairs == len(answered)
    assert pairs.pending == calls.keys() - answered
    assert not pairs.orphan_calls and not pairs.orphan_results
    # a user message per user record, and per model turn its message plus one of its results
    assert len(final) == sum(m["type"] == "user" for m in messages) + len(model_turns) + sum(
        any(c.get("result") is not None for c in m.get("toolCalls") or ()) for m in model_turns)
