"""`AuditedBuffer`: followed through cut-backs and appends, it holds what a fresh look at the buffer finds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.literals import LiteralRegistry
from ctxwatch.model import Message, TextPart, ToolCall, ToolResult
from ctxwatch.replay.buffer import AuditedBuffer

LITERALS = ("ORD-1042", "ORD-2077", "/srv/app/main.py", "deadbeef42", "12345678")
TEXTS = st.lists(st.sampled_from(("go on", *LITERALS)), max_size=3).map(" ".join)
PARTS = st.one_of(
    st.builds(TextPart, TEXTS),
    st.builds(ToolCall, st.sampled_from(("a", "b")), st.just("Bash"), TEXTS),
    st.builds(ToolResult, st.sampled_from(("a", "b")), TEXTS),
)
MESSAGES = st.builds(Message, st.sampled_from(("user", "assistant")), st.lists(PARTS, max_size=3))
# each step cuts the buffer back to some length, appends some messages, then asks about some candidates
STEPS = st.lists(st.tuples(st.integers(0, 10), st.lists(MESSAGES, max_size=4),
                           st.sets(st.sampled_from((*LITERALS, "not-there-9999"))) ), min_size=1, max_size=12)


@given(STEPS)
def test_held_is_what_the_whole_buffer_holds_after_every_cut_and_append(steps):
    registry = LiteralRegistry()
    followed = AuditedBuffer(strict=False, registry=registry)
    buffer: list[Message] = []
    for keep, appended, candidates in steps:
        del buffer[min(keep, len(buffer)):]
        buffer.extend(appended)
        followed.sync(tuple(buffer))
        assert followed.held(set(candidates)) == set(candidates) & LiteralRegistry().of_all(buffer)
