"""`PairScanner` with undo: pushing, cutting back and pushing again gives `index_pairs` of the buffer."""

from __future__ import annotations

from dataclasses import asdict

from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.invariants.pairing import PairScanner, index_pairs
from ctxwatch.model import Message, OpaquePart, TextPart, ToolCall, ToolResult

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
