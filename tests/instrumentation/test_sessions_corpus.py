"""Issue 2 "Must show" and issue 7 §2: the session readers on every file of ../shared/corpus.

All tool pairs found and no false orphan (Claude Code ``progress`` records carry tool ids but are
not results); the Claude Code compaction at its boundary record (line 714, trigger auto,
preTokens 167731, summary at line 715); the Codex ``compacted`` record at line 1788 and its 40
replacement items; the SWE-agent trajectory's 13 buffers, its elided outputs and the shrink at
step 7; OpenHands' pair and pending final call, and no mutation. Pairs are counted from
`Message.call_ids` / `Message.result_ids` and checked with the pairing invariant (record 000).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxwatch.invariants.pairing import index_pairs, strict_for
from ctxwatch.model import Message
from ctxwatch.sessions import Mutation, Snapshot, detect_session_format, read_session


def one(corpus: Path, pattern: str) -> Path:
    (path,) = corpus.glob(pattern)
    return path


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


@pytest.mark.parametrize(("pattern", "expected"), [
    ("claude-code__marot-spotter__*.jsonl", "claude_code"),
    ("claude-code__daaain-*.SYNTHETIC.jsonl", "claude_code"),
    ("codex__*.jsonl", "codex"),
    ("swe-agent__*.traj", "swe_agent"),
    ("openhands__*.json", "openhands"),
])
def test_formats_are_detected(corpus: Path, pattern: str, expected: str) -> None:
    path = one(corpus, pattern)
    assert detect_session_format(path) == expected
    assert read_session(path).format == expected


def test_claude_code_pairs_and_compaction(corpus: Path) -> None:
    path = one(corpus, "claude-code__marot-spotter__*.jsonl")
    snapshots, mutations = read_all(path)
    calls, results = ids(all_messages(snapshots, mutations))
    assert len(calls) == 177 and calls == results
    progress_ids = set(re.findall(r'"toolUseID":\s*"([^"]+)"', path.read_text(encoding="utf-8")))
    assert progress_ids - calls, "progress records carry ids of their own (hook runs)"
    assert not (progress_ids - calls) & results, "a progress record was taken for a tool result"

    (compaction,) = mutations
    assert (compaction.kind, compaction.source) == ("compact", "claude_code.compact_boundary")
    assert (compaction.line, compaction.trigger, compaction.pre_tokens) == (714, "auto", 167731)
    assert compaction.summary_line == 715
    assert compaction.summary is not None and len(compaction.summary.text) == 12181
    assert compaction.summary.text.startswith("This session is being continued from a previous conversation")
    assert compaction.after == (compaction.summary,)
    assert compaction.size_before > 20 * compaction.size_after
    # no pair straddles the boundary: the buffers before and after are each fully paired
    for buffer in (compaction.before, snapshots[-1].messages):
        pairs = index_pairs(buffer)
        assert not pairs.orphan_calls and not pairs.orphan_results and not pairs.duplicate_calls
    # the assistant turns were merged: several tool_use blocks of one message.id in one message
    assert max(len(m.call_ids) for m in all_messages(snapshots, mutations)) > 1
    assert snapshots[-1].final and snapshots[-1].line == 1593
    assert all(not index_pairs(s.messages).orphan_calls for s in snapshots)


def test_claude_code_synthetic_rewind_then_compaction(corpus: Path) -> None:
    """The hand-written edge case: a rewind (two branches) then a compaction."""
    snapshots, mutations = read_all(one(corpus, "claude-code__daaain-*.SYNTHETIC.jsonl"))
    rewind, compaction = mutations
    assert (rewind.source, rewind.kind, rewind.line) == ("claude_code.rewind", "prune", 5)
    assert [m.text for m in rewind.before] == ["Start", "Ready", "First attempt", "First answer"]
    assert [m.text for m in rewind.after] == ["Start", "Ready"]
    assert (compaction.line, compaction.trigger, compaction.pre_tokens, compaction.summary_line) == (
        9, "auto", 150000, 10)
    assert [m.text for m in compaction.before] == ["Start", "Ready", "Second attempt", "Second answer",
                                                   "Keep going", "Kept going"]
    assert snapshots[-1].final and snapshots[-1].messages[-1].text == "Final answer"


def test_codex_pairs_and_compacted_record(corpus: Path) -> None:
    snapshots, mutations = read_all(one(corpus, "codex__*.jsonl"))
    calls, results = ids(all_messages(snapshots, mutations))
    assert len(calls) == 365 and calls == results
    (compaction,) = mutations
    assert (compaction.kind, compaction.source, compaction.line) == ("compact", "codex.compacted", 1788)
    assert compaction.details["replacement_items"] == 40 and len(compaction.after) == 40
    assert len(compaction.before) > len(compaction.after)
    # the replacement history carries earlier messages over verbatim (same redaction hash tags)
    tags = re.compile(r"sha=[0-9a-f]{8}")
    before_tags = {t for m in compaction.before for t in tags.findall(m.text)}
    carried = {t for m in compaction.after for t in tags.findall(m.text)} & before_tags
    assert len(carried) == 40
    for s in snapshots:
        # Codex puts developer messages between a function_call and its output: the Responses API
        # accepts that, so the rollout is paired under the lax rule (and not under the strict one)
        pairs = index_pairs(s.messages, strict=strict_for("codex"))
        assert not pairs.orphan_calls and not pairs.orphan_results
    assert any(index_pairs(s.messages).orphan_calls for s in snapshots)


def test_swe_agent_buffers_elisions_and_shrink(corpus: Path) -> None:
    snapshots, mutations = read_all(one(corpus, "swe-agent__*.traj"))
    assert len(snapshots) == 13 and not any(s.final for s in snapshots)
    for s in snapshots:
        pairs = index_pairs(s.messages)
        assert not pairs.orphan_calls and not pairs.orphan_results and not pairs.pending
        assert sum(len(m.call_ids) for m in s.messages) == sum(len(m.result_ids) for m in s.messages)
    # the demonstration replays reuse call ids: 13 calls, 9 distinct ids, all answered in order
    last = snapshots[-1].messages
    assert sum(len(m.call_ids) for m in last) == 13 and len(index_pairs(last).calls) == 9
    assert all(m.source == "snapshot_diff" and m.kind == "prune" for m in mutations)
    elided = re.compile(r"^Old environment output: \((\d+) lines omitted\)$")
    for m in mutations:
        assert m.changed and all(elided.match(m.after[i].text) for i in m.changed)
        assert all(m.before[i].role == "tool" and not elided.match(m.before[i].text) for i in m.changed)
    shrink = next(m for m in mutations if m.step == 7)
    assert shrink.size_after < shrink.size_before and shrink.where == "trajectory[7]"
    assert shrink.size_before - shrink.size_after == max(m.size_before - m.size_after for m in mutations)


def test_openhands_pair_pending_finish_and_no_mutation(corpus: Path) -> None:
    snapshots, mutations = read_all(one(corpus, "openhands__*.json"))
    assert mutations == []
    final = snapshots[-1].messages
    assert [m.role for m in final] == ["user", "assistant", "tool", "assistant"]
    assert final[1].call_ids == ("toolu_017nBp7UfiGqyrA7j77HgtFP",)
    assert final[2].result_ids == ("toolu_017nBp7UfiGqyrA7j77HgtFP",)
    pairs = index_pairs(final)
    assert pairs.pairs == 1 and pairs.pending == {"toolu_01BUKu3B7nY574atNECkBiFk"}  # the finish call
    assert not pairs.orphan_calls and not pairs.orphan_results
