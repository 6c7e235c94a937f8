"""OpenHands event stream JSON -> events.

One JSON document (a list of events, or an object with an ``events`` list), read whole under the
session's size cap. The buffer is rebuilt the way OpenHands' conversation memory does:

- a ``system`` action is the system message; a ``message`` action is a user or assistant message
  (by ``source``);
- an action with ``tool_call_metadata`` is a tool call: ``tool_call_id``, ``function_name``, and
  the arguments of the matching call in ``model_response`` (else the action's ``args``). Actions
  of one model response (same ``model_response.id``) share one assistant message, whose text is
  the response's content. A `Snapshot` is yielded before each new model response or agent message;
- an observation with ``tool_call_metadata`` is that call's result (``cause`` points back at the
  action); an ``error`` observation is an error result;
- a ``condensation`` action forgets events (``forgotten_event_ids`` or ``forgotten_events_start_id``
  .. ``forgotten_events_end_id``) and may insert a ``summary`` at ``summary_offset``: a `Mutation`
  of kind ``compact`` (``prune`` without a summary), source ``openhands.condensation``.

Other events (state changes, recalls, observations outside tool calls) are not part of the buffer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..model import Message, TextPart, ToolCall, ToolResult
from .events import Event, Mutation, Snapshot
from .files import SessionReadError

if TYPE_CHECKING:
    from .session import Session


class _Buffer:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.origins: list[set[int]] = []  # ids of the events each message came from
        self.response: str | None = None  # model_response id of the last assistant message

    def append(self, message: Message, origin: Any) -> None:
        self.messages.append(message)
        self.origins.append({origin} if isinstance(origin, int) else set())
        self.response = None

    def forget(self, ids: set[int]) -> None:
        keep = [i for i, o in enumerate(self.origins) if not (o & ids)]
        self.messages = [self.messages[i] for i in keep]
        self.origins = [self.origins[i] for i in keep]
        self.response = None


def events(session: Session) -> Iterator[Event]:
    doc = session.document()
    stream = doc.get("events") if isinstance(doc, dict) else doc
    if not isinstance(stream, list):
        raise SessionReadError(session.path, "not an OpenHands event stream (no list of events)")
    buf = _Buffer()
    step = 0
    for index, ev in enumerate(stream):
        where = f"events[{index}]"
        if not isinstance(ev, dict):
            session.skip(None, "event is not an object", where)
            continue
        where += f" (id {ev.get('id')})"
        action, origin = ev.get("action"), ev.get("id")
        meta = ev.get("tool_call_metadata")
        if action == "condensation":
            yield from _condense(buf, ev, step, where)
        elif isinstance(meta, dict) and "action" in ev:
            call = _tool_call(session, ev, meta, where)
            if call is None:
                continue
            session.note_id(call.id, where)
            response = _response(meta)
            rid = response.get("id") if isinstance(response.get("id"), str) else None
            if rid is not None and rid == buf.response:
                last = buf.messages[-1]
                buf.messages[-1] = Message("assistant", last.parts + (call,), id=last.id)
                buf.origins[-1].add(origin)
                continue
            yield Snapshot(step, tuple(buf.messages), where)
            step += 1
            text = _response_text(response)
            buf.append(Message("assistant", ([TextPart(text)] if text else []) + [call], id=rid), origin)
            buf.response = rid
        elif isinstance(meta, dict) and "observation" in ev:
            call_id = meta.get("tool_call_id")
            if not isinstance(call_id, str):
                session.skip(None, "tool_call_metadata.tool_call_id is missing", where)
                continue
            session.note_id(call_id, where)
            content = ev.get("content", ev.get("message", ""))
            result = ToolResult(call_id, content if isinstance(content, str) else json.dumps(content),
                                ev.get("observation") == "error")
            buf.append(Message("tool", [result]), origin)
        elif action in ("system", "message"):
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            text = args.get("content", ev.get("message", ""))
            role = "system" if action == "system" else ("user" if ev.get("source") == "user" else "assistant")
            if role == "assistant":
                yield Snapshot(step, tuple(buf.messages), where)
                step += 1
            buf.append(Message(role, text if isinstance(text, str) else json.dumps(text)), origin)
    yield Snapshot(step, tuple(buf.messages), f"events[{len(stream) - 1}]", final=True)


def _response(meta: dict) -> dict:
    response = meta.get("model_response")
    return response if isinstance(response, dict) else {}


def _response_message(response: dict) -> dict:
    choices = response.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    return message if isinstance(message, dict) else {}


def _response_text(response: dict) -> str:
    content = _response_message(response).get("content")
    return content if isinstance(content, str) else ""


def _tool_call(session: Session, ev: dict, meta: dict, where: str) -> ToolCall | None:
    call_id, name = meta.get("tool_call_id"), meta.get("function_name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        session.skip(None, "tool_call_metadata needs a string tool_call_id and function_name", where)
        return None
    arguments = None
    for call in _response_message(_response(meta)).get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id") == call_id:
            fn = call.get("function")
            arguments = fn.get("arguments") if isinstance(fn, dict) else None
    if not isinstance(arguments, str):
        arguments = json.dumps(ev.get("args", {}), sort_keys=True)
    return ToolCall(call_id, name, arguments)


def _condense(buf: _Buffer, ev: dict, step: int, where: str) -> Iterator[Event]:
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    ids = args.get("forgotten_event_ids")
    forgotten = {i for i in ids if isinstance(i, int)} if isinstance(ids, list) else set()
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if isinstance(start, int) and isinstance(end, int):
        forgotten |= set(range(start, end + 1))
    before = tuple(buf.messages)
    buf.forget(forgotten)
    summary_text = args.get("summary")
    summary = Message("user", summary_text) if isinstance(summary_text, str) and summary_text else None
    if summary is not None:
        offset = args.get("summary_offset")
        at = offset if isinstance(offset, int) and 0 <= offset <= len(buf.messages) else len(buf.messages)
        buf.messages.insert(at, summary)
        buf.origins.insert(at, set())
    yield Mutation("compact" if summary else "prune", step, before, tuple(buf.messages),
                   "openhands.condensation", where, summary=summary,
                   details={"forgotten_events": len(forgotten)})
