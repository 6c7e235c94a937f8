"""The one-pass read of ordinary Anthropic messages (`anthropic._ordinary_parts`) agrees with the exact reader.

`read_parts` takes the one-pass read when it answers and the exact reader (`_read_message`, which builds the
shape and names every error) otherwise. Here both are run on the same input: wherever the one-pass read
answers, the exact reader gives the same parts (same types and values, part for part) and raises nothing; on
every message of the corpus's Claude Code sessions, and on generated messages with odd values, leftovers,
floats, deep nesting and tight limits. The one-pass read is also checked to answer for the blocks a recorded
session holds, so a read that always declined would fail here.
"""

from __future__ import annotations

from pathlib import Path

from corpus_files import claude_code_message_records, of_kind
from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.adapters._reader import DEFAULT_LIMITS, Limits
from ctxwatch.adapters.anthropic import _ordinary_parts, _read_message, read_parts
from ctxwatch.errors import InvalidContextError

TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=8)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), TEXT)
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(TEXT, inner, max_size=3)), max_leaves=12)
ODD = st.one_of(JSONISH, st.sampled_from(["text", "tool_use", "tool_result", "thinking"]))


def block(kind: str, fields: dict, extra: dict) -> dict:
    return {"type": kind, **fields, **extra}


BLOCKS = st.one_of(
    st.builds(block, st.just("text"), st.fixed_dictionaries({"text": st.one_of(TEXT, ODD)}),
              st.dictionaries(st.sampled_from(["citations", "cache_control"]), JSONISH, max_size=1)),
    st.builds(block, st.just("tool_use"),
              st.fixed_dictionaries({"id": st.one_of(TEXT, ODD), "name": st.one_of(TEXT, ODD), "input": JSONISH}),
              st.dictionaries(st.sampled_from(["caller", "cache_control"]), JSONISH, max_size=2)),
    st.builds(block, st.just("tool_result"),
              st.fixed_dictionaries({"tool_use_id": st.one_of(TEXT, ODD),
                                     "content": st.one_of(TEXT, st.lists(st.fixed_dictionaries(
                                         {"type": st.just("text"), "text": TEXT}), max_size=2), ODD)},
                                    optional={"is_error": st.one_of(st.booleans(), ODD)}),
              st.dictionaries(st.sampled_from(["cache_control"]), JSONISH, max_size=1)),
    st.builds(block, st.one_of(st.sampled_from(["thinking", "image", "redacted_thinking"]), ODD),
              st.dictionaries(TEXT, JSONISH, max_size=3), st.just({})),
    ODD,
)
MESSAGES = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "assistant", "system"]), ODD),
     "content": st.one_of(TEXT, st.lists(BLOCKS, max_size=4), ODD)},
    optional={"name": TEXT})
LIMITS = st.one_of(st.just(DEFAULT_LIMITS),
                   st.builds(Limits, max_depth=st.integers(0, 4), max_message_chars=st.integers(0, 40)))


def same_parts(a: list, b: list) -> bool:
    """Part for part the same types and values (a ToolResult's output too)."""
    return len(a) == len(b) and all(type(x) is type(y) and x == y for x, y in zip(a, b, strict=True))


def assert_agrees(item: object, limits: Limits) -> bool:
    """The one-pass parts equal the exact reader's wherever they are given; whether they were."""
    fast = _ordinary_parts(item, limits)
    if fast is None:
        return False
    try:
        _, exact, _, _ = _read_message(item, None, limits)
    except InvalidContextError as exc:
        raise AssertionError(f"one-pass read gave parts where the exact reader fails: {exc}") from None
    assert same_parts(fast, exact)
    return True


@given(MESSAGES, LIMITS)
def test_generated_messages_read_in_one_pass_as_the_exact_reader_reads_them(item: dict, limits: Limits) -> None:
    assert_agrees(item, limits)


def test_every_message_of_the_corpus_claude_code_sessions_reads_the_same(corpus: Path) -> None:
    taken, kinds = 0, set()
    for path in of_kind("claude_code", corpus):
        for _, record in claude_code_message_records(path):
            message = record["message"]
            item = {"role": message.get("role", record["type"]), "content": message.get("content")}
            if assert_agrees(item, DEFAULT_LIMITS):
                taken += 1
                content = item["content"]
                kinds.update(b.get("type") for b in content if isinstance(b, dict)) if isinstance(
                    content, list) else kinds.add("string")
            assert read_parts(item, None).parts == tuple(_read_message(item, None, DEFAULT_LIMITS)[1])
    assert taken
    assert {"string", "text", "tool_use", "tool_result", "thinking"} <= kinds


def test_what_the_exact_reader_may_refuse_is_left_to_it() -> None:
    deep: object = "x"
    for _ in range(DEFAULT_LIMITS.max_depth + 1):
        deep = [deep]
    for item in ({"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": deep}]},
                 {"role": "user", "content": [{"type": "thinking", "thinking": deep}]},
                 {"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": 1.5}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok",
                                               "is_error": "yes"}]},
                 {"role": "system", "content": "hi"}):
        assert _ordinary_parts(item, DEFAULT_LIMITS) is None
    assert _ordinary_parts({"role": "user", "content": [{"type": "text", "text": "x" * 7}]},
                           Limits(max_message_chars=10)) is None  # 4 + 7 characters counted
