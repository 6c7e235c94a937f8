"""OpenAI Codex rollout JSONL -> events.

Each line is ``{"timestamp", "type", "payload"}``. ``response_item`` payloads are Responses items
(``message``, ``function_call`` / ``function_call_output``, ``custom_tool_call`` /
``custom_tool_call_output``, ``reasoning``, ``web_search_call``...) and are appended to the buffer
in order. A `Snapshot` is yielded before each run of model output items (an assistant message,
reasoning or a call following input items): the buffer then is what the model was sent.

A ``compacted`` record replaces the history with its ``replacement_history`` (a `Mutation` of
kind ``compact``, source ``codex.compacted``, ``after`` the replacement items, ``details``
``replacement_items``; its ``message``, when not empty, is the summary). Older rollouts without
``replacement_history`` give ``after`` = the history Codex rebuilds then (`codex_compact`: the initial context,
the user's newest messages, the summary). A session read from the middle of its
file (`Session.read_from`, ``ctxwatch watch`` resuming after a ``compacted`` record) starts with the
buffer that record left. The ``event_msg`` of type
``context_compacted`` that follows adds nothing. ``session_meta`` (the base instructions, sent
apart from the history), ``turn_context`` and other ``event_msg`` records are not part of the buffer.

Rollouts of the pre-envelope shape (Codex CLI of mid 2025, before the ``payload`` envelope; its
``RolloutRecorder::resume`` read them so): line 1 a bare header ``{"id", "timestamp", "instructions", "git"}``
(the session meta: loop id ``codex-<id>``), ``{"record_type": "state"}`` markers (skipped) and the Responses
items bare (``{"type": "message", ...}``), read as ``response_item`` payloads. That recorder wrote no compaction
record (only items and state markers), so no compaction is read from such a rollout.

A record written twice is read twice: Codex rebuilds a resumed history by recording every item of the rollout in
order (no id merges them), so that is what it sends.

A call whose output was never recorded because its turn was interrupted (an ``event_msg`` ``turn_aborted`` after
the call, before the next request: Codex records one for every aborted turn) is answered as Codex answers it in
each request it sends (``ContextManager::for_prompt`` normalizes a copy of the history,
``ensure_call_outputs_present``): an output ``"aborted"`` right after the call (``custom_tool_call_output`` for a
custom tool call, else ``function_call_output``), from the next request on, in that copy only. Such a call is
listed in ``Session.facts["aborted_calls"]`` (id and the call's line) when no real output follows: no orphan, and
no tool pair. A call a request went out without, and no abort recorded, is an output the rollout lost (Codex
itself logs it as an invariant broken, ``error_or_panic``): it is left unanswered, an orphan call of the buffers
sent (a ``tool_pairing`` finding naming it). A call still unanswered at the end of the file stays pending. Codex
never writes the ``"aborted"`` answer into its history, so a real output recorded later (a tool that finished after
the interrupt) is the call's only output in the requests after it, where it was recorded.

A ``local_shell_call`` with a ``call_id`` is a call (of the tool ``local_shell``, its action the arguments), answered
by a ``function_call_output`` of that id, as Codex pairs them; a ``tool_search_call`` with a ``call_id`` a call of
the tool ``tool_search``, answered by the ``tool_search_output`` of that id (Codex's answer when none was recorded: a
completed search that found no tools). One without a ``call_id`` is an item no output answers.
``custom_tool_call`` pairs with ``custom_tool_call_output``; ``web_search_call`` is a server-side item with no output
to wait for.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..adapters import openai_responses
from ..model import Message
from . import codex_compact
from .events import Event, Mutation, Snapshot
from .filed import FiledMessage, Filing, Where

if TYPE_CHECKING:
    from .session import Session

_INPUT_ROLES = frozenset({"user", "developer", "system"})
# the Responses items a pre-envelope rollout holds bare (Codex's ResponseItem variants of mid 2025, as written)
_BARE_ITEMS = frozenset({"message", "reasoning", "function_call", "function_call_output", "local_shell_call",
                         "custom_tool_call", "custom_tool_call_output", "web_search_call"})


def is_legacy_header(record: Any) -> bool:
    """Whether `record` is the first line of a pre-envelope rollout (``{"id", "timestamp", ...}``, no ``type``)."""
    return (isinstance(record, dict) and "type" not in record and "payload" not in record
            and isinstance(record.get("id"), str) and isinstance(record.get("timestamp"), str))


def is_bare_response_item(record: dict) -> bool:
    """Whether a rollout record is a Responses item written bare, as a pre-envelope rollout holds them."""
    kind = record.get("type")
    return isinstance(kind, str) and kind in _BARE_ITEMS and "payload" not in record


def response_item(record: dict) -> dict | None:
    """The Responses item a rollout record holds: a ``response_item``'s payload, or a bare item; else None."""
    if record.get("type") == "response_item":
        payload = record.get("payload")
        return payload if isinstance(payload, dict) else None
    return record if is_bare_response_item(record) else None


def read_item(item: Any, index: int | None) -> Message:
    """One Responses item of a rollout as a message (`openai_responses.read`), two kinds of item with a
    ``call_id`` read as the calls and outputs Codex pairs them as (``ResponseItem::LocalShellCall``, ``ToolSearchCall``
    / ``ToolSearchOutput``; ``context_manager/normalize.rs`` pairs by ``call_id``):

    - a ``local_shell_call``: a call of the tool ``local_shell`` (its action the arguments), which Codex answers
      with a ``function_call_output`` of that id;
    - a ``tool_search_call`` (``execution``, ``arguments`` an object): a call of the tool ``tool_search`` (its
      arguments as JSON), answered by the ``tool_search_output`` of that id (``status``, ``execution``, ``tools``:
      the tools it found, as JSON, its output).

    One without a ``call_id`` (Codex's is optional) stays an item no output can answer, as Codex takes it."""
    if isinstance(item, dict) and isinstance(kind := item.get("type"), str) and kind in _CALL_LIKE:
        call_id = item.get("call_id")
        if isinstance(call_id, str) and call_id:
            key, name = _CALL_LIKE[kind]
            rest = {k: v for k, v in item.items() if k not in ("type", key)}
            value = json.dumps(item.get(key), ensure_ascii=False)
            item = ({**rest, "type": "function_call_output", "output": value} if name is None
                    else {**rest, "type": "function_call", "name": name, "arguments": value})
    return openai_responses.read(item, index)


# item type -> (the field read as the arguments or output, the tool's name; None: an output)
_CALL_LIKE = {"local_shell_call": ("action", "local_shell"),  # Codex's ToolSpec::LocalShell
              "tool_search_call": ("arguments", "tool_search"),  # TOOL_SEARCH_TOOL_NAME
              "tool_search_output": ("tools", None)}


def is_model_output(item: dict) -> bool:
    kind = item.get("type")
    if kind == "message" or kind is None:
        role = item.get("role")
        return not (isinstance(role, str) and role in _INPUT_ROLES)
    if kind == "tool_search_output":  # the server's comes in the model's response; the client's is input
        return item.get("execution") == "server"
    return isinstance(kind, str) and not kind.endswith("_output")


def events(session: Session) -> Iterator[Event]:
    start, filing = session.read_from, session.filing
    buffer: list[Message] = list(start.buffer) if start is not None else []
    step, last_line = start.step if start is not None else 0, 0
    in_output = False
    unanswered = _Unanswered(buffer)
    for line, rec in session.lines():
        try:
            last_line = line
            if not isinstance(rec, dict):
                session.skip(line, "not a JSON object")
                continue
            kind, payload = rec.get("type"), rec.get("payload")
            if (item := response_item(rec)) is not None:
                payload = item
                message = session.convert(read_item, payload, line, f"line {line}")
                if message is None:
                    continue
                output = is_model_output(payload)
                if output and not in_output:
                    yield Snapshot(step, unanswered.sent(buffer, request=True), f"line {line}", line)
                    step += 1
                in_output = output
                unanswered.add(message, payload.get("type"), len(buffer))
                buffer.append(message if filing is None else FiledMessage.of(message, _Item(filing.here(line)), filing))
            elif kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "turn_aborted":
                unanswered.interrupt()
            elif kind == "compacted" and isinstance(payload, dict):
                summary = _summary(payload)
                if payload.get("replacement_history") is None:  # Codex's Option: absent or null
                    if filing is not None and summary is not None:
                        summary = FiledMessage.of(summary, _Item(filing.here(line), _SUMMARY), filing)
                    after = codex_compact.rebuilt(buffer, summary, filing)
                elif (after := _replacement(session, payload, line)) is None:
                    continue
                elif filing is not None:
                    after = filed(after, filing, filing.here(line))
                before, buffer = unanswered.sent(buffer), list(after)
                unanswered = unanswered.compacted(buffer, session)
                yield Mutation("compact", step, before, unanswered.sent(buffer), "codex.compacted", f"line {line}",
                               line=line, summary=summary, summary_line=line if summary else None,
                               details={"replacement_items": len(payload.get("replacement_history") or ())})
                in_output = False
        finally:  # a followed session waits for its next line here: nothing of this record is kept through it
            rec = payload = message = after = summary = before = None
    unanswered.report(session)
    yield Snapshot(step, unanswered.sent(buffer), f"line {last_line}", last_line or None, final=True)


class _Unanswered:
    """The calls of the buffer with no output recorded (id -> the call's item type, which tells the output Codex
    answers it with, and the call's index in the buffer), those of them whose turn was aborted, and those a
    request went out without after that (Codex answered them), with that answer."""

    def __init__(self, buffer: list[Message]) -> None:
        self._calls: dict[str, tuple[Any, int]] = {}
        self._interrupted: set[str] = set()
        self._aborted: dict[str, Message] = {}
        for index, message in enumerate(buffer):
            self.add(message, None, index)

    def add(self, message: Message, kind: Any, index: int) -> None:
        """`message` (of item type `kind`) is the buffer's `index`-th."""
        for call_id in message.call_ids:
            self._calls[call_id] = (kind, index)
        for call_id in message.result_ids:
            self._calls.pop(call_id, None)
            self._interrupted.discard(call_id)
            self._aborted.pop(call_id, None)

    def interrupt(self) -> None:
        """A ``turn_aborted`` was recorded: the calls waiting for their output now were cut short."""
        self._interrupted.update(self._calls)

    def report(self, session: Session, kept: Collection[str] = ()) -> None:
        """List the calls answered ``"aborted"`` and never by a real output in ``session.facts["aborted_calls"]``
        (this buffer is left behind: a compaction, or the end of the file), but those `kept` unanswered."""
        if gone := [call_id for call_id in self._aborted if call_id not in kept]:
            listed = session.facts.setdefault(ABORTED_CALLS, [])
            listed += [{"id": call_id, "where": session.origin(call_id) or "record"} for call_id in gone]

    def compacted(self, buffer: list[Message], session: Session) -> _Unanswered:
        """The calls of `buffer`, which a compaction left: one of an aborted turn it keeps unanswered stays one (and
        answered ``"aborted"`` if it was)."""
        after = _Unanswered(buffer)
        after._interrupted = (self._interrupted | self._aborted.keys()) & after._calls.keys()
        after._aborted = {call_id: answer for call_id, answer in self._aborted.items() if call_id in after._calls}
        self.report(session, after._calls.keys())
        return after

    def sent(self, buffer: list[Message], *, request: bool = False) -> tuple[Message, ...]:
        """What Codex sends of `buffer`, when `request` in the request it sends now (``ContextManager::for_prompt``
        normalizes a copy of the history, never the history itself): Codex's answer (`_answer`) right after each
        call of an aborted turn a request went out without an output for (any other call without one stays
        unanswered: its output is missing from the rollout). A real output recorded later stands where it was
        recorded, and the answer is gone from the requests after it."""
        if request:
            for call_id, (kind, _) in self._calls.items():
                if call_id in self._interrupted and call_id not in self._aborted:
                    self._aborted[call_id] = read_item(_answer(kind, call_id), None)
        if not self._aborted:
            return tuple(buffer)
        out: list[Message] = []
        start = 0
        for at, answer in sorted(((self._calls[call_id][1], answer) for call_id, answer in self._aborted.items()),
                                 key=lambda pair: pair[0]):
            out += buffer[start:at + 1]
            out.append(answer)
            start = at + 1
        out += buffer[start:]
        return tuple(out)


def _answer(kind: Any, call_id: str) -> dict[str, Any]:
    """The output item Codex puts after a call (of item type `kind`) that has none (``ensure_call_outputs_present``):
    ``"aborted"``, or for a tool search a completed one that found no tools."""
    if kind == "tool_search_call":
        return {"type": "tool_search_output", "call_id": call_id, "status": "completed", "execution": "client",
                "tools": []}
    output = "custom_tool_call_output" if kind == "custom_tool_call" else "function_call_output"
    return {"type": output, "call_id": call_id, "output": _ABORTED}


_ABORTED = "aborted"  # the output Codex records for a call that never produced one
ABORTED_CALLS = "aborted_calls"  # Session.facts: the calls of aborted turns answered only by _ABORTED


def filed(after: tuple[Message, ...], filing: Filing, where: Where) -> tuple[Message, ...]:
    """The replacement history of a ``compacted`` record read at `where` (`after`), filed."""
    return tuple(FiledMessage.of(m, _Item(where, i), filing) for i, m in enumerate(after))


_RECORD = -1  # _Item.index: the record's payload is the message
_SUMMARY = -2  # the compacted record's summary is the message


@dataclass(frozen=True, slots=True)
class _Item:
    """Where a filed Codex message was read (`sessions.filed.Source`): the record's payload, an item of a
    ``compacted`` record's replacement history (`index`), or its summary."""

    where: Where
    index: int = _RECORD

    def rebuild(self, filing: Filing) -> Message:
        return filing.reread(self.where, self._read)

    def _read(self, session: Session, rec: Any, line: int) -> Message | None:
        if not isinstance(rec, dict):
            return None
        if self.index == _RECORD:
            item = response_item(rec)
            return session.convert(read_item, item, line, f"line {line}") if item is not None else None
        payload = rec.get("payload")
        if not isinstance(payload, dict):
            return None
        if self.index == _SUMMARY:
            return _summary(payload)
        after = _replacement(session, payload, line)
        return after[self.index] if after is not None and self.index < len(after) else None


def compacted_at(session: Session, rec: Any, line: int) -> tuple[Message, ...] | None:
    """The buffer a ``compacted`` record at `line` leaves, else None (a resumed watcher reads it again). A record
    without ``replacement_history`` is None too: the history Codex rebuilds then depends on the records before
    it (`codex_compact`), so no epoch starts there."""
    if (isinstance(rec, dict) and rec.get("type") == "compacted" and isinstance(payload := rec.get("payload"), dict)
            and payload.get("replacement_history") is not None):
        return _replacement(session, payload, line)
    return None


def _replacement(session: Session, payload: dict, line: int) -> tuple[Message, ...] | None:
    """The record's replacement history; None when it cannot be read."""
    items = payload.get("replacement_history")
    if not isinstance(items, list):
        session.skip(line, "replacement_history is not a list")
        return None
    out = []
    for i, item in enumerate(items):
        message = session.convert(read_item, item, line, f"line {line}, replacement_history[{i}]")
        if message is None:
            return None
        out.append(message)
    return tuple(out)


def _summary(payload: dict[str, Any]) -> Message | None:
    text = payload.get("message")
    return Message("user", text) if isinstance(text, str) and text else None
