"""Claude Code session JSONL -> events.

Each line is a record. ``user`` and ``assistant`` records carry an Anthropic ``message``; the
context is rebuilt from them in file order, as the API saw it:

- An assistant turn is logged one content block per line, all sharing ``message.id``, and the
  results of its tool calls may be logged between those lines: every line with a known
  ``message.id`` joins that assistant message, and consecutive user records (tool results, a
  prompt after them) join one user message, so several ``tool_use`` blocks sit in one assistant
  message and their ``tool_result`` blocks in the next user message.
- A `Snapshot` is yielded when a new assistant turn starts: the buffer before it is what the
  model was sent. A final snapshot (``final=True``) holds the buffer at the end of the file.
- ``system`` records with subtype ``compact_boundary`` mark a compaction (``compactMetadata``:
  ``trigger``, ``preTokens``); the next ``isCompactSummary`` user record is its summary and starts
  the new buffer. The `Mutation` is yielded once the summary is read (``after`` is the summary).
- ``parentUuid`` links records; a record whose parent lies before the latest assistant turn is a
  rewind (the user went back and branched): the buffer is cut after the parent and a ``prune``
  Mutation with source ``claude_code.rewind`` is yielded. Links through ``progress`` and other
  records are followed; at most 200,000 links are remembered (older ones are forgotten, and a
  rewind to a forgotten record reads as a continuation).
- ``progress`` records carry ``toolUseID`` / ``parentToolUseID`` of hook runs: they are not tool
  results and add nothing to the buffer. Sidechain (sub-agent) records are left out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..adapters import anthropic
from ..model import Message, Part
from .events import Event, Mutation, Snapshot

if TYPE_CHECKING:
    from .session import Session

MAX_LINKS = 200_000


class _Buffer:
    """The context being rebuilt, and which message each record's uuid landed in."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._serials: list[int] = []  # per message, so a link to a message cut by a rewind reads as stale
        self._next_serial = 0
        self.slot_of: OrderedDict[str, tuple[int, int]] = OrderedDict()  # record uuid -> (index, serial)
        self.turns: dict[str, int] = {}  # assistant message.id -> index
        self.last_assistant = -1

    def index_of(self, uuid: str | None) -> int | None:
        hit = self.slot_of.get(uuid) if uuid is not None else None
        if hit is None or hit[0] >= len(self._serials) or self._serials[hit[0]] != hit[1]:
            return None
        return hit[0]

    def truncate(self, n: int) -> None:
        del self.messages[n:], self._serials[n:]
        self.turns = {k: i for k, i in self.turns.items() if i < n}
        self.last_assistant = max((i for i in self.turns.values()), default=-1)

    def add(self, uuid: Any, role: str, parts: tuple[Part, ...], turn: str | None) -> None:
        if role == "assistant" and turn in self.turns:
            at = self.turns[turn]
        elif role == "user" and self.messages and self.messages[-1].role == "user":
            at = len(self.messages) - 1
        else:
            at = len(self.messages)
            self.messages.append(Message(role, parts, id=turn if role == "assistant" else uuid))
            self._serials.append(self._next_serial)
            self._next_serial += 1
            if turn is not None:
                self.turns[turn] = at
            if role == "assistant":
                self.last_assistant = at
            parts = ()
        if parts:
            old = self.messages[at]
            self.messages[at] = Message(role, old.parts + parts, id=old.id)
        if isinstance(uuid, str):
            _remember(self.slot_of, uuid, (at, self._serials[at]))


@dataclass
class _Boundary:
    line: int
    step: int
    before: tuple[Message, ...]
    trigger: str | None
    pre_tokens: int | None

    def mutation(self, summary: Message | None, summary_line: int | None) -> Mutation:
        return Mutation("compact", self.step, self.before, (summary,) if summary else (),
                        "claude_code.compact_boundary", f"line {self.line}", line=self.line,
                        trigger=self.trigger, pre_tokens=self.pre_tokens, summary=summary,
                        summary_line=summary_line)


def _remember(links: OrderedDict, key: str, value: Any) -> None:
    links[key] = value
    if len(links) > MAX_LINKS:
        links.popitem(last=False)


def _boundary(rec: dict, line: int, step: int, before: tuple[Message, ...]) -> _Boundary:
    meta = rec.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    trigger, pre = meta.get("trigger"), meta.get("preTokens")
    return _Boundary(line, step, before, trigger if isinstance(trigger, str) else None,
                     pre if isinstance(pre, int) and not isinstance(pre, bool) else None)


def events(session: Session) -> Iterator[Event]:
    buf = _Buffer()
    links: OrderedDict[str, str | None] = OrderedDict()  # record uuid -> nearest message-record uuid
    step, last_line = 0, 0
    pending: _Boundary | None = None
    for line, rec in session.lines():
        last_line = line
        if not isinstance(rec, dict):
            session.skip(line, "not a JSON object")
            continue
        if rec.get("isSidechain") is True:
            continue
        uuid, parent = rec.get("uuid"), rec.get("parentUuid")
        if rec.get("type") == "system" and rec.get("subtype") == "compact_boundary":
            if pending is not None:
                yield pending.mutation(None, None)
            pending = _boundary(rec, line, step, tuple(buf.messages))
            buf, links = _Buffer(), OrderedDict()
            continue
        message = _message(session, rec, line)
        if message is None:
            if isinstance(uuid, str):
                _remember(links, uuid, links.get(parent) if isinstance(parent, str) else None)
            continue
        if pending is not None:
            is_summary = rec.get("isCompactSummary") is True
            yield pending.mutation(Message("user", message.parts, id=uuid) if is_summary else None,
                                   line if is_summary else None)
            pending = None
        at = buf.index_of(links.get(parent) if isinstance(parent, str) else None)
        if at is not None and at < buf.last_assistant:
            before = tuple(buf.messages)
            buf.truncate(at + 1)
            yield Mutation("prune", step, before, tuple(buf.messages), "claude_code.rewind", f"line {line}",
                           line=line, changed=tuple(range(at + 1, len(before))))
        turn = rec["message"].get("id") if message.role == "assistant" else None
        turn = turn if isinstance(turn, str) else None
        if message.role == "assistant" and turn not in buf.turns:
            yield Snapshot(step, tuple(buf.messages), f"line {line}", line)
            step += 1
        buf.add(uuid, message.role, message.parts, turn)
        if isinstance(uuid, str):
            _remember(links, uuid, uuid)
    if pending is not None:
        yield pending.mutation(None, None)
    yield Snapshot(step, tuple(buf.messages), f"line {last_line}", last_line or None, final=True)


def _message(session: Session, rec: dict, line: int) -> Message | None:
    """The Anthropic message of a user/assistant record (None for other records, or a skip)."""
    msg = rec.get("message")
    if rec.get("type") not in ("user", "assistant") or not isinstance(msg, dict):
        return None
    item = {"role": msg.get("role", rec["type"]), "content": msg.get("content")}
    return session.convert(anthropic.read, item, line, f"line {line}")
