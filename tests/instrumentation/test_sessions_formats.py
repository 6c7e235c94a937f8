"""Issue 7 §2, the session readers on generated files: snapshot JSONL in every message format,
Codex compactions, OpenHands condensation, and how a change between two recorded buffers is
classified (compact / prune / rewrite / rerank) for a later ``ctxwatch replay``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwatch.model import Message, ToolCall, ToolResult
from ctxwatch.sessions import Mutation, Snapshot, classify_change, detect_session_format, read_session
from ctxwatch.sessions.events import buffer_change


def jsonl(path: Path, values: list) -> Path:
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    return path


def events_of(path: Path) -> list:
    session = read_session(path)
    out = list(session)
    assert session.skipped == []
    return out


CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]}


def test_chat_snapshots_with_an_elision(tmp_path: Path) -> None:
    base = [{"role": "system", "content": "sys"}, {"role": "user", "content": "find it"}, CALL,
            {"role": "tool", "tool_call_id": "call_1", "content": "line\n" * 50}]
    elided = base[:3] + [{"role": "tool", "tool_call_id": "call_1", "content": "(50 lines omitted)"}]
    path = jsonl(tmp_path / "chat.jsonl", [base[:2], base, {"messages": elided + [{"role": "user", "content": "ok"}]}])
    assert detect_session_format(path) == "messages_jsonl"
    events = events_of(path)
    assert [type(e).__name__ for e in events] == ["Snapshot", "Snapshot", "Mutation", "Snapshot"]
    mutation = events[2]
    assert (mutation.kind, mutation.source, mutation.step, mutation.line, mutation.changed) == (
        "prune", "snapshot_diff", 2, 3, (3,))
    assert mutation.size_after < mutation.size_before


def test_anthropic_request_snapshots_with_a_compaction(tmp_path: Path) -> None:
    turn = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]}]
    first = {"system": "policy", "messages": turn}
    second = {"system": "policy", "messages": [{"role": "user", "content": "summary of q"},
                                              {"role": "assistant", "content": "next"}]}
    events = events_of(jsonl(tmp_path / "a.jsonl", [first, second]))
    mutation = next(e for e in events if isinstance(e, Mutation))
    assert mutation.kind == "compact" and mutation.changed == (1, 2, 3)
    assert mutation.before[0].role == "system" and mutation.after[0] == mutation.before[0]
    assert events[0].messages[2].call_ids == ("toolu_1",)


def test_langchain_dict_snapshots(tmp_path: Path) -> None:
    line = [{"type": "human", "data": {"content": "hi", "type": "human"}},
            {"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": [
                {"name": "f", "args": {}, "id": "c1", "type": "tool_call"}]}},
            {"type": "tool", "data": {"content": "x", "type": "tool", "tool_call_id": "c1"}}]
    (snapshot,) = events_of(jsonl(tmp_path / "lc.jsonl", [line]))
    assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool"]
    assert snapshot.messages[2].result_ids == ("c1",)


def test_snapshot_line_that_is_not_messages_is_a_skip(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "s.jsonl", [[{"role": "user", "content": "a"}], {"nothing": 1},
                                        [{"role": "robot", "content": "b"}]])
    session = read_session(path)
    assert len(list(session)) == 1
    assert [(s.line, s.reason) for s in session.skipped] == [
        (2, "expected a list of messages or an object with a 'messages' list"),
        (3, "message 0, field 'role': unknown role 'robot' (expected one of system, developer, user, assistant, tool)")]


def codex(kind: str, payload: dict) -> dict:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": kind, "payload": payload}


def test_codex_turns_and_an_older_compaction_without_history(tmp_path: Path) -> None:
    records = [
        codex("session_meta", {"id": "s", "base_instructions": {"text": "be good"}}),
        codex("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}),
        codex("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "e"}),
        codex("response_item", {"type": "function_call", "name": "sh", "arguments": "{}", "call_id": "c1"}),
        codex("response_item", {"type": "function_call_output", "call_id": "c1", "output": "done"}),
        codex("response_item", {"type": "message", "role": "assistant",
                                "content": [{"type": "output_text", "text": "ok"}]}),
        codex("compacted", {"message": "we ran sh"}),
        codex("event_msg", {"type": "context_compacted"}),
        codex("response_item", {"type": "message", "role": "user",
                                "content": [{"type": "input_text", "text": "more"}]}),
    ]
    path = jsonl(tmp_path / "rollout.jsonl", records)
    assert detect_session_format(path) == "codex"
    events = events_of(path)
    snapshots = [e for e in events if isinstance(e, Snapshot)]
    assert [len(s.messages) for s in snapshots] == [1, 4, 3]  # before reasoning+call, before "ok", final
    (mutation,) = [e for e in events if isinstance(e, Mutation)]
    assert mutation.line == 7 and mutation.summary.text == "we ran sh"
    # Codex rebuilds the history: the user's messages, then the summary (build_compacted_history)
    assert [(m.role, m.text) for m in mutation.after] == [("user", "go"), ("user", "we ran sh")]
    assert mutation.after[-1] is mutation.summary
    assert [m.text for m in snapshots[-1].messages] == ["go", "we ran sh", "more"]


def openhands_event(i: int, **fields: object) -> dict:
    return {"id": i, "timestamp": "t", **fields}


def test_openhands_condensation_and_parallel_calls(tmp_path: Path) -> None:
    response = {"id": "resp1", "choices": [{"message": {"content": "two tools", "tool_calls": [
        {"id": "t1", "function": {"name": "run", "arguments": '{"cmd": "ls"}'}},
        {"id": "t2", "function": {"name": "run", "arguments": '{"cmd": "pwd"}'}}]}}]}
    events = [
        openhands_event(0, source="agent", action="system", args={"content": "You are OpenHands."}),
        openhands_event(1, source="user", action="message", args={"content": "inspect"}),
        openhands_event(2, source="agent", action="run", args={"command": "ls"},
                        tool_call_metadata={"function_name": "run", "tool_call_id": "t1", "model_response": response}),
        openhands_event(3, source="agent", action="run", args={"command": "pwd"},
                        tool_call_metadata={"function_name": "run", "tool_call_id": "t2", "model_response": response}),
        openhands_event(4, source="agent", observation="run", cause=2, content="a b",
                        tool_call_metadata={"function_name": "run", "tool_call_id": "t1"}),
        openhands_event(5, source="agent", observation="error", cause=3, content="denied",
                        tool_call_metadata={"function_name": "run", "tool_call_id": "t2"}),
        openhands_event(6, source="agent", action="condensation",
                        args={"forgotten_event_ids": [2, 3, 4, 5], "summary": "listed files", "summary_offset": 2}),
        openhands_event(7, source="agent", action="message", args={"content": "done"}),
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps({"events": events}, indent=2), encoding="utf-8")
    assert detect_session_format(path) == "openhands"
    out = events_of(path)
    (mutation,) = [e for e in out if isinstance(e, Mutation)]
    call_message = mutation.before[2]
    assert call_message.parts[1:] == (ToolCall("t1", "run", '{"cmd": "ls"}'), ToolCall("t2", "run", '{"cmd": "pwd"}'))
    assert call_message.text.startswith("two tools")
    assert mutation.before[4].parts == (ToolResult("t2", "denied", is_error=True),)
    assert (mutation.kind, mutation.source) == ("compact", "openhands.condensation")
    assert [m.text for m in mutation.after] == ["You are OpenHands.", "inspect", "listed files"]
    assert out[-1].final and out[-1].messages[-1].text == "done"


def test_single_line_documents_are_detected(tmp_path: Path) -> None:
    traj = tmp_path / "one.traj"
    traj.write_text(json.dumps({"trajectory": [{"messages": [{"role": "user", "content": "x"}]}]}))
    assert detect_session_format(traj) == "swe_agent"
    (snapshot,) = events_of(traj)
    assert snapshot.where == "trajectory[0]"


M = {name: Message("user" if name.startswith("u") else "tool", name * 20) for name in ("u1", "u2", "t1", "t2", "s")}


@pytest.mark.parametrize(("before", "after", "expected"), [
    (["u1", "t1"], ["u1", "t1", "u2"], None),
    (["u1", "t1", "u2"], ["u1", "t2", "u2"], ("rewrite", (1,))),
    (["u1", "t1", "u2"], ["u2", "u1", "t1"], ("rerank", ())),
    (["u1", "t1", "u2"], ["u1", "u2", "t2"], ("prune", (1,))),
    (["u1", "t1", "u2"], ["s", "u2", "t2"], ("compact", (0, 1))),
    (["u1", "t1"], ["s"], ("compact", (0, 1))),
    (["u1", "t1"], [], ("prune", (0, 1))),
])
def test_classify_change(before: list[str], after: list[str], expected: tuple | None) -> None:
    assert classify_change([M[n] for n in before], [M[n] for n in after]) == expected


def test_classify_in_place_elision_is_prune() -> None:
    before = [Message("user", "q"), Message("tool", [ToolResult("c", "x" * 100)])]
    after = [Message("user", "q"), Message("tool", [ToolResult("c", "(100 chars omitted)")])]
    assert classify_change(before, after) == ("prune", (1,))


@pytest.mark.parametrize(("after", "appended"), [
    (["u", "cleared", "call2", "out2"], 2),     # an output elided in place, then the model's reply and its result
    (["u", "cleared", "call2", "out2", "u2"], 3),  # ... and the next user message
    (["u", "summary", "call2", "out2"], 2),     # a summary the rewrite wrote, then the next turn: the turn only
    (["u", "summary"], 0),                      # a summary written at the end: the rewrite's own
])
def test_buffer_change_takes_the_turns_appended_after_the_change_first(after: list[str], appended: int) -> None:
    """Review F2: the mutation between two recorded buffers starts from the buffer before plus the turns the
    buffer after ends with from the model's reply on, as the guard evaluates a rewrite on top of the turns
    appended since its last observe()."""
    m = {"u": Message("user", "q"), "call": Message("assistant", [ToolCall("c1", "bash", {"command": "ls"})]),
         "out": Message("tool", [ToolResult("c1", "x" * 100)]),
         "cleared": Message("tool", [ToolResult("c1", "Old environment output: (7 lines omitted)")]),
         "summary": Message("user", "Summary: listed the repository."),
         "call2": Message("assistant", [ToolCall("c2", "bash", {"command": "cat a"})]),
         "out2": Message("tool", [ToolResult("c2", "a")]), "u2": Message("user", "next")}
    before, buffer = (m["u"], m["call"], m["out"]), tuple(m[n] for n in ["u", "call", *after[1:]])
    mutation = buffer_change(before, buffer, 1, "snapshot_diff", "line 2", 2)
    assert mutation is not None and mutation.after == buffer
    assert mutation.before == before + buffer[len(buffer) - appended:]
    assert (mutation.kind, mutation.changed) == classify_change(before, buffer)
