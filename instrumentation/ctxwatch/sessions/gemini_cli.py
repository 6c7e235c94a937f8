"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json[l]``) -> events.

Two shapes, one record model (gemini-cli's ``ConversationRecord``):

- the JSON document of older versions: ``{"sessionId", "projectHash", "startTime", "lastUpdated",
  "messages": [...]}``, read whole under the session's size cap;
- the JSONL log of newer versions: a metadata line (``sessionId``, ``projectHash``), then one line
  per message record (a record whose ``id`` was seen before replaces it: tool calls and token
  counts are added to a turn that way), ``{"$rewindTo": id}`` (the history from that message on is
  dropped) and ``{"$set": {...}}`` metadata updates; a ``$set`` with ``messages`` replaces the whole
  history, which is how the CLI records a history it rewrote (chat compression's summary turns,
  tool outputs masked).

The buffer: a ``user`` record is a user message; a ``gemini`` record is an assistant message (its
text, then a tool call per ``toolCalls`` entry, ``args`` as JSON) followed, when results are
recorded (and not empty, `_sent`), by a user message of their ``functionResponse`` results (``status``
``error`` marks an error result), as the Gemini API receives them. ``info`` / ``error`` / ``warning`` records are the
CLI's own notices and thought summaries are not sent back: neither is in the buffer. A `Snapshot`
comes before each ``gemini`` record. ``$rewindTo`` is a ``prune`` Mutation (source
``gemini_cli.rewind``); a replaced history that is not the old one plus appended messages is a
Mutation of the kind `classify_change` names (source ``gemini_cli.history``, `buffer_change`): a compression
shows as ``compact``, masked outputs as ``prune``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model import Message, OpaquePart, Part, TextPart, ToolCall, ToolResult, canonical_json
from .events import Event, Mutation, Snapshot, buffer_change
from .files import SessionReadError, iter_jsonl

if TYPE_CHECKING:
    from .session import Session

MODEL_FACING = frozenset({"user", "gemini"})


def is_recording(value: Any) -> bool:
    """Whether a JSON value is a Gemini CLI conversation record (or its JSONL metadata line)."""
    return isinstance(value, dict) and isinstance(value.get("sessionId"), str) and "projectHash" in value


class _History:
    """The recorded messages by id, in order, and the buffer they make."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.messages: dict[str, tuple[Message, ...]] = {}
        self._buffer: tuple[Message, ...] | None = ()

    def buffer(self) -> tuple[Message, ...]:
        if self._buffer is None:
            self._buffer = tuple(m for key in self.order for m in self.messages[key])
        return self._buffer

    def put(self, key: str, messages: tuple[Message, ...]) -> None:
        old = self.messages.get(key)
        if old is None:
            self.order.append(key)
        if self._buffer is not None and (old is None or key == self.order[-1]):  # at the end: no rebuild
            self._buffer = self._buffer[: len(self._buffer) - len(old or ())] + messages
        else:
            self._buffer = None
        self.messages[key] = messages

    def rewind(self, key: str) -> bool:
        if key not in self.messages:
            return False
        at = self.order.index(key)
        for gone in self.order[at:]:
            del self.messages[gone]
        del self.order[at:]
        self._buffer = None
        return True

    def replace(self, records: list[tuple[str, tuple[Message, ...]]]) -> None:
        self.order = [key for key, _ in records]
        self.messages = dict(records)
        self._buffer = None


def events(session: Session) -> Iterator[Event]:
    if is_log(session.path, session.max_line_bytes):
        yield from _log(session)
    else:
        yield from _document(session)


def is_log(path: Path, max_line_bytes: int) -> bool:
    """Whether the file is the JSONL log: its first line is a metadata record without the messages."""
    first = next(iter_jsonl(path, lambda line, reason: None, max_line_bytes), None)
    return first is not None and is_recording(first[1]) and not isinstance(first[1].get("messages"), list)


def _document(session: Session) -> Iterator[Event]:
    doc = session.document()
    if not is_recording(doc) or not isinstance(doc.get("messages"), list):
        raise SessionReadError(session.path, "not a Gemini CLI chat recording (no sessionId and messages list)")
    history, step = _History(), 0
    session.note_time(doc, key="lastUpdated")  # when the document says nothing more precise
    session.note_time(doc, key="startTime")
    for i, record in enumerate(doc["messages"]):
        where = f"messages[{i}]"
        session.note_time(record)  # a snapshot is timed at the response it precedes, as in the JSONL formats
        read = _read(session, record, where, None)
        if read is None:
            continue
        key, kind, messages = read
        if kind == "gemini":
            yield Snapshot(step, history.buffer(), where)
            step += 1
        history.put(key, messages)
    yield Snapshot(step, history.buffer(), f"messages[{len(doc['messages']) - 1}]", final=True)


def _log(session: Session) -> Iterator[Event]:
    history, step, last_line = _History(), 0, 0
    for line, record in session.lines():
        last_line, where = line, f"line {line}"
        if not isinstance(record, dict):
            session.skip(line, "not a JSON object")
            continue
        if isinstance(record.get("$rewindTo"), str):
            before = history.buffer()
            if history.rewind(record["$rewindTo"]) and history.buffer() != before:
                after = history.buffer()
                yield Mutation("prune", step, before, after, "gemini_cli.rewind", where, line=line,
                               changed=tuple(range(len(after), len(before))))
            continue
        update = record.get("$set")
        if isinstance(update, dict):
            if isinstance(update.get("messages"), list):
                yield from _replace(session, history, update["messages"], step, line)
            continue
        if is_recording(record):
            continue  # the metadata line
        read = _read(session, record, where, line)
        if read is None:
            continue
        key, kind, messages = read
        if kind == "gemini" and key not in history.messages:
            yield Snapshot(step, history.buffer(), where, line)
            step += 1
        history.put(key, messages)
    yield Snapshot(step, history.buffer(), f"line {last_line}", last_line or None, final=True)


def _replace(session: Session, history: _History, records: list, step: int, line: int) -> Iterator[Event]:
    where = f"line {line}"
    read = [r for i, rec in enumerate(records) if (r := _read(session, rec, f"{where}, messages[{i}]", line))]
    before = history.buffer()
    history.replace([(key, messages) for key, _, messages in read])
    after = history.buffer()
    mutation = buffer_change(before, after, step, "gemini_cli.history", where, line)
    if mutation is not None:
        yield mutation


def _read(session: Session, record: Any, where: str, line: int | None) -> tuple[str, str, tuple[Message, ...]] | None:
    """(id, type, messages) of a model-facing record; None (a skip when malformed) otherwise."""
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        session.skip(line, "not a Gemini CLI message record (no string 'id')", where)
        return None
    kind = record.get("type")
    if not (isinstance(kind, str) and kind in MODEL_FACING):  # any JSON value may be there
        return None
    text = _parts(record.get("content"))
    if kind == "user":
        messages: tuple[Message, ...] = (Message("user", text, id=record["id"]),)
    else:
        calls = record.get("toolCalls") if isinstance(record.get("toolCalls"), list) else []
        parts = [*text, *(_call(c) for c in calls if isinstance(c, dict) and isinstance(c.get("id"), str))]
        results = [ToolResult(c["id"], _result_text(c["result"]), c.get("status") == "error") for c in calls
                   if isinstance(c, dict) and isinstance(c.get("id"), str) and _sent(c.get("result"))]
        messages = (Message("assistant", parts, id=record["id"]),)
        if results:
            messages += (Message("user", results),)
    for message in messages:
        session.note(message, where)
    return record["id"], kind, messages


def _parts(content: Any) -> list[Part]:
    """Gemini ``PartListUnion`` content as parts: a string or text parts as text, anything else kept opaque."""
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    items = content if isinstance(content, list) else [content] if isinstance(content, dict) else []
    out: list[Part] = []
    for item in items:
        if isinstance(item, str):
            out.append(TextPart(item))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append(TextPart(item["text"]))
        elif isinstance(item, dict):
            out.append(OpaquePart(next(iter(item), "unknown"), canonical_json(item)))
    return out


def _call(call: dict) -> ToolCall:
    name = call.get("name") if isinstance(call.get("name"), str) else "unknown"
    return ToolCall(call["id"], name, json.dumps(call.get("args", {}), ensure_ascii=False, separators=(",", ":")))


def _sent(result: Any) -> bool:
    """Whether Gemini CLI sends the model a response for a recorded result (``convertSessionToClientHistory``,
    packages/core/src/utils/sessionUtils.ts: a JavaScript-truthy result, a list giving its parts): none for a
    missing, null, empty or zero result, nor an empty list; any object, even empty, is one."""
    return isinstance(result, dict) or bool(result)


def _result_text(result: Any) -> str:
    """The text of a recorded tool result: each ``functionResponse``'s output (or its response as JSON)."""
    out = []
    for item in result if isinstance(result, list) else [result]:
        function_response = item.get("functionResponse") if isinstance(item, dict) else None
        response = function_response.get("response") if isinstance(function_response, dict) else None
        if isinstance(response, dict) and isinstance(response.get("output"), str):
            out.append(response["output"])
        elif response is not None:
            out.append(json.dumps(response, ensure_ascii=False, sort_keys=True))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            out.append(item["text"])
        elif isinstance(item, str):
            out.append(item)
    return "\n".join(out)
