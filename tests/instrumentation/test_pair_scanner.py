"""`PairScanner` with undo: pushing, cutting back and pushing again gives `index_pairs` of the buffer;
`index_pairs_after` of a change gives `index_pairs` of the proposal."""

from __future__ import annotations

from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.diff import Change
from ctxwatch.invariants.pairing import PairScanner, index_pairs, index_pairs_after
from ctxwatch.model import Context, Message, OpaquePart, TextPart, ToolCall, ToolResult

IDS = ("a", "b", "c", "d")
PARTS = st.one_of(
    st.builds(TextPart, st.sampled_from(("go on", "done"))),
    st.builds(ToolCall, st.sampled_from(IDS), st.just("Bash")),
    st.builds(ToolResult, st.sampled_from(IDS), st.just("ok")),
    st.just(OpaquePart("thinking", "{}")),
)
MESSAGES = st.builds(Message, st.sampled_from(("user", "assistant", "system")), st.lists(PARTS, max_size=3))
# a buffer's history: each step cuts it back to some length (or not) and appends some messages
STEPS = st.lists(st.tuples(st.integers(0, 12), st.lists(MESSAGES, max_size=4)), min_size=1, max_size=12)


@given(STEPS, st.booleans())
def test_a_scanner_cut_back_and_grown_again_indexes_like_a_fresh_scan(steps, strict):
    scanner = PairScanner(strict=strict, undo=True)
    buffer: list[Message] = []
    for keep, appended in steps:
        keep = min(keep, len(buffer))
        calls, results = scanner.entered_from(keep)
        assert set(calls) == {c for m in buffer[keep:] for c in m.call_ids} - set(index_pairs(buffer[:keep]).calls)
        assert set(results) == ({r for m in buffer[keep:] for r in m.result_ids}
                                - set(index_pairs(buffer[:keep]).results))
        scanner.truncate(keep)
        del buffer[keep:]
        for m in appended:
            scanner.push(m)
            buffer.append(m)
        assert asdict(scanner.pairs()) == asdict(index_pairs(buffer, strict=strict))
        assert list(scanner.pairs().calls) == list(index_pairs(buffer, strict=strict).calls)  # same order


# a proposal from a buffer: some messages replaced in place (by messages with or without tool traffic),
# then possibly one dropped or one inserted, so that both the reuse and the fresh scan are reached
TOOL_FREE = st.builds(Message, st.sampled_from(("user", "assistant", "system")),
                      st.lists(PARTS.filter(lambda p: not isinstance(p, ToolCall | ToolResult)), max_size=2))
EDITS = st.tuples(st.lists(st.tuples(st.integers(0, 11), st.one_of(TOOL_FREE, MESSAGES)), max_size=4),
                  st.sampled_from(("in place", "in place", "in place", "drop", "insert")), st.integers(0, 11), MESSAGES)


@given(st.lists(MESSAGES, max_size=12), EDITS, st.booleans())
def test_the_index_after_a_change_is_the_index_of_the_proposal(before, edits, strict):
    replacements, shape, where, extra = edits
    after = list(before)
    for i, m in replacements:
        if after:
            after[i % len(after)] = m
    if shape == "drop" and after:
        del after[where % len(after)]
    elif shape == "insert":
        after.insert(where % (len(after) + 1), extra)
    old = index_pairs(before, strict=strict)
    change = Change.between(Context(tuple(before)), tuple(after), "compact")
    reindexed = index_pairs_after(change, old, strict=strict)
    assert asdict(reindexed) == asdict(index_pairs(after, strict=strict))
    assert list(reindexed.calls) == list(index_pairs(after, strict=strict).calls)
    assert asdict(index_pairs_after(change, old, strict=not strict)) == asdict(index_pairs(after, strict=not strict))


def test_text_rewritten_in_place_keeps_the_index_and_a_new_cut_is_scanned():
    before = [Message("user", [TextPart("go on")]), Message("assistant", [ToolCall("a", "Bash")]),
              Message("tool", [ToolResult("a", "ok")]), Message("assistant", [TextPart("done")])]
    old = index_pairs(before)
    condensed = before[:3] + [Message("assistant", [TextPart("finished")])]
    assert index_pairs_after(Change.between(Context(tuple(before)), tuple(condensed), "compact"), old) is old
    cut = before[:2] + [Message("user", [TextPart("summary")])] + before[3:]  # the result replaced by text
    index = index_pairs_after(Change.between(Context(tuple(before)), tuple(cut), "compact"), old)
    assert index is not old and index.orphan_calls == ["a"] and index.separated == {"a": 2}
