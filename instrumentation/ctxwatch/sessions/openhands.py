"""OpenHands event stream JSON -> events.

One JSON document (a list of events, or an object with an ``events`` list), read whole under the
session's size cap. The buffer is rebuilt the way OpenHands' conversation memory does:

- a ``system`` action is the system message; a ``message`` action is a user or assistant message
  (by ``source``);
- an action with ``tool_call_metadata`` is a tool call: ``tool_call_id``, ``function_name``, and
  the arguments of the matching call in ``model_response`` (else the action's ``args``). Actions
  of one model response (same ``model_response.id``) share one assistant message, whose text is
  the response's content. A `Snapshot` is yielded before each new model response or agent message;
- a ``finish`` action is a message, never a tool call (``ConversationMemory._process_action``: its call was
  already executed and has no response, so OpenHands drops its ``tool_call_metadata`` and sends the
  action's thought, with the response's content when it differs, on a line after it): an assistant message
  (a user one for a user's ``/exit``), not a call waiting for a result;
- an observation with ``tool_call_metadata`` is that call's result (``cause`` points back at the
  action); an ``error`` observation is an error result;
- a ``condensation`` action forgets events (``forgotten_event_ids`` or ``forgotten_events_start_id``
  .. ``forgotten_events_end_id``) and may carry a ``summary`` with a ``summary_offset``: a `Mutation`
  of kind ``compact`` (``prune`` without a summary), source ``openhands.condensation``. As OpenHands'
  ``View.from_events`` builds what the model sees:

  - the offset counts the events of the *view* (the history without the events OpenHands leaves out
    of it: null actions and observations, agent state changes, condensation actions and requests,
    and without every event forgotten so far), not messages; a response whose calls are not all
    answered within those first events is sent after the summary, as OpenHands sends a response
    once its results are in;
  - only the latest summary is in the view: a new one replaces the earlier one, and a condensation
    without a summary keeps the earlier one at its offset of the new view;
  - a tool call or result whose partner the condensation forgot is not sent (OpenHands sends a
    response only with all its results and filters unmatched calls and results), so it leaves the
    buffer with it: the whole response and its results (``details.split_tool_pairs`` counts the
    call ids), and a result recorded later for a call the condensation forgot is not added.

Other events (state changes, recalls, observations outside tool calls) are not part of the buffer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..model import Message, TextPart, ToolCall, ToolResult
from .events import Event, Mutation, Snapshot
from .files import SessionReadError

if TYPE_CHECKING:
    from .session import Session


# events OpenHands' view never holds: left out of the agent's history (state_tracker.py's filter)
# or forgotten with every condensation (memory/view.py)
_NOT_IN_VIEW_ACTIONS = frozenset({"null", "change_agent_state", "condensation", "condensation_request"})
_NOT_IN_VIEW_OBSERVATIONS = frozenset({"null", "agent_state_changed"})


class _Buffer:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.origins: list[set[int]] = []  # ids of the events each message came from
        self.response: str | None = None  # model_response id of the last assistant message
        self.view: list[int | None] = []  # ids of the events in OpenHands' view, in order
        self.summary: Message | None = None  # the latest condensation summary, as the view holds it
        self.summary_offset: int | None = None
        self.unsent: set[str] = set()  # call ids a condensation forgot before their result came

    def append(self, message: Message, origin: Any) -> None:
        self.messages.append(message)
        self.origins.append({origin} if isinstance(origin, int) else set())
        self.response = None

    def _keep(self, keep: list[int]) -> None:
        self.messages = [self.messages[i] for i in keep]
        self.origins = [self.origins[i] for i in keep]
        self.response = None

    def forget(self, ids: set[int]) -> None:
        self._keep([i for i, o in enumerate(self.origins) if not (o & ids)])
        self.view = [i for i in self.view if i not in ids]

    def drop_summary(self) -> None:
        self._keep([i for i, m in enumerate(self.messages) if m is not self.summary])

    def drop_split_pairs(self, before: tuple[Message, ...]) -> int:
        """Drop the calls and results whose partner was in `before` but is no longer in the buffer,
        with the rest of their response; return how many call ids lost their partner."""
        had_calls, had_results = _call_ids(before), _result_ids(before)
        calls, results = _call_ids(self.messages), _result_ids(self.messages)
        split = (calls & (had_results - results)) | (results & (had_calls - calls))
        self.unsent |= (had_calls - calls) - had_results
        if not split:
            return 0
        dropped = set(split)  # with every call of a response that lost one, and their results
        for m in self.messages:
            if split.intersection(m.call_ids):
                dropped.update(m.call_ids)
        self._keep([i for i, m in enumerate(self.messages) if not dropped.intersection(m.call_ids + m.result_ids)])
        return len(split)

    def place_summary(self) -> None:
        """Insert the latest summary where the view puts it: after the first `summary_offset` view
        events (the end without an offset), before any response not answered within them."""
        if self.summary is None:
            return
        offset = self.summary_offset
        if offset is None:
            at = len(self.messages)
        else:
            head = set(self.view[:offset])
            at = 0
            while at < len(self.messages) and self.origins[at] <= head:
                at += 1
            at = _unsplit(self.messages, at)
        self.messages.insert(at, self.summary)
        self.origins.insert(at, set())


def _call_ids(messages: Sequence[Message]) -> set[str]:
    return {i for m in messages for i in m.call_ids}


def _result_ids(messages: Sequence[Message]) -> set[str]:
    return {i for m in messages for i in m.result_ids}


def _unsplit(messages: Sequence[Message], limit: int) -> int:
    """The largest index up to `limit` that parts no response from its results: a response goes after
    the summary unless its results are all before it too. One pass."""
    answer_at: dict[str, int] = {}
    for j, m in enumerate(messages):
        for call_id in m.result_ids:
            answer_at.setdefault(call_id, j)
    best, reach = 0, -1  # reach: the last message the responses so far need before the summary
    for i in range(limit):
        if reach < i:
            best = i
        for call_id in messages[i].call_ids:
            reach = max(reach, answer_at.get(call_id, len(messages)))
    return limit if reach < limit else best


def _in_view(ev: dict) -> bool:
    if "action" in ev:
        kind, left_out = ev.get("action"), _NOT_IN_VIEW_ACTIONS
    else:
        kind, left_out = ev.get("observation"), _NOT_IN_VIEW_OBSERVATIONS
    return not (isinstance(kind, str) and kind in left_out)


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
        if _in_view(ev):
            buf.view.append(origin if isinstance(origin, int) else None)
        if action == "condensation":
            yield from _condense(buf, ev, step, where)
        elif action == "finish":
            role = "user" if ev.get("source") == "user" else "assistant"
            if role == "assistant":
                yield Snapshot(step, tuple(buf.messages), where)
                step += 1
            buf.append(Message(role, _finish_text(ev, meta)), origin)
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
            session.note_id(call_id, where, "tool_result")
            if call_id in buf.unsent:  # its call was forgotten: OpenHands never sends this result
                continue
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


def _finish_text(ev: dict, meta: Any) -> str:
    """What OpenHands sends of a ``finish`` action: its thought; with a model response (the agent's finish
    call), the response's content instead when there is no thought, else after the thought when it differs."""
    args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
    thought = args.get("thought")
    thought = thought.get("text") if isinstance(thought, dict) else thought
    thought = thought if isinstance(thought, str) else ""
    if not isinstance(meta, dict):
        return thought
    content = _response_text(_response(meta))
    if not thought:
        return content
    return thought if thought == content else f"{thought}\n{content}"


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
    buf.drop_summary()
    buf.forget(forgotten)
    split = buf.drop_split_pairs(before)
    summary_text = args.get("summary")
    summary = Message("user", summary_text) if isinstance(summary_text, str) and summary_text else None
    if summary is not None:
        offset = args.get("summary_offset")
        buf.summary = summary
        buf.summary_offset = offset if isinstance(offset, int) and offset >= 0 else None
    buf.place_summary()
    details = {"forgotten_events": len(forgotten)} | ({"split_tool_pairs": split} if split else {})
    yield Mutation("compact" if summary else "prune", step, before, tuple(buf.messages),
                   "openhands.condensation", where, summary=summary, details=details)
