"""Records a session file holds twice, read as the agent reads them back.

Claude Code keeps one record per ``uuid`` (its transcript loader maps uuid to record, a later copy in place of the
earlier; the chain is walked from the leaf through ``parentUuid``): a copy is the same record. So every corpus Claude
Code session with 5 % of its records logged again (seeded; right after themselves or later; byte for byte or with
other metadata), followed line by line as ``ctxwatch watch`` follows it (text put away at every wait, read back from
the file), sends the spans ``replay`` sends of the original. A copy of a message record still in the buffer whose
message differs takes its place (``claude_code.repeated_record``), read back from the copy's line.

Codex keeps every item of a rollout in order on resume (no identity to merge by): a repeated item is read twice. A
rollout of the pre-envelope shape (mid 2025: a bare header line, ``record_type`` markers, bare Responses items) is
a ``codex`` session, read as its envelope form is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from backfill_spans import backfilled
from corpus_files import CORPUS, of_kind
from followed_sessions import follow, line_by_line
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from repeated_records import variants

from ctxwatch.model import ToolResult
from ctxwatch.replay.audit import audit_session
from ctxwatch.replay.schema import session_json
from ctxwatch.sessions import Mutation, SessionReadError, detect_session_format, read_session
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.watch.identity import file_loop_id, loop_id_for


def _spans(spans: Sequence[ReadableSpan]) -> list[tuple]:
    return [(s.name, s.start_time, dict(s.attributes or {})) for s in spans]


def _followed(path: Path, written_from: Path, loop_id: str) -> list[tuple]:
    """The spans a watcher sends of `path` while `written_from` is written into it one line per wait."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    follow(path, line_by_line(written_from, path), MutationTelemetry(provider, capture_content=False), loop_id)
    return _spans(exporter.get_finished_spans())


@pytest.mark.parametrize("original", of_kind("claude_code", CORPUS), ids=lambda p: p.name[:48])
def test_records_logged_twice_are_followed_as_the_original(original: Path, tmp_path: Path) -> None:
    loop_id = loop_id_for(original, "claude_code", file_id=file_loop_id(original))
    replay = _spans(backfilled(original, "a")[1])
    for v in variants(original):
        source = v.write(tmp_path / f"source-{original.name}")
        followed = _followed(tmp_path / original.name, source, loop_id)
        assert followed == replay[:len(followed)] and len(followed) >= len(replay) - 1, v.name


def _record(kind: str, uuid: str, parent: str | None, content: object, **fields: object) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": "repeated", "type": kind,
                       "uuid": uuid, "timestamp": "2026-02-11T21:41:40.277Z",
                       "message": {"role": "user" if kind == "user" else "assistant", "content": content, **fields}})


def _call(uuid: str, parent: str | None, turn: str, call: str) -> str:
    return _record("assistant", uuid, parent, [{"type": "tool_use", "id": call, "name": "Bash",
                                                "input": {"command": "ls build"}}], id=turn)


def _result(uuid: str, parent: str, call: str, output: str) -> str:
    return _record("user", uuid, parent, [{"type": "tool_result", "tool_use_id": call, "content": output}])


OUTPUT, AGAIN = "build/app.tar.gz checksum 8f3a9c", "build/app.tar.gz checksum 5d21e0 (rebuilt)"
SESSION = [
    _record("user", "u1", None, "List the build outputs"),
    _call("a1", "u1", "msg_1", "toolu_01"),
    _result("r1", "a1", "toolu_01", OUTPUT),
    _record("assistant", "a2", "r1", [{"type": "text", "text": "One archive."}], id="msg_2"),
    _result("r1", "a1", "toolu_01", AGAIN),  # the result logged again, its output other
    _record("user", "u2", "a2", "Ship it"),
    _record("assistant", "a3", "u2", [{"type": "text", "text": "Shipped."}], id="msg_3"),
]


def _results(messages: Sequence) -> list[object]:
    return [p.text() for m in messages for p in m.parts if type(p) is ToolResult]


def test_a_copy_whose_message_differs_takes_the_place_of_its_record(tmp_path: Path) -> None:
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_text("".join(line + "\n" for line in SESSION), encoding="utf-8")
    events = list(read_session(path))
    (mutation,) = [e for e in events if isinstance(e, Mutation)]
    assert (mutation.kind, mutation.source, mutation.line, mutation.changed) == (
        "rewrite", "claude_code.repeated_record", 5, (2,))
    assert _results(mutation.before) == [OUTPUT] and _results(mutation.after) == [AGAIN]
    assert _results(events[-1].messages) == [AGAIN] and len(events[-1].messages) == 6  # u2 merged after the result
    audit = audit_session(path)
    assert audit.buffer_orphans == [] and [m.source for m in audit.mutations] == ["claude_code.repeated_record"]
    followed = _followed(tmp_path / "followed.jsonl", path, audit.loop_id)  # read back from the copy's line
    replay = _spans(backfilled(path, "a")[1])
    assert followed == replay[:len(followed)] and len(followed) >= len(replay) - 1


def _codex_shapes(tmp_path: Path) -> tuple[Path, Path, str]:
    """The corpus rollout up to its first ``compacted`` record (the pre-envelope shape records none), as it is and
    converted to the pre-envelope shape, in a ``~/.codex/sessions/<date>`` directory under its own name."""
    (rollout,) = of_kind("codex", CORPUS)[:1]
    envelope, legacy = [], []
    for line in rollout.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["type"] == "compacted":
            break
        envelope.append(line)
        if record["type"] == "session_meta":
            meta = record["payload"]
            legacy += [{"id": meta["id"], "timestamp": meta["timestamp"], "instructions": None,
                        "git": meta.get("git")}, {"record_type": "state"}]
        elif record["type"] == "response_item":
            legacy.append(record["payload"])
    day = tmp_path / ".codex" / "sessions" / "2025" / "08" / "20"
    day.mkdir(parents=True)
    legacy_path = day / f"rollout-2025-08-20T13-20-47-{legacy[0]['id']}.jsonl"
    legacy_path.write_text("".join(json.dumps(r) + "\n" for r in legacy), encoding="utf-8")
    envelope_path = tmp_path / "envelope.jsonl"
    envelope_path.write_text("".join(line + "\n" for line in envelope), encoding="utf-8")
    return envelope_path, legacy_path, legacy[0]["id"]


_SAME_IN_BOTH = ("status", "error", "format", "steps", "messages", "tool_pairs", "mutations", "verdict", "findings",
                 "session_findings")


def test_a_pre_envelope_codex_rollout_reads_as_its_envelope_form(tmp_path: Path) -> None:
    envelope, legacy, session_id = _codex_shapes(tmp_path)
    assert detect_session_format(legacy) == "codex"
    want, got = session_json(audit_session(envelope)), session_json(audit_session(legacy))
    assert want["tool_pairs"]["paired"] > 100 and want["steps"] > 100
    assert {k: got[k] for k in _SAME_IN_BOTH} == {k: want[k] for k in _SAME_IN_BOTH}
    assert got["loop_id"] == loop_id_for(legacy, "codex") == f"codex-{session_id}"


def test_a_pre_envelope_rollout_is_known_from_its_header_and_name_alone(tmp_path: Path) -> None:
    header = json.dumps({"id": "019c8a59-e9dd-71f0-9ae3-4079fe9726a9", "timestamp": "2025-08-20T13:20:47.000Z"})
    named = tmp_path / "rollout-2025-08-20T13-20-47-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
    named.write_text(header + "\n", encoding="utf-8")
    assert detect_session_format(named) == "codex"
    other = tmp_path / "notes.jsonl"  # the same record, in a file named otherwise: nothing says Codex
    other.write_text(header + "\n", encoding="utf-8")
    with pytest.raises(SessionReadError, match="unrecognised session format"):
        detect_session_format(other)


def test_a_repeated_codex_item_is_read_twice_as_codex_resumes_it(tmp_path: Path) -> None:
    meta = {"timestamp": "2026-02-23T12:54:34Z", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}}
    item = {"timestamp": "2026-02-23T12:54:35Z", "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}}
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (meta, item, item)), encoding="utf-8")
    *_, final = read_session(path)
    assert [m.role for m in final.messages] == ["user", "user"]
