"""Issue 2 §4, adapters: ``from_messages(to_messages(x, f), f) == x`` for every format.

Property-based (hypothesis strategies for valid messages of each wire format, with the optional
and unmodelled fields providers add) and on real messages: every Anthropic message of the Claude
Code session, every Responses item of the Codex rollout, every Chat message of the SWE-agent
trajectory in ../shared/corpus. Conversion never modifies the caller's objects, and converting
twice gives equal messages (stable digests).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from corpus_files import document, jsonl, of_kind
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwatch.adapters import from_messages, to_messages
from ctxwatch.errors import InvalidContextError
from ctxwatch.model import Message, OpaquePart, ToolCall, ToolResult

fd = st.fixed_dictionaries
text = st.text(max_size=12)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=10)
scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text
json_value = st.recursive(scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3),
                          max_leaves=6)
json_object = st.dictionaries(text, json_value, max_size=3)


def extras(*names: str) -> st.SearchStrategy[dict]:
    """Unmodelled fields a provider may add (kept through the round trip)."""
    return st.dictionaries(st.sampled_from(names), json_value, max_size=2)


def with_extras(base: st.SearchStrategy[dict], *names: str) -> st.SearchStrategy[dict]:
    return st.builds(lambda b, e: {**b, **e}, base, extras(*names))


# --- OpenAI Chat Completions ----------------------------------------------------------------
chat_text_part = with_extras(fd({"type": st.just("text"), "text": text}), "annotations")
chat_image_part = fd({"type": st.just("image_url"), "image_url": fd(
    {"url": text}, optional={"detail": st.sampled_from(["low", "high"])})})
chat_content = text | st.none() | st.lists(chat_text_part | chat_image_part, max_size=3)
chat_call = with_extras(st.one_of(
    fd({"id": ident, "type": st.just("function"),
                           "function": fd({"name": ident, "arguments": text})}),
    fd({"id": ident, "function": fd({"name": ident, "arguments": text})}),
    fd({"id": ident, "type": st.just("custom"),
                           "custom": fd({"name": ident, "input": text})}),
), "index")
chat_message = st.one_of(
    with_extras(fd({"role": st.sampled_from(["system", "developer", "user"])},
                   optional={"content": chat_content, "name": ident | st.none()}), "x_meta"),
    with_extras(fd({"role": st.just("assistant")}, optional={
        "content": chat_content, "name": ident, "tool_calls": st.none() | st.lists(chat_call, max_size=3)}),
        "refusal", "audio", "annotations"),
    with_extras(fd({"role": st.just("tool"), "tool_call_id": ident},
                   optional={"content": text | st.lists(chat_text_part, max_size=2)}), "x_meta"),
)

# --- OpenAI Responses -------------------------------------------------------------------------
resp_text_part = with_extras(fd({"type": st.sampled_from(["input_text", "output_text"]),
                                                    "text": text}), "annotations", "logprobs")
resp_image_part = fd({"type": st.just("input_image"), "image_url": text})
resp_content = text | st.lists(resp_text_part | resp_image_part, max_size=3)
resp_item = st.one_of(
    with_extras(fd({"type": st.just("message"),
                                       "role": st.sampled_from(["user", "system", "developer", "assistant"])},
                                      optional={"content": resp_content, "id": ident}), "status", "phase"),
    fd({"role": st.sampled_from(["user", "assistant", "developer"]), "content": resp_content}),
    with_extras(fd({"type": st.just("function_call"), "call_id": ident, "name": ident,
                                       "arguments": text}, optional={"id": ident}), "status"),
    with_extras(fd({"type": st.just("custom_tool_call"), "call_id": ident, "name": ident,
                                       "input": text}, optional={"id": ident}), "status"),
    with_extras(fd({"type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
                    "call_id": ident, "output": resp_content}, optional={"id": ident}), "status"),
    fd({"type": st.just("reasoning"), "summary": st.lists(fd(
        {"type": st.just("summary_text"), "text": text}), max_size=2)},
        optional={"id": ident, "encrypted_content": text, "content": st.none()}),
    fd({"type": st.just("web_search_call"), "status": st.just("completed"),
                           "action": json_object}),
)

# --- Anthropic Messages -----------------------------------------------------------------------
cache = fd({"type": st.just("ephemeral")})
anth_text = fd({"type": st.just("text"), "text": text}, optional={"cache_control": cache})
anth_image = fd({"type": st.just("image"), "source": fd(
    {"type": st.just("base64"), "media_type": st.just("image/png"), "data": text})})
anth_use = fd({"type": st.just("tool_use"), "id": ident, "name": ident, "input": json_object},
                                 optional={"cache_control": cache, "caller": json_object})
anth_result = fd({"type": st.just("tool_result"), "tool_use_id": ident}, optional={
    "content": text | st.lists(anth_text | anth_image, max_size=2), "is_error": st.booleans(),
    "cache_control": cache})
anth_thinking = fd({"type": st.just("thinking"), "thinking": text, "signature": text})
anth_message = st.one_of(
    fd({"role": st.just("user"),
                           "content": text | st.lists(anth_result | anth_text | anth_image, max_size=4)}),
    fd({"role": st.just("assistant"),
                           "content": text | st.lists(anth_thinking | anth_text | anth_use, max_size=4)}),
)
anth_system = text | st.lists(anth_text, min_size=1, max_size=2)


@st.composite
def anth_request(draw: st.DrawFn) -> dict:
    """A request dict: system optional, other keys in any order."""
    fields = {"model": draw(ident), "max_tokens": draw(st.integers(1, 4096)),
              "messages": draw(st.lists(anth_message, max_size=4))}
    if draw(st.booleans()):
        fields["system"] = draw(anth_system)
    if draw(st.booleans()):
        fields["tools"] = draw(st.lists(json_object, max_size=2))
    order = draw(st.permutations(list(fields)))
    if not fields["messages"] and "system" not in fields:
        fields["system"] = draw(anth_system)  # a request with neither has nothing to carry it
        order.append("system")
    return {k: fields[k] for k in order}


# --- the properties -----------------------------------------------------------------------------
def roundtrip(data: object, fmt: str) -> None:
    before = copy.deepcopy(data)
    messages = to_messages(data, fmt)
    assert data == before, "to_messages modified its input"
    assert from_messages(messages, fmt) == data
    again = to_messages(data, fmt)
    assert [m.digest for m in again] == [m.digest for m in messages]
    assert all(isinstance(m, Message) for m in messages)


@settings(max_examples=150, deadline=None)
@given(st.lists(chat_message, max_size=5))
def test_openai_chat_roundtrip(messages: list) -> None:
    roundtrip(messages, "openai_chat")


@settings(max_examples=150, deadline=None)
@given(st.lists(resp_item, max_size=5))
def test_openai_responses_roundtrip(items: list) -> None:
    roundtrip(items, "openai_responses")


@settings(max_examples=150, deadline=None)
@given(st.lists(anth_message, max_size=5))
def test_anthropic_messages_roundtrip(messages: list) -> None:
    roundtrip(messages, "anthropic")


@settings(max_examples=100, deadline=None)
@given(anth_request())
def test_anthropic_request_roundtrip(request: dict) -> None:
    """The request dict comes back as a request dict: system, other keys and key order kept."""
    messages = to_messages(request)
    assert (messages[0].role == "system") == ("system" in request)
    back = from_messages(messages, "anthropic")
    assert back == request
    assert list(back) == list(request)
    roundtrip(request, "anthropic")


def test_chat_tool_calls_are_parts_in_order() -> None:
    """Two calls in one assistant message, each result in its own tool message (record 000's shape)."""
    data = [
        {"role": "system", "content": "You are a database agent."},
        {"role": "user", "content": "How many orders?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_7f3a", "type": "function", "function": {"name": "query_db", "arguments": '{"q":1}'}},
            {"id": "call_8b1c", "type": "function", "function": {"name": "query_db", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_7f3a", "content": "42"},
        {"role": "tool", "tool_call_id": "call_8b1c", "content": [{"type": "text", "text": "7"}]},
    ]
    messages = to_messages(data)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool"]
    assert messages[2].call_ids == ("call_7f3a", "call_8b1c")
    assert messages[2].tool_calls[0] == ToolCall("call_7f3a", "query_db", '{"q":1}')
    assert [m.result_ids for m in messages[3:]] == [("call_7f3a",), ("call_8b1c",)]
    assert messages[4].parts[0] == ToolResult("call_8b1c", "7")  # one text block: its string (adapters/_shape)
    assert from_messages(messages, "openai_chat") == data


def test_anthropic_parallel_tool_use_and_results() -> None:
    """Several tool_use blocks in one assistant message, their tool_result blocks in the next user message."""
    data = {"system": "Be brief.", "model": "claude", "max_tokens": 100, "messages": [
        {"role": "user", "content": "Check both."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "two lookups", "signature": "c2ln"},
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_01", "name": "query_db", "input": {"table": "orders"}},
            {"type": "tool_use", "id": "toolu_02", "name": "query_db", "input": {"table": "users"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "42"},
            {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": True,
             "content": [{"type": "text", "text": "timeout"}]}]},
    ]}
    messages = to_messages(data)
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0].text == "Be brief."
    assert messages[2].call_ids == ("toolu_01", "toolu_02")
    assert isinstance(messages[2].parts[0], OpaquePart) and messages[2].parts[0].kind == "thinking"
    assert messages[3].result_ids == ("toolu_01", "toolu_02")
    assert messages[3].parts[1].is_error
    assert from_messages(messages, "anthropic") == data
    assert from_messages(messages[1:], "anthropic") == data["messages"]


def test_same_plain_content_has_the_same_digest_in_every_format() -> None:
    """A message with nothing format-specific reads identically whatever format carried it."""
    chat = to_messages([{"role": "user", "content": "hello"}], "openai_chat")[0]
    anthropic = to_messages([{"role": "user", "content": "hello"}], "anthropic")[0]
    responses = to_messages([{"type": "message", "role": "user", "content": "hello"}], "openai_responses")[0]
    assert chat == anthropic == responses
    assert chat.extra is None


def test_cross_format_keeps_pairs() -> None:
    """Writing Chat messages as Anthropic puts both results in one user turn; as Responses, items."""
    chat = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}},
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "x"},
            {"role": "tool", "tool_call_id": "c2", "content": "y"}]
    anthropic = from_messages(to_messages(chat), "anthropic")
    assert anthropic[1]["content"][0] == {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}
    assert [b["tool_use_id"] for b in anthropic[2]["content"]] == ["c1", "c2"]
    assert len(anthropic) == 3
    again = to_messages(anthropic, "anthropic")
    assert [m.call_ids for m in again] == [(), ("c1", "c2"), ()]
    assert again[2].result_ids == ("c1", "c2")
    items = from_messages(to_messages(anthropic, "anthropic"), "openai_responses")
    assert [i["type"] for i in items] == ["message", "function_call", "function_call", "function_call_output",
                                         "function_call_output"]


# --- real messages from ../shared/corpus (files picked by what they hold) --------------------------
def _name(path: Path) -> str:
    return path.name[:60]


def _blocks(messages: list[dict], kind: str) -> int:
    return sum(1 for m in messages if isinstance(m["content"], list) for b in m["content"] if b.get("type") == kind)


@pytest.mark.parametrize("path", of_kind("claude_code"), ids=_name)
def test_claude_code_messages_roundtrip(path: Path) -> None:
    """Every message of a Claude Code session round-trips through the Anthropic adapter."""
    messages = [{"role": r["message"]["role"], "content": r["message"]["content"]}
                for _, r in jsonl(path) if r.get("type") in ("user", "assistant")]
    converted = to_messages(messages, "anthropic")  # text-only files would look like OpenAI Chat
    assert len(converted) == len(messages)
    assert sum(len(m.call_ids) for m in converted) == _blocks(messages, "tool_use")
    assert sum(len(m.result_ids) for m in converted) == _blocks(messages, "tool_result")
    assert from_messages(converted, "anthropic") == messages


@pytest.mark.parametrize("path", of_kind("codex"), ids=_name)
def test_codex_items_roundtrip(path: Path) -> None:
    """Every response_item of a Codex rollout (and its replacement histories) round-trips."""
    records = [r for _, r in jsonl(path)]
    items = [r["payload"] for r in records if r["type"] == "response_item"]
    items += [item for r in records if r["type"] == "compacted" for item in r["payload"]["replacement_history"]]
    converted = to_messages(items)
    assert sum(len(m.call_ids) for m in converted) == sum(
        i.get("type") in ("function_call", "custom_tool_call") for i in items)
    assert from_messages(converted, "openai_responses") == items


@pytest.mark.parametrize("path", [p for p in of_kind("swe_agent") if any(
    "tool_call_ids" in m for step in document(p)["trajectory"] for m in step.get("messages", ()))], ids=_name)
def test_swe_agent_messages_roundtrip(path: Path) -> None:
    """SWE-agent's chat messages name their call in ``tool_call_ids``, which Chat does not know: the
    adapter refuses them by index and field; with ``tool_call_id`` they round-trip, SWE-agent's own
    fields (agent, message_type, thought, action) included."""
    messages = document(path)["trajectory"][-1]["messages"]
    first = next(i for i, m in enumerate(messages) if "tool_call_ids" in m)
    with pytest.raises(InvalidContextError, match=rf"^message {first}, field 'tool_call_id': missing$"):
        to_messages(messages, "openai_chat")
    fixed = [{**{k: v for k, v in m.items() if k != "tool_call_ids"},
              **({"tool_call_id": m["tool_call_ids"][0]} if "tool_call_ids" in m else {})} for m in messages]
    converted = to_messages(fixed)
    results = sum("tool_call_ids" in m for m in messages)
    assert sum(len(m.call_ids) for m in converted) == sum(len(m.result_ids) for m in converted) == results
    assert from_messages(converted, "openai_chat") == fixed
