"""Hostile values in every field the session readers and the message adapters read: a valid
recording or message list of each format with any of its values, at any depth, replaced by an
arbitrary JSON value (unhashable lists and objects where names go, wrong types, huge integers,
NaN and Infinity, lone surrogates, deep nesting) or removed, and lines of invalid UTF-8 or
unreadable JSON between the records.

What must hold: a reader yields events and one-line skips (with ``strict=True``, at most a
one-line `SessionReadError`), and a replay audit of the file reads it (`audit_session` reports
anything it did not expect as "cannot be audited", which these tests count as a failure) and
renders it as table, JSON and HTML; an adapter gives messages or a one-line `InvalidContextError`
naming the message index, never any other exception."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwatch.adapters import from_messages, to_messages
from ctxwatch.errors import InvalidContextError
from ctxwatch.replay import audit_session
from ctxwatch.replay.page import render_html
from ctxwatch.replay.schema import document
from ctxwatch.replay.table import render
from ctxwatch.sessions import Mutation, SessionReadError, Snapshot, read_session

# --- hostile values ------------------------------------------------------------------------------
NAMES = ("user", "assistant", "system", "tool", "text", "tool_use", "tool_result", "function_call", "message",
         "human", "ai", "gemini", "toolu_1", "call_1", "c1", "u1", "a1", "$set", "$rewindTo", "compact_boundary")
scalar = (st.none() | st.booleans() | st.integers() | st.sampled_from([2**64, -(2**63) - 1, 10**40])
          | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(NAMES)
          | st.text(st.characters(categories=["L", "N", "P", "Zs", "Cc", "Cs"]), max_size=6))
hostile = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(NAMES) | st.text(max_size=4), inner, max_size=3),
                       max_leaves=6)
# Lines no record should be able to turn into a traceback: not UTF-8, NUL, truncated, corrupt, a
# number Python will not convert (over 4,300 digits), NaN where a name goes, nesting deeper than the
# parser recurses.
RAW_LINES = (b"\xff\xfe{\"type\": \"user\"}", b"\x00", b"{\"type\": \"user\", \"message\": {\"role\"",
             b"{\"a\": 1,, }", b"{\"type\": \"user\", \"n\": " + b"9" * 5000 + b"}", b"{\"type\": NaN}",
             b"[" * 100_000 + b"]" * 100_000, b"\"\\ud800\"", b"[{\"role\": \"user\", \"content\": \"\\udfff\"}]")
_DROP = object()


_DEEP = "<nested 5,000 lists deep>"  # drawn as this marker (Hypothesis prints what it draws), then built


def deepened(value: Any) -> Any:
    """`value` with each `_DEEP` marker replaced by a list nested 5,000 deep."""
    if value == _DEEP:
        deep: list = []
        for _ in range(5000):
            deep = [deep]
        return deep
    if isinstance(value, dict):
        return {k: deepened(v) for k, v in value.items()}
    return [deepened(v) for v in value] if isinstance(value, list) else value


@st.composite
def mutated(draw: st.DrawFn, template: Any, values: st.SearchStrategy = hostile) -> Any:
    """`template` with any of its values, at any depth, replaced by one of `values` or left out.
    Shrinks towards the template itself."""
    if draw(st.integers(0, 7)) == 7:
        return draw(values)
    if isinstance(template, dict):
        out = {}
        for key, value in template.items():
            value = _DROP if draw(st.integers(0, 11)) == 11 else draw(mutated(value, values))
            if value is not _DROP:
                out[key] = value
        return out
    if isinstance(template, list):
        return [draw(mutated(value, values)) for value in template]
    return template


# --- a valid recording of each format (the shapes of tests/instrumentation/test_sessions_*.py) ----
def claude(kind: str, uuid: str, parent: str | None, message: dict | None = None, **extra: Any) -> dict:
    record = {"type": kind, "sessionId": "s", "uuid": uuid, "parentUuid": parent,
              "timestamp": "2026-02-11T21:41:44.800Z", **extra}
    return record if message is None else {**record, "message": message}


CLAUDE_CODE = [
    claude("user", "u1", None, {"role": "user", "content": "Fix the deploy of ORD-1042"}),
    claude("assistant", "a1", "u1", {"id": "m1", "role": "assistant", "content": [
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "/srv/app/deploy.py"}}]}),
    claude("user", "u2", "a1", {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "retry = 3"}]}]}),
    claude("system", "b0", "u2", subtype="microcompact_boundary", microcompactMetadata={
        "trigger": "auto", "preTokens": 900, "compactedToolIds": ["toolu_1"], "tokensSaved": 40}),
    claude("user", "u3", "u1", {"role": "user", "content": "No, start over"}),  # a branch: a rewind
    claude("system", "b1", None, subtype="compact_boundary", compactMetadata={"trigger": "auto", "preTokens": 1000}),
    claude("user", "u4", "b1", {"role": "user", "content": "Summary: retry is 3 in deploy.py"}, isCompactSummary=True),
    claude("assistant", "a2", "u4", {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
]


def codex(kind: str, payload: dict) -> dict:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}


def codex_item(payload: dict) -> dict:
    return codex("response_item", payload)


def codex_text(role: str, kind: str, text: str) -> dict:
    return codex_item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


CODEX = [
    codex("session_meta", {"id": "rollout-7", "base_instructions": {"text": "You are Codex."}}),
    codex("turn_context", {"cwd": "/srv/app", "model": "gpt-5"}),
    codex_text("user", "input_text", "Run the flaky test of ORD-1042"),
    codex_item({"type": "function_call", "name": "shell", "arguments": "{\"cmd\": \"pytest\"}", "call_id": "call_7"}),
    codex_item({"type": "function_call_output", "call_id": "call_7", "output": "1 failed"}),
    codex_item({"type": "reasoning", "summary": [{"type": "summary_text", "text": "retry"}], "encrypted_content": "e"}),
    codex_text("assistant", "output_text", "It fails on retry."),
    codex("compacted", {"message": "ORD-1042 fails on retry", "replacement_history": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ORD-1042 fails on retry"}]},
    ]}),
    codex("event_msg", {"type": "context_compacted"}),
]

GEMINI_META = {"sessionId": "3c1e0a52", "projectHash": "ab" * 32, "startTime": "2026-01-02T10:00:00.000Z"}


def gemini_user(mid: str, text: str) -> dict:
    return {"id": mid, "timestamp": "2026-01-02T10:00:01.000Z", "type": "user", "content": [{"text": text}]}


GEMINI_CLI = [
    GEMINI_META,
    gemini_user("u1", "Fix the flaky deploy"),
    {"id": "g1", "timestamp": "2026-01-02T10:00:02.000Z", "type": "gemini", "content": "Reading.", "toolCalls": [
        {"id": "read-1", "name": "read_file", "args": {"absolute_path": "/srv/a.py"}, "status": "success",
         "result": [{"functionResponse": {"id": "read-1", "name": "read_file", "response": {"output": "x = 1"}}}]}]},
    {"$set": {"lastUpdated": "2026-01-02T10:00:04.000Z"}},
    {"id": "i1", "type": "info", "content": "Switched model"},
    {"$set": {"messages": [gemini_user("s1", "<state_snapshot>x = 1</state_snapshot>"), gemini_user("u2", "go")]}},
    {"$rewindTo": "u2"},
    gemini_user("u3", "Plan it again"),
]

CHAT = [{"role": "system", "content": "sys"}, {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{\"q\": \"x\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "line\n" * 5}]
ANTHROPIC = {"system": "policy", "messages": [
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r", "is_error": False},
                                 {"type": "image", "source": {"type": "base64", "data": "AAAA"}}]}]}
RESPONSES = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
             {"type": "function_call", "name": "sh", "arguments": "{}", "call_id": "c1"},
             {"type": "function_call_output", "call_id": "c1", "output": "done"},
             {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking"}]}]
LANGCHAIN = [{"type": "system", "data": {"content": "sys", "type": "system"}},
             {"type": "human", "data": {"content": "hi", "type": "human"}},
             {"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": [
                 {"name": "f", "args": {}, "id": "c1", "type": "tool_call"}]}},
             {"type": "tool", "data": {"content": "x", "type": "tool", "tool_call_id": "c1"}}]
MESSAGES_JSONL = [CHAT[:2], CHAT, {"messages": CHAT[:2] + [{"role": "user", "content": "again"}]}, ANTHROPIC,
                  RESPONSES, LANGCHAIN]


def oh(i: int, **fields: Any) -> dict:
    return {"id": i, "timestamp": "t", **fields}


RESPONSE = {"id": "resp1", "choices": [{"message": {"content": "two tools", "tool_calls": [
    {"id": "t1", "function": {"name": "run", "arguments": "{\"cmd\": \"ls\"}"}}]}}]}
OPENHANDS = {"events": [
    oh(0, source="agent", action="system", args={"content": "You are OpenHands."}),
    oh(1, source="user", action="message", args={"content": "inspect"}),
    oh(2, source="agent", action="run", args={"command": "ls"},
       tool_call_metadata={"function_name": "run", "tool_call_id": "t1", "model_response": RESPONSE}),
    oh(3, source="agent", observation="run", cause=2, content="a b",
       tool_call_metadata={"function_name": "run", "tool_call_id": "t1"}),
    oh(4, source="agent", observation="error", cause=2, content="denied", message="denied"),
    oh(5, source="agent", action="condensation", args={"forgotten_event_ids": [2, 3], "summary": "listed files",
                                                     "summary_offset": 1}),
    oh(6, source="agent", action="message", args={"content": "done"}),
]}
SWE_AGENT = {"trajectory": [
    {"messages": CHAT[:2]},
    {"messages": CHAT[:3] + [{"role": "tool", "tool_call_ids": ["call_1"], "content": "out", "agent": "main",
                              "message_type": "observation"}]},
    {"messages": CHAT[:3] + [{"role": "tool", "tool_call_ids": ["call_1"], "content": "Old environment output"}],
     "action": "ls", "thought": "t"}],
    "history": CHAT}

JSONL_RECORDINGS = {"claude_code": CLAUDE_CODE, "codex": CODEX, "gemini_cli": GEMINI_CLI,
                    "messages_jsonl": MESSAGES_JSONL}
DOCUMENTS = {"openhands": OPENHANDS, "swe_agent": SWE_AGENT}


def write_jsonl(path: Path, records: list, raw: list[tuple[int, bytes]]) -> None:
    lines = [json.dumps(r).encode() for r in records]  # NaN, Infinity and lone surrogates as JSON writes them
    for at, line in raw:
        lines.insert(at % (len(lines) + 1), line)
    path.write_bytes(b"\n".join(lines) + b"\n")


def assert_read_cleanly(path: Path, fmt: str) -> None:
    """The reader gives events and one-line skips; strict, at most one one-line error; the replay
    audit reads the file and its table, JSON and HTML render."""
    for strict in (False, True):
        try:
            session = read_session(path, fmt, strict=strict)
            assert all(isinstance(e, (Snapshot, Mutation)) for e in session)
            assert all("\n" not in skip.reason for skip in session.skipped)
        except SessionReadError as exc:  # a file that is not a session of this format at all
            assert "\n" not in str(exc)
    audit = audit_session(path, fmt)
    assert audit.error is None or ("cannot be audited" not in audit.error and "\n" not in audit.error), audit.error
    render([audit], io.StringIO(), exit_code=0)
    json.dumps(document([audit], 0, "test"))
    render_html([audit], exit_code=0, version="test").encode("utf-8")


raw_lines = st.lists(st.tuples(st.integers(0, 20), st.sampled_from(RAW_LINES)), max_size=2)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.too_slow])


@pytest.mark.parametrize("fmt", sorted(JSONL_RECORDINGS))
@SETTINGS
@given(data=st.data(), raw=raw_lines)
def test_a_jsonl_recording_with_hostile_values_reads_cleanly(tmp_path: Path, fmt: str, data: st.DataObject,
                                                             raw: list[tuple[int, bytes]]) -> None:
    records = [data.draw(mutated(record), label=f"line {i}") for i, record in enumerate(JSONL_RECORDINGS[fmt], 1)]
    path = tmp_path / f"{fmt}.jsonl"
    write_jsonl(path, records, raw)
    assert_read_cleanly(path, fmt)


@pytest.mark.parametrize("fmt", sorted(DOCUMENTS))
@SETTINGS
@given(data=st.data())
def test_a_document_recording_with_hostile_values_reads_cleanly(tmp_path: Path, fmt: str,
                                                                data: st.DataObject) -> None:
    doc = data.draw(mutated(DOCUMENTS[fmt]), label="document")
    path = tmp_path / f"{fmt}.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    assert_read_cleanly(path, fmt)


@pytest.mark.parametrize("fmt", sorted({*JSONL_RECORDINGS, *DOCUMENTS}))
@pytest.mark.parametrize("line", RAW_LINES, ids=("not-utf8", "nul", "truncated", "corrupt", "huge-number", "nan",
                                                 "deep", "surrogate", "surrogate-message"))
def test_one_unreadable_line_costs_only_itself(tmp_path: Path, fmt: str, line: bytes) -> None:
    """Every raw line, alone after a valid first record (documents: as the whole file)."""
    path = tmp_path / "session.jsonl"
    if fmt in DOCUMENTS:
        path.write_bytes(line + b"\n")
    else:
        write_jsonl(path, JSONL_RECORDINGS[fmt][:1], [(1, line)])
    assert_read_cleanly(path, fmt)


# --- the adapters --------------------------------------------------------------------------------
ADAPTER_INPUTS = {"openai_chat": CHAT, "anthropic": ANTHROPIC, "openai_responses": RESPONSES, "langchain": LANGCHAIN}


@pytest.mark.parametrize("fmt", sorted(ADAPTER_INPUTS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_adapter_given_hostile_values_reads_them_or_names_the_message(fmt: str, data: st.DataObject) -> None:
    value = deepened(data.draw(mutated(ADAPTER_INPUTS[fmt], hostile | st.just(_DEEP)), label="messages"))
    for detected in (fmt, None):
        try:
            messages = to_messages(value, detected)
        except InvalidContextError as exc:
            assert "\n" not in str(exc)
            continue
        for m in messages:
            assert isinstance(m.digest, int) and isinstance(m.text, str)
        try:
            from_messages(messages, fmt)
        except InvalidContextError as exc:  # what the format cannot express
            assert "\n" not in str(exc)


# --- what fuzzing found (regressions) ------------------------------------------------------------
@pytest.mark.parametrize("block_type", [[], {}, {"a": []}])
def test_an_unhashable_block_type_is_carried_as_an_opaque_block(block_type: object) -> None:
    """A block the adapter does not know is kept as it is (written back unchanged), not an unhashable TypeError."""
    value = [{"role": "user", "content": [{"type": block_type, "text": "x"}]}]
    (message,) = to_messages(value, "anthropic")
    assert from_messages([message], "anthropic") == value


def test_an_unhashable_gemini_record_type_is_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    write_jsonl(path, [GEMINI_META, {"id": "x", "type": []}, {"id": "y", "type": {"a": 1}}, *GEMINI_CLI[1:3]], [])
    assert_read_cleanly(path, "gemini_cli")
    assert [len(s.messages) for s in read_session(path).snapshots()][-1] == 3  # the user turn, the call, its result


@pytest.mark.parametrize("function_response", [None, [], "text", 7])
def test_a_gemini_function_response_that_is_not_an_object_is_passed_over(tmp_path: Path,
                                                                          function_response: object) -> None:
    """Found by the fuzz profile: ``[{"functionResponse": null}]`` raised AttributeError in the reader."""
    call = {"id": "read-1", "name": "read_file", "args": {}, "status": "success",
            "result": [{"functionResponse": function_response}]}
    record = {"id": "g1", "timestamp": "2026-01-02T10:00:02.000Z", "type": "gemini", "content": "Reading.",
              "toolCalls": [call]}
    path = tmp_path / "session.jsonl"
    write_jsonl(path, [GEMINI_META, GEMINI_CLI[1], record], [])
    assert_read_cleanly(path, "gemini_cli")
    assert [len(s.messages) for s in read_session(path).snapshots()][-1] == 3  # the user turn, the call, its result


def test_a_lone_surrogate_is_hashed_and_fingerprinted() -> None:
    """JSON's "\\ud800" reads as a lone surrogate, which has no UTF-8: the guard still digests it."""
    from ctxwatch import ContextGuard
    guard = ContextGuard("surrogate")
    context = [{"role": "user", "content": "deploy \ud800 ORD-1042 now"}, {"role": "assistant", "content": "ok \udfff"}]
    guard.observe(context)
    rewritten = guard.apply([{"role": "user", "content": "deploy \ud800 ORD-1042"}], kind="rewrite")
    assert rewritten == [{"role": "user", "content": "deploy \ud800 ORD-1042"}] or rewritten == context


@pytest.mark.parametrize("where", ["message type", "tool call type"])
def test_a_deeply_nested_langchain_type_names_the_field(where: str) -> None:
    """Found by fuzzing: the error message's repr of the value, and a tool call's kept `type`, recursed."""
    value = deepened(_DEEP)
    messages = [{"type": "human", "data": {"content": "hi", "type": "human"}},
                {"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": [
                    {"name": "f", "args": {}, "id": "c1", "type": "tool_call"}]}}]
    if where == "message type":
        messages[0]["type"] = value
    else:
        messages[1]["data"]["tool_calls"][0]["type"] = value
    with pytest.raises(InvalidContextError) as err:
        to_messages(messages, "langchain")
    assert "\n" not in str(err.value) and str(err.value).startswith("message ")


# --- the guard's public API with arguments of the wrong type -------------------------------------
@pytest.mark.parametrize("odd", [None, 7, 2.5, float("nan"), "text", b"bytes", [], {}, object()],
                         ids=lambda v: type(v).__name__)
def test_the_guard_refuses_odd_arguments_with_a_typed_one_line_error(odd: object) -> None:
    from ctxwatch import ContextGuard
    context = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    calls = {
        "observe(boundary=)": lambda g: g.observe(context, boundary=odd),
        "apply(kind=)": lambda g: g.apply(context, kind=odd),
        "apply(tools=)": lambda g: g.apply(context, tools=odd),
        "apply(deferral=)": lambda g: g.apply(context[:1], kind="compact", deferral=odd),
        "check(messages)": lambda g: g.check(odd),
        "self_edit": lambda g: g.self_edit(odd),
        "pin_symbols": lambda g: g.pin_symbols(context, odd),
        "ContextGuard(enforce=)": lambda g: ContextGuard("odd", enforce=odd),
        "ContextGuard(pass_cap=)": lambda g: ContextGuard("odd", pass_cap=odd),
    }
    for name, call in calls.items():
        guard = ContextGuard("odd")
        guard.observe(context)
        try:
            call(guard)
        except Exception as exc:  # noqa: BLE001 - which exceptions is what is checked
            if type(exc).__module__ == "ctxwatch.errors" and not isinstance(exc, InvalidContextError):
                continue  # the guard's decision on what it was given (its report, several lines)
            assert isinstance(exc, (ValueError, TypeError)), name
            assert "\n" not in str(exc) and str(exc), name
            assert not any(word in str(exc) for word in ("unhashable", "not iterable", "not supported between",
                                                         "has no attribute")), f"{name}: {exc}"
