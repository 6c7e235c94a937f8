"""Issue 7 "Must show", bad input to the session readers: a one-line message naming file and line.

Missing, empty, binary, unrecognised files and single documents over the size cap raise
`SessionReadError` (an `InvalidContextError`) at `read_session`; corrupt, truncated and over-long
JSONL lines, and records that are not valid messages, are reported skips (with line numbers)
while the rest of the file is read, or an error at the first one with ``strict=True``. A large
JSONL file is streamed (generated here at ~40 MB, read line by line).
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ctxwatch.errors import InvalidContextError
from ctxwatch.sessions import Mutation, SessionReadError, Snapshot, read_session


def claude_line(i: int, role: str = "user", text: str = "hello", **extra: object) -> str:
    record = {"type": role, "uuid": f"u{i}", "parentUuid": f"u{i - 1}" if i else None, "sessionId": "s",
              "message": {"role": role, "content": text, **({"id": f"msg_{i}"} if role == "assistant" else {})}}
    return json.dumps({**record, **extra})


def write(path: Path, lines: list[str], end: str = "\n") -> Path:
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


@pytest.mark.parametrize(("content", "reason"), [
    (None, "no such file"),
    (b"", "is empty"),
    (b"\n  \n", "is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "is a binary file, not JSON or JSONL"),
    (b"hello world\nnot json\n", "unrecognised session format"),
    (b'{"some": "object"}\n{"other": 1}\n', "unrecognised session format"),
])
def test_unreadable_files_fail_with_one_line(tmp_path: Path, content: bytes | None, reason: str) -> None:
    path = tmp_path / "session.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SessionReadError) as info:
        read_session(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and reason in message and "\n" not in message
    assert isinstance(info.value, InvalidContextError)


def test_directory_and_unknown_format_name(tmp_path: Path) -> None:
    with pytest.raises(SessionReadError, match="is a directory"):
        read_session(tmp_path)
    good = write(tmp_path / "s.jsonl", [claude_line(0)])
    with pytest.raises(SessionReadError, match="unknown session format 'gemini'"):
        read_session(good, "gemini")


def test_corrupt_and_truncated_lines_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    lines = [claude_line(0), claude_line(1, "assistant", "hi"), '{"type": "user", "uuid": "broken',
             claude_line(3), "[1, 2", claude_line(5, "assistant", "bye"),
             claude_line(6, "user", "x")[:40]]  # the last line cut mid-record, no newline
    path = write(tmp_path / "s.jsonl", lines, end="")
    session = read_session(path)
    events = list(session)
    assert [(s.line, s.reason.split(" (")[0]) for s in session.skipped] == [
        (3, "truncated JSON"), (5, "truncated JSON"), (7, "truncated JSON")]
    final = events[-1]
    assert isinstance(final, Snapshot) and [m.text for m in final.messages] == ["hello", "hi", "hello", "bye"]
    with pytest.raises(SessionReadError, match=rf"^{path}, line 3: truncated JSON"):
        list(read_session(path, strict=True))


def test_corrupt_line_in_the_middle_of_json(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [claude_line(0), '{"type": "user",, "uuid": "x"}', claude_line(2)])
    session = read_session(path)
    list(session)
    (skip,) = session.skipped
    assert skip.line == 2 and skip.reason.startswith("corrupt JSON (Expecting property name")


def test_invalid_message_records_are_skipped(tmp_path: Path) -> None:
    bad = json.dumps({"type": "assistant", "uuid": "u1", "sessionId": "s", "message": {
        "role": "assistant", "id": "m", "content": [{"type": "tool_use", "name": "Bash", "input": {}}]}})
    path = write(tmp_path / "s.jsonl", [claude_line(0), bad, "[]", claude_line(3)])
    session = read_session(path)
    list(session)
    assert [(s.line, s.reason) for s in session.skipped] == [
        (2, "field 'content[0].id': missing"), (3, "not a JSON object")]


def test_invalid_bytes_and_deep_nesting(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(claude_line(0).encode() + b"\n" + b'{"type": "user", "x": "\xff\xfe"}\n'
                     + b"[" * 200_000 + b"]" * 200_000 + b"\n" + claude_line(3).encode() + b"\n")
    session = read_session(path)
    list(session)
    assert [(s.line, s.reason) for s in session.skipped] == [(3, "JSON nested too deeply to read")]


def test_a_record_with_a_byte_that_is_not_utf8_is_read_whole(tmp_path: Path) -> None:
    """Review F5: one Latin-1 byte in a tool call's input dropped the whole record, and its result then read
    as an orphan. The record is read with U+FFFD in the byte's place; bytes that are no JSON even so are
    skipped as before."""
    from ctxwatch.sessions.files import BadJSON, parse_line

    assert parse_line(b'{"path": "/srv/caf\xe9.txt"}') == {"path": "/srv/caf\ufffd.txt"}
    assert parse_line(b'\xef\xbb\xbf{"a": "\xff"}') == {"a": "\ufffd"}
    for garbage in (b"\x00\x01 garbage \xff\xfe", b'{"a": "\xff"'):
        with pytest.raises(BadJSON, match="not UTF-8 text"):
            parse_line(garbage)


def test_over_long_line_is_skipped_without_reading_it_whole(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [claude_line(0), claude_line(1, text="x" * 5000), claude_line(2)])
    session = read_session(path, max_line_bytes=1000)
    events = list(session)
    assert [(s.line, s.reason) for s in session.skipped] == [(2, "line longer than 1000 bytes")]
    assert [m.text for m in events[-1].messages] == ["hello\nhello"]


def test_single_documents_over_the_cap_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.traj"
    path.write_text(json.dumps({"trajectory": [{"messages": [{"role": "user", "content": "x" * 4096}]}]}))
    with pytest.raises(SessionReadError, match=r"over the 0 MiB limit for single-document formats"):
        list(read_session(path, max_document_bytes=1024))
    truncated = tmp_path / "cut.traj"
    truncated.write_text(json.dumps({"trajectory": [{"messages": []}]}, indent=2)[:-3])
    with pytest.raises(SessionReadError, match=rf"^{truncated}, line \d+: truncated JSON"):
        list(read_session(truncated))


def test_large_jsonl_is_streamed_with_bounded_memory(tmp_path: Path) -> None:
    """~40 MB of Claude Code records with a compaction every 2,000 lines: memory stays far below the file."""
    path = tmp_path / "big.jsonl"
    filler = "y" * 4000
    with path.open("w", encoding="utf-8") as f:
        for i in range(10_000):
            if i % 2000 == 1999:
                f.write(json.dumps({"type": "system", "subtype": "compact_boundary", "uuid": f"b{i}",
                                    "sessionId": "s", "compactMetadata": {"trigger": "auto", "preTokens": i}}) + "\n")
            else:
                f.write(claude_line(i, "assistant" if i % 2 else "user", filler) + "\n")
    assert path.stat().st_size > 35_000_000
    tracemalloc.start()
    try:
        compactions = 0
        for event in read_session(path):
            compactions += isinstance(event, Mutation)
            del event
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert compactions == 4  # the fifth boundary is the last line: a compaction in progress, no mutation yet
    assert peak < 25_000_000


json_value = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                          lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                          max_leaves=8)
claude_record = st.fixed_dictionaries(
    {"type": st.sampled_from(["user", "assistant", "system", "progress"]), "sessionId": st.just("s")},
    optional={"uuid": st.sampled_from(["a", "b", "c"]), "parentUuid": st.sampled_from(["a", "b", "c", None]),
              "subtype": st.just("compact_boundary"), "isCompactSummary": st.booleans(),
              "compactMetadata": json_value,
              "message": st.fixed_dictionaries({}, optional={"role": json_value, "content": json_value,
                                                             "id": json_value})})
codex_record = st.fixed_dictionaries(
    {"type": st.sampled_from(["response_item", "compacted", "event_msg"]),
     "payload": st.fixed_dictionaries({}, optional={
         "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning"]),
         "role": json_value, "content": json_value, "call_id": json_value, "name": json_value,
         "arguments": json_value, "output": json_value, "replacement_history": json_value})})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(claude_record | json_value, min_size=1, max_size=12), st.booleans())
@example(records=[[{"type": []}]], codex=False)  # found by CI: a list where a type name goes
@example(records=[{"type": {}, "payload": {"role": []}}, {"type": [], "messages": [{"role": {}}]}], codex=True)
def test_arbitrary_records_never_escape_as_tracebacks(tmp_path: Path, records: list, codex: bool) -> None:
    """Whatever the records hold, a reader yields events and skips; only SessionReadError when strict."""
    if codex:
        records = [{"type": "session_meta", "payload": {}}] + records
    path = tmp_path / "fuzz.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    for fmt in ("claude_code", "codex", "messages_jsonl"):
        session = read_session(path, fmt)
        events = list(session)
        assert all(isinstance(e, (Snapshot, Mutation)) for e in events)
        try:
            list(read_session(path, fmt, strict=True))
        except SessionReadError as exc:
            assert "\n" not in str(exc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(codex_record, min_size=1, max_size=10))
def test_arbitrary_codex_payloads_are_events_or_skips(tmp_path: Path, records: list) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    session = read_session(path, "codex")
    assert all(isinstance(e, (Snapshot, Mutation)) for e in session)


openhands_event = st.fixed_dictionaries({"id": st.integers(0, 5)}, optional={
    "source": st.sampled_from(["user", "agent"]),
    "action": st.sampled_from(["message", "system", "run", "condensation"]),
    "observation": st.sampled_from(["run", "error"]), "args": json_value, "content": json_value,
    "tool_call_metadata": st.fixed_dictionaries({}, optional={
        "tool_call_id": json_value, "function_name": json_value, "model_response": json_value})})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(openhands_event | json_value, max_size=10), st.lists(json_value | st.fixed_dictionaries(
    {"messages": st.lists(json_value, max_size=3)}), max_size=4))
def test_arbitrary_documents_are_events_or_skips(tmp_path: Path, events: list, steps: list) -> None:
    (tmp_path / "e.json").write_text(json.dumps(events), encoding="utf-8")
    (tmp_path / "t.traj").write_text(json.dumps({"trajectory": steps}), encoding="utf-8")
    for name, fmt in (("e.json", "openhands"), ("t.traj", "swe_agent")):
        assert all(isinstance(e, (Snapshot, Mutation)) for e in read_session(tmp_path / name, fmt))


UNHASHABLE = ([], {}, [["user"]], {"role": "user"})


@pytest.mark.parametrize("value", UNHASHABLE, ids=("list", "dict", "nested", "object"))
def test_unhashable_values_where_names_go_are_skipped_with_a_line(tmp_path: Path, value: object) -> None:
    """A list or object where a record type, role or message type is expected is a skip naming its line."""
    records = [
        {"type": "session_meta", "payload": {}},
        {"type": value, "sessionId": "s", "uuid": "a"},
        {"type": "response_item", "payload": {"type": "message", "role": value, "content": []}},
        [{"type": value, "data": {}}, {"role": value, "content": "x"}],
        {"messages": [{"type": value}, {"role": value}]},
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    for fmt in ("claude_code", "codex", "messages_jsonl"):
        assert all(isinstance(e, (Snapshot, Mutation)) for e in read_session(path, fmt))
        with pytest.raises(SessionReadError, match=rf"^{path}, line \d+: "):
            list(read_session(path, fmt, strict=True))
