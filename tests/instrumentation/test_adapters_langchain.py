"""Issue 2 §4: LangChain messages (imported only if installed), format detection, tool definitions.

Real langchain_core objects and their ``messages_to_dict`` form round-trip; ``import ctxwatch``
(and its adapters and session readers) never imports a framework; without langchain-core the
dict form still reads and writing objects fails with a one-line install hint. Detection names
each format from its own marks, and tool definition lists of every provider become versioned
`ToolSchema`s.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwatch.adapters import detect_format, from_messages, to_messages, to_tool_schemas
from ctxwatch.model import Message, ToolResult

lc = pytest.importorskip("langchain_core.messages")

content = st.text(max_size=10) | st.lists(
    st.text(max_size=5) | st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=5)})
    | st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": st.text()})}),
    max_size=3)
ident = st.text(alphabet="abcdef0123456789", min_size=1, max_size=8)
optional_id = st.none() | ident
calls = st.lists(st.builds(lambda n, i, a: {"name": n, "args": a, "id": i}, ident, ident,
                           st.dictionaries(ident, st.integers() | st.text(max_size=5), max_size=2)), max_size=2)
lc_message = st.one_of(
    st.builds(lambda c, i: lc.SystemMessage(content=c, id=i), content, optional_id),
    st.builds(lambda c, i, n: lc.HumanMessage(content=c, id=i, name=n), content, optional_id, st.none() | ident),
    st.builds(lambda c, i, tc, meta: lc.AIMessage(content=c, id=i, tool_calls=tc, response_metadata=meta),
              content, optional_id, calls, st.dictionaries(ident, st.integers(), max_size=2)),
    st.builds(lambda c, t, s: lc.ToolMessage(content=c, tool_call_id=t, status=s), content, ident,
              st.sampled_from(["success", "error"])),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(lc_message, max_size=5))
def test_langchain_objects_roundtrip(messages: list) -> None:
    converted = to_messages(messages, "langchain")
    assert detect_format(messages) == ("langchain" if messages else "openai_chat")
    assert from_messages(converted, "langchain") == messages


@settings(max_examples=100, deadline=None)
@given(st.lists(lc_message, max_size=5))
def test_langchain_dicts_roundtrip(messages: list) -> None:
    dicts = lc.messages_to_dict(messages)
    converted = to_messages(dicts, "langchain")
    assert from_messages(converted, "langchain") == dicts
    assert [m.digest for m in converted] == [m.digest for m in to_messages(dicts, "langchain")]


def test_langchain_pairs_and_errors() -> None:
    messages = [lc.HumanMessage("list orders"),
                lc.AIMessage("", tool_calls=[{"name": "query_db", "args": {"t": "orders"}, "id": "call_7f3a"}]),
                lc.ToolMessage("42 rows", tool_call_id="call_7f3a", status="error")]
    converted = to_messages(messages)
    assert [m.role for m in converted] == ["user", "assistant", "tool"]
    assert converted[1].call_ids == ("call_7f3a",)
    assert converted[2].parts == (ToolResult("call_7f3a", "42 rows", is_error=True),)
    chat = from_messages(converted, "openai_chat")
    assert chat[1]["tool_calls"][0]["function"] == {"name": "query_db", "arguments": '{"t":"orders"}'}


def test_import_ctxwatch_imports_no_framework() -> None:
    code = ("import sys, ctxwatch, ctxwatch.adapters, ctxwatch.sessions\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain', 'langchain_core', 'fastapi', 'uvicorn', 'opentelemetry.sdk'))\n"
            "print(loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_without_langchain_core_dicts_read_and_objects_refuse_cleanly() -> None:
    """As on a machine without the extra: the import of langchain_core fails."""
    code = ("import sys\nsys.modules['langchain_core'] = None\n"
            "from ctxwatch.adapters import to_messages, from_messages\n"
            "from ctxwatch.errors import InvalidContextError\n"
            "ms = to_messages([{'type': 'human', 'data': {'content': 'hi', 'type': 'human'}}])\n"
            "print(ms[0].text)\n"
            "print(from_messages(to_messages([{'type': 'ai', 'data': {'content': 'x', 'tool_calls': []}}]),"
            " 'langchain'))\n"
            "try:\n    from_messages(to_messages([{'role': 'user', 'content': 'hi'}]), 'langchain')\n"
            "except InvalidContextError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.splitlines() == [
        "hi", "[{'type': 'ai', 'data': {'content': 'x', 'tool_calls': []}}]",
        "writing LangChain messages needs langchain-core: pip install 'ctxwatch[langchain]'"]


@pytest.mark.parametrize(("data", "expected"), [
    ([{"role": "user", "content": "hi"}], "openai_chat"),
    ([{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c", "content": "x"}], "openai_chat"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}], "openai_chat"),
    ([{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}],
     "openai_responses"),
    ([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}], "openai_responses"),
    ([{"type": "reasoning", "summary": []}], "openai_responses"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": {}}]}], "anthropic"),
    ([{"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}], "anthropic"),
    ({"system": "s", "messages": []}, "anthropic"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "anthropic"),
    ([{"type": "human", "data": {"content": "hi"}}], "langchain"),
    ([Message("user", "hi")], "ctxwatch"),
    ([], "openai_chat"),
])
def test_detect_format(data: object, expected: str) -> None:
    assert detect_format(data) == expected


def test_detect_langchain_objects() -> None:
    assert detect_format([lc.HumanMessage("hi")]) == "langchain"


QUERY = {"type": "object", "properties": {"sql": {"type": "string"}}}


def test_tool_schemas_of_every_provider() -> None:
    chat = {"type": "function", "function": {"name": "query_db", "description": "Run SQL", "parameters": QUERY}}
    responses = {"type": "function", "name": "query_db", "description": "Run SQL", "parameters": QUERY}
    anthropic = {"name": "query_db", "description": "Run SQL", "input_schema": QUERY}
    cached = {**anthropic, "cache_control": {"type": "ephemeral"}}
    server = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    custom = {"type": "custom", "custom": {"name": "apply_patch"}}
    schemas = to_tool_schemas([chat, responses, anthropic, cached, server, custom])
    assert [s.name for s in schemas] == ["query_db"] * 4 + ["web_search", "apply_patch"]
    assert schemas[2].version == schemas[3].version  # moving a cache breakpoint is not a new schema
    changed = to_tool_schemas([{**anthropic, "input_schema": {"type": "object", "properties": {}}}])[0]
    assert changed.version != schemas[2].version
    assert to_tool_schemas([schemas[0]]) == [schemas[0]]


def test_tool_schemas_from_langchain_tools() -> None:
    tools = pytest.importorskip("langchain_core.tools")

    @tools.tool
    def query_db(sql: str) -> str:
        """Run SQL."""
        return sql

    (schema,) = to_tool_schemas([query_db])
    assert schema.name == "query_db"
    assert '"sql"' in schema.definition
