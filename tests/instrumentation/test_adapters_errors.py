"""Issue 2 §4 / "Must show": bad input gets an error naming the message index and field.

Unknown roles, missing ids, non-string content, non-dict messages, deeply nested and huge
messages each raise `InvalidContextError` whose text says where ("message 3, field
'tool_calls[0].id': missing"); never a bare KeyError, TypeError or RecursionError, and the
caller's list and dicts are left exactly as they were. Duplicate ids are not an adapter error
(the pairing invariant reports them, record 000).
"""

from __future__ import annotations

import copy

import pytest

from ctxwatch.adapters import Limits, detect_format, from_messages, to_messages, to_tool_schemas
from ctxwatch.errors import InvalidContextError
from ctxwatch.model import Message, ToolCall

GOOD_CHAT = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": "a"},
]


def assert_refused(data: object, fmt: str | None, expected: str) -> None:
    before = copy.deepcopy(data)
    with pytest.raises(InvalidContextError) as info:
        to_messages(data, fmt)
    assert str(info.value) == expected
    assert data == before, "the caller's input was modified"


@pytest.mark.parametrize(
    ("bad", "fmt", "expected"),
    [
        (
            {"role": "robot", "content": "x"},
            "openai_chat",
            "message 3, field 'role': unknown role 'robot' "
            "(expected one of system, developer, user, assistant, tool)",
        ),
        ({"content": "x"}, "openai_chat", "message 3, field 'role': missing"),
        ({"role": "tool", "content": "x"}, "openai_chat", "message 3, field 'tool_call_id': missing"),
        (
            {"role": "tool", "tool_call_id": 7, "content": "x"},
            "openai_chat",
            "message 3, field 'tool_call_id': expected a string, got int",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            "openai_chat",
            "message 3, field 'tool_calls[0].id': missing",
        ),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}],
            },
            "openai_chat",
            "message 3, field 'tool_calls[0].function.arguments': expected a string, got dict",
        ),
        (
            {"role": "user", "content": 42},
            "openai_chat",
            "message 3, field 'content': expected a string or a list of content blocks, got int",
        ),
        (
            {"role": "user", "content": [{"type": "text", "text": None}]},
            "openai_chat",
            "message 3, field 'content[0].text': expected a string, got null",
        ),
        (
            {"role": "user", "name": 5, "content": "x"},
            "openai_chat",
            "message 3, field 'name': expected a string, got int",
        ),
        ("just text", "openai_chat", "message 3: expected an object, got str"),
        (None, "anthropic", "message 3: expected an object, got null"),
        (
            {"role": "system", "content": "x"},
            "anthropic",
            "message 3, field 'role': unknown role 'system' for Anthropic messages "
            "(expected user or assistant); "
            "pass it as the request's 'system'",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
            "anthropic",
            "message 3, field 'content[0].id': missing",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]},
            "anthropic",
            "message 3, field 'content[0].input': missing",
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "content": "x"}]},
            "anthropic",
            "message 3, field 'content[0].tool_use_id': missing",
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]},
            "anthropic",
            "message 3, field 'content[0].is_error': expected true or false, got str",
        ),
        (
            {"role": "user", "content": ["bare"]},
            "anthropic",
            "message 3, field 'content[0]': expected a content block object, got str",
        ),
        (
            {"type": "function_call", "name": "f", "arguments": "{}"},
            "openai_responses",
            "message 3, field 'call_id': missing",
        ),
        (
            {"type": "function_call_output", "output": "x"},
            "openai_responses",
            "message 3, field 'call_id': missing",
        ),
        (
            {"type": "message", "role": "tool", "content": "x"},
            "openai_responses",
            "message 3, field 'role': unknown role 'tool' "
            "(expected one of user, system, developer, assistant)",
        ),
        (
            {"type": "ai", "data": {"content": "x", "tool_calls": [{"name": "f", "args": {}, "id": None}]}},
            "langchain",
            "message 3, field 'tool_calls[0].id': missing",
        ),
        ({"type": "tool", "data": {"content": "x"}}, "langchain", "message 3, field 'tool_call_id': missing"),
        (
            {"type": "robot", "data": {"content": "x"}},
            "langchain",
            "message 3, field 'type': unsupported LangChain message type 'robot' "
            "(expected one of system, human, ai, tool)",
        ),
    ],
)
def test_bad_message_is_named_by_index_and_field(bad: object, fmt: str, expected: str) -> None:
    data = (
        [{"type": "system", "data": {"content": "s"}}] * 3
        if fmt == "langchain"
        else [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}] * 2
    )[:3] + [bad]
    assert_refused(data, fmt, expected)


def test_duplicate_ids_are_not_an_adapter_error() -> None:
    """Record 000: duplicate tool ids are the pairing invariant's finding, so the adapter passes them on."""
    data = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        }
    ]
    assert to_messages(data)[0].call_ids == ("call_1", "call_1")


def test_deep_nesting_is_reported_not_a_recursion_error() -> None:
    deep: object = "bottom"
    for _ in range(100_000):
        deep = {"k": deep}
    data = [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": deep}]}]
    with pytest.raises(
        InvalidContextError,
        match=r"^message 0, field 'content\[0\]\.input(\.k)+': nested deeper "
        r"than 64 levels$",
    ):
        to_messages(data, "anthropic")


def test_self_referencing_value_is_reported() -> None:
    loop: dict = {"type": "image_url"}
    loop["image_url"] = loop
    with pytest.raises(InvalidContextError, match="nested deeper than 64 levels"):
        to_messages([{"role": "user", "content": [loop]}], "openai_chat")


def test_non_json_values_are_reported() -> None:
    with pytest.raises(
        InvalidContextError, match=r"^message 0, field 'content\[0\]\.input\.x': a set is not JSON$"
    ):
        to_messages(
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"x": {1}}}],
                }
            ],
            "anthropic",
        )
    with pytest.raises(InvalidContextError, match=r"field 'content\[0\]\.input\.x': nan is not valid JSON"):
        to_messages(
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"x": float("nan")}}],
                }
            ],
            "anthropic",
        )
    with pytest.raises(InvalidContextError, match=r"field 'meta': object key 1 is not a string"):
        to_messages([{"role": "user", "content": "x", "meta": {1: "a"}}], "openai_chat")


def test_huge_message_is_refused_at_the_default_cap() -> None:
    huge = "x" * (64 * 1024 * 1024 + 1)
    with pytest.raises(
        InvalidContextError, match=r"^message 1, field 'content': message exceeds 67108864 characters$"
    ):
        to_messages([{"role": "user", "content": "ok"}, {"role": "user", "content": huge}], "openai_chat")


def test_limits_are_configurable() -> None:
    small = Limits(max_depth=3, max_message_chars=10)
    with pytest.raises(InvalidContextError, match="message exceeds 10 characters"):
        to_messages([{"role": "user", "content": "eleven chars"}], "openai_chat", limits=small)
    with pytest.raises(InvalidContextError, match="nested deeper than 3 levels"):
        to_messages(
            [{"role": "user", "content": "x", "m": {"a": {"b": {"c": {"d": 1}}}}}],
            "openai_chat",
            limits=small,
        )


def test_not_a_list() -> None:
    for data, expected in [
        ("hello", "expected a list of messages, got str"),
        (5, "expected a list of messages, got int"),
        ({"model": "x"}, "expected a list of messages or an Anthropic request dict"),
    ]:
        with pytest.raises(InvalidContextError, match=expected):
            to_messages(data)
        with pytest.raises(InvalidContextError):
            detect_format(data)


def test_unknown_format_names() -> None:
    with pytest.raises(InvalidContextError, match="unknown format 'gemini'"):
        to_messages(GOOD_CHAT, "gemini")
    with pytest.raises(InvalidContextError, match="unknown format 'gemini'"):
        from_messages([], "gemini")


def test_writing_what_a_format_cannot_express() -> None:
    free_text_call = Message("assistant", [ToolCall("c1", "apply_patch", "*** Begin Patch")])
    with pytest.raises(
        InvalidContextError,
        match=r"^message 0, field \"tool call 'c1'\": tool call arguments are "
        r"not JSON",
    ):
        from_messages([free_text_call], "anthropic")
    with pytest.raises(
        InvalidContextError, match="message 1, field 'role': Anthropic messages have no system role"
    ):
        from_messages([Message("user", "u"), Message("system", "late")], "anthropic")
    with pytest.raises(InvalidContextError, match="message 0: expected a ctxwatch Message, got dict"):
        from_messages([{"role": "user"}], "openai_chat")  # type: ignore[list-item]


def test_bad_tool_definitions() -> None:
    with pytest.raises(InvalidContextError, match=r"^tool 1, field 'function.name': missing$"):
        to_tool_schemas(
            [{"name": "ok", "input_schema": {}}, {"type": "function", "function": {"parameters": {}}}]
        )
    with pytest.raises(InvalidContextError, match=r"^tool 0: expected an object, got str$"):
        to_tool_schemas(["query_db"])
    with pytest.raises(InvalidContextError, match="expected a list of tool definitions"):
        to_tool_schemas({"name": "x"})
