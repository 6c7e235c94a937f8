"""Claude Code session JSONL -> events.

Each line is a record. ``user`` and ``assistant`` records carry an Anthropic ``message``; the
context is rebuilt from them in file order, as the API saw it:

- An assistant turn is logged one content block per line, all sharing ``message.id``, and the
  results of its tool calls may be logged between those lines: a line with the ``message.id`` of
  the latest assistant turn joins that message, and consecutive user records (tool results, a
  prompt after them) join one user message, so several ``tool_use`` blocks sit in one assistant
  message and their ``tool_result`` blocks in the next user message. Parts are collected per
  message and the `Message` is built once it is needed, so a turn of many lines costs linear time.
- A `Snapshot` is yielded when a new assistant turn starts: the buffer before it is what the
  model was sent. A final snapshot (``final=True``) holds the buffer at the end of the file.
- ``system`` records with subtype ``compact_boundary`` mark a compaction (``compactMetadata``:
  ``trigger``, ``preTokens``); the next ``isCompactSummary`` user record is its summary and starts
  the new buffer. The `Mutation` is yielded once the summary is read (``after`` is the summary).
  A boundary before any message of the file (a session continued from its parent, which copies the
  parent's boundary and summary) is no mutation: the summary is where this session's buffer starts,
  recorded in ``Session.facts["inherited_compaction"]``. A boundary the file ends after, its summary not
  written yet (a live session mid-compaction), is no mutation either: the compaction is in progress at the
  end of the file, ``Session.facts["compaction_in_progress"]`` (line, trigger, preTokens), and the final
  snapshot is the buffer before it. ``ctxwatch watch`` keeps such a boundary pending until its summary
  arrives (the end of a followed file is raised through this reader), so a replay of the cut file says
  no more than a replay of the completed one will.
- ``system`` records with subtype ``microcompact_boundary`` clear old tool results in place
  (``microcompactMetadata.compactedToolIds`` names them): a ``prune`` Mutation with source
  ``claude_code.microcompact_boundary``; each named result's content becomes Claude Code's
  ``[Old tool result content cleared]`` and the call stays paired.
- ``parentUuid`` links records; a record whose parent lies before the latest assistant turn, or
  inside the trailing (merged) user message before its last record, is a rewind (the user went
  back and branched, or resumed after ``/exit`` from an earlier record): the buffer is cut after
  the parent and a ``prune`` Mutation with source ``claude_code.rewind`` is yielded. Links through
  ``progress`` and other records are followed; at most 200,000 links are remembered (older ones
  are forgotten, and a rewind to a forgotten record reads as a continuation).
- ``progress`` records carry ``toolUseID`` / ``parentToolUseID`` of hook runs: they are not tool
  results and add nothing to the buffer.
- A record whose ``uuid`` was already read (anywhere before in the file, within the remembered links) is the
  same record logged again (a resume or another build writing history out again, claude-code#66947): Claude
  Code's loader keeps one record per uuid (``messages.set(uuid, entry)``, a later copy in place of the earlier)
  and builds the conversation by walking ``parentUuid`` from the leaf, so the model is never sent a copy. It is
  skipped, whatever its metadata (``gitBranch``, ``version``, ``promptId``, ``slug``, ``parentUuid``: the first
  copy keeps its place); no rewind, no second tool result. A copy of a message record still in the buffer whose
  message differs (its parts, not ``usage`` or other fields) replaces that record's parts in place, as the loader
  would have it from then on: a `Mutation` of the kind the change is (``rewrite`` mostly), source
  ``claude_code.repeated_record``. A copy of another role, or of a record cut by a rewind or before a compaction,
  adds nothing.
- Sub-agents: the file follows the chain of its first record that says (``isSidechain``). A session's
  own file starts on the main chain, and sidechain records interleaved in it (older versions wrote
  sub-agent turns there) are left out; a sub-agent's transcript
  (``<session>/subagents/agent-<agentId>.jsonl``, every record ``isSidechain: true``) is read as its own
  conversation, and main-chain records in it are left out.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..adapters import anthropic
from ..cache import anthropic_cache
from ..model import Message, Part, ToolResult
from .events import Event, Mutation, Snapshot, buffer_change
from .filed import FiledMessage, Filing, Where

if TYPE_CHECKING:
    from .session import Session

MAX_LINKS = 200_000
CLEARED_RESULT = "[Old tool result content cleared]"


class _Buffer:
    """The context being rebuilt, and where each record's uuid landed (message index, parts so far).

    With a `Filing` (a followed session, `sessions.filed`) the messages are `FiledMessage`s that know which
    records they were read from (per message, (offset, length, line, parts taken) of each record, and the
    parts a microcompaction cleared), and the filing asks the buffer to build the messages still collecting
    parts before the session waits (`messages`), so no part is held outside a message that can put it away."""

    def __init__(self, filing: Filing | None = None) -> None:
        self._messages: list[Message | None] = []  # None: not built yet
        self._built: tuple[Message, ...] | None = None  # messages() since the last change
        self._heads: list[tuple[str, str | None]] = []  # (role, id) per message
        self._pending: dict[int, list[Part]] = {}  # parts added to a message since it was last built
        self._lengths: list[int] = []  # parts per message, pending ones included
        self._serials: list[int] = []  # per message, so a link to a message cut by a rewind reads as stale
        self._next_serial = 0
        # uuid -> (index, serial, parts up to the record, parts before it)
        self.slot_of: OrderedDict[str, tuple[int, int, int, int]] = OrderedDict()
        self.last_turn: str | None = None  # message.id of the latest assistant turn
        self.last_assistant = -1
        self.results: dict[str, int] = {}  # tool_result id -> index of its message (for microcompacts)
        self._filing = filing
        self._records: list[array[int]] = []  # with a filing: per message, (offset, length, line, taken) per record
        self._cleared: list[frozenset[int]] = []  # with a filing: per message, the parts a microcompact cleared
        if filing is not None:
            filing.settle = self.messages

    def __len__(self) -> int:
        return len(self._messages)

    def messages(self) -> tuple[Message, ...]:
        """The buffer now (messages with new parts are rebuilt once here; the same tuple until it changes)."""
        if self._built is not None:
            return self._built
        for at, parts in self._pending.items():
            old = self._messages[at]
            role, mid = self._heads[at]
            self._messages[at] = self._message(at, role, old.parts + tuple(parts) if old else parts, mid)
        self._pending.clear()
        self._built = tuple(self._messages)  # type: ignore[arg-type]  # every message is built now
        return self._built

    def _message(self, at: int, role: str, parts: Iterable[Part], mid: str | None) -> Message:
        if self._filing is None:
            return Message(role, parts, id=mid)
        return FiledMessage(role, parts, id=mid, filing=self._filing,
                            source=_Records(role, mid, array("q", self._records[at]), self._cleared[at]))

    def slot(self, uuid: str | None) -> tuple[int, int] | None:
        """(message index, parts of it up to the record) of a live record, else None."""
        hit = self.slot_of.get(uuid) if uuid is not None else None
        if hit is None or hit[0] >= len(self._serials) or self._serials[hit[0]] != hit[1]:
            return None
        return hit[0], hit[2]

    def branches_at(self, at: int, parts: int, role: str) -> bool:
        """Whether a `role` record whose parent sits at (`at`, `parts`) leaves the current branch."""
        if at < self.last_assistant:
            return True
        trailing_user = at == len(self._messages) - 1 and self._heads[at][0] == "user"
        return trailing_user and parts < self._lengths[at] and role == "assistant"

    def cut(self, at: int, parts: int) -> None:
        """Keep messages up to `at`, and of message `at` its first `parts` parts."""
        current = self.messages()
        self._built = None
        del self._messages[at + 1:], self._heads[at + 1:], self._serials[at + 1:], self._lengths[at + 1:]
        if self._filing is not None:
            del self._records[at + 1:], self._cleared[at + 1:]
        if parts < self._lengths[at]:
            old = current[at]
            if self._filing is not None:
                self._records[at] = _taking(self._records[at], parts)
                self._cleared[at] = frozenset(i for i in self._cleared[at] if i < parts)
            self._messages[at] = self._message(at, old.role, old.parts[:parts], old.id)
            self._lengths[at] = parts
            self._serials[at] = self._new_serial()  # records inside the cut part are gone
        self.last_assistant = next((i for i in range(at, -1, -1) if self._heads[i][0] == "assistant"), -1)
        self.last_turn = self._heads[self.last_assistant][1] if self.last_assistant >= 0 else None

    def add(self, uuid: Any, role: str, parts: tuple[Part, ...], turn: str | None, where: Where | None = None) -> None:
        """Add a record's `parts` (read at `where`, for a filed buffer)."""
        self._built = None
        if role == "assistant" and turn is not None and turn == self.last_turn:
            at = self.last_assistant
        elif role == "user" and self._heads and self._heads[-1][0] == "user":
            at = len(self._messages) - 1
        else:
            at = len(self._messages)
            self._messages.append(None)
            self._heads.append((role, turn if role == "assistant" else uuid))
            self._pending[at] = []
            self._lengths.append(0)
            self._serials.append(self._new_serial())
            if self._filing is not None:
                self._records.append(array("q"))
                self._cleared.append(_NONE_CLEARED)
            if role == "assistant":
                self.last_assistant, self.last_turn = at, turn
        first = self._lengths[at]
        if parts:
            self._pending.setdefault(at, []).extend(parts)
            self._lengths[at] += len(parts)
            if where is not None and self._filing is not None:
                self._records[at].extend((*where, len(parts)))
            for part in parts:
                if type(part) is ToolResult:
                    self.results[part.call_id] = at
        if isinstance(uuid, str):
            _remember(self.slot_of, uuid, (at, self._serials[at], self._lengths[at], first))

    def record_parts(self, uuid: str) -> tuple[Part, ...] | None:
        """The parts the live record `uuid` gave its message (as they stand: a microcompaction may have cleared
        results), else None."""
        hit = self.slot_of.get(uuid)
        if hit is None or self.slot(uuid) is None:
            return None
        return self.messages()[hit[0]].parts[hit[3]:hit[2]]

    def role_of(self, uuid: str) -> str:
        """The role of the message the record `uuid` is in."""
        return self._heads[self.slot_of[uuid][0]][0]

    def replace(self, uuid: str, parts: tuple[Part, ...], where: Where | None) -> int:
        """Put `parts` (read at `where`, for a filed buffer) in place of those of the live record `uuid`; the index
        of the message changed. The records after it in that message keep their places."""
        at, serial, end, first = self.slot_of[uuid]
        old = self.messages()[at]
        self._built = None
        shift = len(parts) - (end - first)
        self._lengths[at] += shift
        self.slot_of[uuid] = (at, serial, first + len(parts), first)
        if shift:
            later = []
            for key in reversed(self.slot_of):
                if key == uuid:
                    break
                hit = self.slot_of[key]
                if hit[0] == at and hit[1] == serial:
                    later.append((key, (at, serial, hit[2] + shift, hit[3] + shift)))
            self.slot_of.update(later)
        if self._filing is not None:
            assert where is not None
            self._records[at] = _replacing(self._records[at], first, end, (*where, len(parts)))
            self._cleared[at] = frozenset(i if i < first else i + shift for i in self._cleared[at]
                                          if not first <= i < end)
        for part in parts:
            if type(part) is ToolResult:
                self.results[part.call_id] = at
        role, mid = self._heads[at]
        self._messages[at] = self._message(at, role, old.parts[:first] + parts + old.parts[end:], mid)
        return at

    def clear_results(self, ids: set[str]) -> tuple[int, ...]:
        """Replace the content of the named tool results in place; the indices of the messages changed."""
        built = self.messages()
        self._built = None
        changed = []
        for at in sorted({at for cid in ids if (at := self.results.get(cid)) is not None and at < len(self)}):
            old = built[at]
            if not set(old.result_ids) & ids:
                continue  # the message that held it was cut by a rewind
            cleared = {i for i, p in enumerate(old.parts) if type(p) is ToolResult and p.call_id in ids}
            parts = tuple(_cleared(p) if i in cleared else p for i, p in enumerate(old.parts))
            if self._filing is not None:
                self._cleared[at] = self._cleared[at] | cleared
            self._messages[at] = self._message(at, old.role, parts, old.id)
            changed.append(at)
        return tuple(changed)

    def _new_serial(self) -> int:
        self._next_serial += 1
        return self._next_serial


_NONE_CLEARED: frozenset[int] = frozenset()


def _cleared(part: Part) -> Part:
    """A tool result as a microcompaction leaves it: its content cleared, the call still paired."""
    assert type(part) is ToolResult
    return ToolResult(part.call_id, CLEARED_RESULT, part.is_error)


def _replacing(records: array[int], first: int, end: int, record: tuple[int, ...]) -> array[int]:
    """The (offset, length, line, taken) records of a message whose record giving its parts `first` to `end` is
    replaced by `record` (none when it gives no part)."""
    kept: array[int] = array("q")
    start, placed = 0, False
    for i in range(0, len(records), 4):
        if not placed and start == first:
            placed = True
            if record[3]:
                kept.extend(record)
            if end > first:  # the replaced record's own entry
                start += records[i + 3]
                continue
        kept.extend(records[i:i + 4])
        start += records[i + 3]
    if not placed and record[3]:
        kept.extend(record)
    return kept


def _taking(records: array[int], parts: int) -> array[int]:
    """The (offset, length, line, taken) records of a message cut to its first `parts` parts."""
    kept: array[int] = array("q")
    for i in range(0, len(records), 4):
        if parts <= 0:
            break
        take = min(records[i + 3], parts)
        kept.extend((records[i], records[i + 1], records[i + 2], take))
        parts -= take
    return kept


@dataclass(frozen=True, slots=True)
class _Records:
    """Where a filed Claude Code message's parts were read (`sessions.filed.Source`): of each record, (offset,
    length, line, parts taken) in `records`, the leading parts its message gave; `cleared`, the parts a
    microcompaction cleared."""

    role: str
    id: str | None
    records: array[int]
    cleared: frozenset[int]

    @property
    def where(self) -> Where:
        return self.records[0], self.records[1], self.records[2]

    def rebuild(self, filing: Filing) -> Message:
        parts: list[Part] = []
        records = self.records
        for i in range(0, len(records), 4):
            message = filing.reread((records[i], records[i + 1], records[i + 2]), _record_message)
            parts.extend(message.parts[:records[i + 3]])
        for at in self.cleared:
            parts[at] = _cleared(parts[at]) if at < len(parts) and type(parts[at]) is ToolResult else parts[at]
        return Message(self.role, parts, id=self.id)


@dataclass
class _Boundary:
    line: int
    step: int
    before: tuple[Message, ...]
    trigger: str | None
    pre_tokens: int | None

    def facts(self) -> dict[str, Any]:
        """What the file says of a compaction whose summary it does not hold yet (``compaction_in_progress``)."""
        return {"line": self.line, "trigger": self.trigger, "pre_tokens": self.pre_tokens}

    def mutation(self, summary: Message | None, summary_line: int | None) -> Mutation:
        return Mutation("compact", self.step, self.before, (summary,) if summary else (),
                        "claude_code.compact_boundary", f"line {self.line}", line=self.line,
                        trigger=self.trigger, pre_tokens=self.pre_tokens, summary=summary,
                        summary_line=summary_line)


def _remember(links: OrderedDict, key: str, value: Any) -> None:
    links[key] = value
    if len(links) > MAX_LINKS:
        links.popitem(last=False)


def _metadata(rec: dict, key: str) -> tuple[dict, str | None, int | None]:
    meta = rec.get(key)
    meta = meta if isinstance(meta, dict) else {}
    trigger, pre = meta.get("trigger"), meta.get("preTokens")
    return (meta, trigger if isinstance(trigger, str) else None,
            pre if isinstance(pre, int) and not isinstance(pre, bool) else None)


def _microcompact(rec: dict, line: int, step: int, buf: _Buffer) -> Mutation:
    meta, trigger, pre = _metadata(rec, "microcompactMetadata")
    named = meta.get("compactedToolIds")
    ids = {i for i in named if isinstance(i, str)} if isinstance(named, list) else set()
    before = buf.messages()
    changed = buf.clear_results(ids)
    saved = meta.get("tokensSaved")
    details = {"compacted_tool_ids": len(ids),
               "cleared_results": sum(1 for at in changed for r in before[at].result_ids if r in ids)}
    if isinstance(saved, int) and not isinstance(saved, bool):
        details["tokens_saved"] = saved
    return Mutation("prune", step, before, buf.messages(), "claude_code.microcompact_boundary", f"line {line}",
                    line=line, trigger=trigger, pre_tokens=pre, changed=changed, details=details)


def _repeated(session: Session, rec: dict, uuid: str, line: int, step: int, buf: _Buffer) -> Iterator[Mutation]:
    """A record whose uuid was read before. Claude Code keeps one record per uuid (its loader maps uuid to
    record, a later copy in place of the earlier), so a copy adds nothing: it is skipped, whatever its metadata
    (``gitBranch``, ``version``, ``parentUuid``...). A copy of a message record still in the buffer whose message
    differs (its parts, what the model reads) takes that record's place, as the loader would have it: a
    `Mutation` of the kind the change is, source ``claude_code.repeated_record``."""
    kept = buf.record_parts(uuid)
    if kept is None:
        return
    message = _message(session, rec, line)
    if message is None or message.role != buf.role_of(uuid) or _same_parts(kept, message.parts):
        return
    before = buf.messages()
    buf.replace(uuid, message.parts, session.filing.here(line) if session.filing is not None else None)
    after = buf.messages()
    mutation = buffer_change(before, after, step, "claude_code.repeated_record", f"line {line}", line)
    if mutation is not None:
        yield mutation


def _same_parts(kept: tuple[Part, ...], parts: tuple[Part, ...]) -> bool:
    """Whether a record read again gives the parts it gave (a result a microcompaction cleared since counts as
    cleared)."""
    return len(kept) == len(parts) and all(k == p or _clears(k, p) for k, p in zip(kept, parts, strict=True))


def _clears(kept: Part, part: Part) -> bool:
    """Whether `kept` is the result `part` as a microcompaction cleared it."""
    return type(kept) is ToolResult and type(part) is ToolResult and kept == _cleared(part)


def events(session: Session) -> Iterator[Event]:
    filing = session.filing
    buf = _Buffer(filing)
    summary: Message | None = None
    links: OrderedDict[str, str | None] = OrderedDict()  # record uuid -> nearest message-record uuid
    step, last_line = session.read_from.step if session.read_from is not None else 0, 0
    pending: _Boundary | None = None
    inherited: dict[str, Any] | None = None  # a boundary before any message: copied from the parent
    chain: bool | None = None  # the isSidechain of the file's chain: its first record's that says
    for line, rec in session.lines():
        try:
            last_line = line
            if not isinstance(rec, dict):
                session.skip(line, "not a JSON object")
                continue
            side = rec.get("isSidechain")
            if isinstance(side, bool):
                chain = side if chain is None else chain
                if side is not chain:
                    continue
            uuid, parent = rec.get("uuid"), rec.get("parentUuid")
            if isinstance(uuid, str) and uuid in links:  # a record logged again: Claude Code reads it once
                yield from _repeated(session, rec, uuid, line, step, buf)
                continue
            subtype = rec.get("subtype") if rec.get("type") == "system" else None
            if subtype == "compact_boundary":
                if pending is not None:
                    yield pending.mutation(None, None)
                _, trigger, pre = _metadata(rec, "compactMetadata")
                if step == 0 and not len(buf) and pending is None:
                    inherited = {"line": line, "trigger": trigger, "pre_tokens": pre,
                                 "session_id": rec.get("sessionId")}
                    session.facts["inherited_compaction"] = inherited
                else:
                    pending = _Boundary(line, step, buf.messages(), trigger, pre)
                buf = _Buffer(filing)
                if isinstance(uuid, str):
                    _remember(links, uuid, None)
                continue
            if subtype == "microcompact_boundary" and len(buf):
                yield _microcompact(rec, line, step, buf)
            message = _message(session, rec, line)
            if message is None:
                if isinstance(uuid, str):
                    _remember(links, uuid, links.get(parent) if isinstance(parent, str) else None)
                continue
            if inherited is not None and "summary" not in inherited and rec.get("isCompactSummary") is True:
                inherited["summary"] = {"line": line, "chars": Message("user", message.parts).size}
            if pending is not None:
                summary = compact_summary(rec, message, filing, line)
                yield pending.mutation(summary, line if summary is not None else None)
                pending = None
            slot = buf.slot(links.get(parent) if isinstance(parent, str) else None)
            if slot is not None and buf.branches_at(*slot, message.role):
                before = buf.messages()
                buf.cut(*slot)
                after = buf.messages()
                kept = len(after) - (len(after[-1].parts) < len(before[len(after) - 1].parts))
                yield Mutation("prune", step, before, after, "claude_code.rewind", f"line {line}",
                               line=line, changed=tuple(range(kept, len(before))))
            turn = rec["message"].get("id") if message.role == "assistant" else None
            turn = turn if isinstance(turn, str) else None
            if message.role == "assistant" and (turn is None or turn != buf.last_turn):
                # the usage of the request this snapshot is the prompt of (every line of a turn repeats it)
                session.note_provider_cache(anthropic_cache(rec["message"].get("usage")))
                yield Snapshot(step, buf.messages(), f"line {line}", line)
                step += 1
            buf.add(uuid, message.role, message.parts, turn, filing.here(line) if filing is not None else None)
            if isinstance(uuid, str):
                _remember(links, uuid, uuid)
        finally:  # a followed session waits for its next line here: nothing of this record is kept through it
            rec = message = summary = None
    final = buf.messages()
    if pending is not None:  # the file ends before its summary: a compaction in progress, not in the file yet
        session.facts["compaction_in_progress"] = pending.facts()
        final = pending.before
    yield Snapshot(step, final, f"line {last_line}", last_line or None, final=True)


def compact_summary(rec: dict, message: Message, filing: Filing | None = None, line: int = 0) -> Message | None:
    """The summary a compaction's ``isCompactSummary`` record holds (`message` read from it), else None; filed
    (`sessions.filed`) with a followed session's `filing`, the record being read at `line`."""
    if rec.get("isCompactSummary") is not True:
        return None
    summary = Message("user", message.parts, id=rec.get("uuid"))
    return summary if filing is None else filed_summary(summary, filing, filing.here(line))


def filed_summary(summary: Message, filing: Filing, where: Where) -> FiledMessage:
    """A compaction's `summary`, read from the record at `where`, filed."""
    return FiledMessage.of(summary, _Records("user", summary.id, array("q", (*where, len(summary.parts))),
                                             _NONE_CLEARED), filing)


def summary_at(session: Session, rec: Any, line: int) -> Message | None:
    """The compaction summary the record at `line` holds, else None (a resumed watcher reads it again)."""
    message = _message(session, rec, line) if isinstance(rec, dict) else None
    return compact_summary(rec, message) if message is not None else None


def _record_message(session: Session, rec: Any, line: int) -> Message | None:
    """The message of a record read again (`_Records.rebuild`)."""
    return _message(session, rec, line) if isinstance(rec, dict) else None


def _message(session: Session, rec: dict, line: int) -> Message | None:
    """The Anthropic message of a user/assistant record (None for other records, or a skip)."""
    msg = rec.get("message")
    if rec.get("type") not in ("user", "assistant") or not isinstance(msg, dict):
        return None
    item = {"role": msg.get("role", rec["type"]), "content": msg.get("content")}
    return session.convert(anthropic.read_parts, item, line, f"line {line}")
