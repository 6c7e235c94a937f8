"""`Session`: one recorded session file, read lazily as a stream of events.

`read_session(path)` checks the file and names its format at once (so a missing, empty, binary
or unrecognised file fails before any work), then iterating the session reads it from disk
(again at each iteration) and yields `Snapshot` and `Mutation` events in file order. Lines that
could not be read are collected in `Session.skipped`, or raise at once with ``strict=True``.

While it is read, a session also keeps where each tool id first entered a buffer (`origin`: "line
381", "trajectory[3].messages[5]"), as a call and as a result apart, for the most recent `MAX_ORIGINS` ids of each
side, so a finding names the record that introduced an id (the result's record for an orphan result, which
may come long after its call) rather than the point where it was noticed; and `facts`, what the
reader learned about the session as a whole (e.g. Claude Code's ``inherited_compaction``).

`recorded_ns` is the ``timestamp`` of the latest record read that carries one (Claude Code, Codex and
Gemini CLI records do, in JSONL and in Gemini CLI's ``.json`` document), in unix nanoseconds (None
before any); `time_of(line)` is the time recorded at or before `line`, for the last `MAX_TIMES`
stamped JSONL records (an event's time is that of the record that marks it). `version_at(line)` is,
likewise, the agent version the records at or before `line` carry (Claude Code writes ``version`` on
every record, so a session resumed after an upgrade names the new version from then on).

A session may be read from the middle of its file (``ctxwatch watch`` resuming at an epoch's first record,
`watch.checkpoint`): `read_from` then says at which step its reader starts and the time recorded before
that record, so events and times go on as if the file had been read from its start.

`take_provider_cache()` hands over the prompt-cache figures of the model responses read since it was last
called (a reader notes them with `note_provider_cache`: Claude Code's ``message.usage``), so a consumer
counts each response once, on the next span it emits (docs/telemetry.md, "What rewrites cost").
"""

from __future__ import annotations

import os
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ..cache import ProviderCache, added
from ..errors import InvalidContextError
from ..model import Message
from .events import Event, Mutation, Skip, Snapshot
from .filed import Filing
from .files import MAX_DOCUMENT_BYTES, MAX_LINE_BYTES, SessionReadError, check_file, iter_jsonl, load_document

EventReader = Callable[["Session"], Iterator[Event]]


@dataclass(frozen=True)
class ReadFrom:
    """Where a session read from the middle of its file starts: the reader's first `step`, the time recorded
    at or before `line` (the last line before the first one read; None: none recorded), and the `buffer` the
    records before left (for a reader that does not rebuild it from the first record it reads)."""

    step: int
    line: int
    time_ns: int | None
    buffer: tuple[Message, ...] = ()
MAX_ORIGINS = 50_000
ToolSide = Literal["tool_use", "tool_result"]  # which side of a tool pair a record carries
MAX_TIMES = 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Session:
    """A recorded session of a known format; iterate it for its events."""

    def __init__(self, path: str | os.PathLike[str], format: str, reader: EventReader, *,
                 strict: bool = False, max_line_bytes: int = MAX_LINE_BYTES,
                 max_document_bytes: int = MAX_DOCUMENT_BYTES) -> None:
        self.path = Path(path)
        self.format = format
        self.strict = strict
        self.max_line_bytes = max_line_bytes
        self.max_document_bytes = max_document_bytes
        self.skipped: list[Skip] = []
        self.facts: dict[str, Any] = {}
        self.recorded_ns: int | None = None
        self._times: deque[tuple[int, int]] = deque(maxlen=MAX_TIMES)  # (line, ns) of stamped records
        self._versions: deque[tuple[int, str]] = deque(maxlen=MAX_TIMES)  # (line, version) where it changes
        self._origins: OrderedDict[tuple[ToolSide, str], str] = OrderedDict()
        self._provider_cache: ProviderCache | None = None
        self._reader = reader
        self.read_from: ReadFrom | None = None  # None: its file is read from the start
        self.filing: Filing | None = None  # a followed session's: its readers file their messages (`filed`)

    def __iter__(self) -> Iterator[Event]:
        self.skipped = []
        self.facts = {}
        self.recorded_ns = None
        self._times.clear()
        self._versions.clear()
        self._origins.clear()
        self._provider_cache = None
        if self.read_from is not None and self.read_from.time_ns is not None:
            self.recorded_ns = self.read_from.time_ns
            self._times.append((self.read_from.line, self.read_from.time_ns))
        check_file(self.path)
        return self._reader(self)

    def origin(self, tool_id: str, side: ToolSide = "tool_use") -> str | None:
        """Where `tool_id` was first read as a call (``tool_use``) or as a result (``tool_result``), if still
        remembered."""
        return self._origins.get((side, tool_id))

    def snapshots(self) -> Iterator[Snapshot]:
        return (e for e in self if isinstance(e, Snapshot))

    def mutations(self) -> Iterator[Mutation]:
        return (e for e in self if isinstance(e, Mutation))

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r}, format={self.format!r})"

    def take_provider_cache(self) -> ProviderCache | None:
        """The cache figures of the responses read since the last call (None: none reported)."""
        figures, self._provider_cache = self._provider_cache, None
        return figures

    # --- for the format readers ------------------------------------------------------------
    def note_provider_cache(self, figures: ProviderCache) -> None:
        """A response's prompt-cache figures, added to those not yet taken."""
        if figures:
            self._provider_cache = added(self._provider_cache, figures)

    def skip(self, line: int | None, reason: str, where: str | None = None) -> None:
        """Record an unreadable line or record (or raise at once when strict)."""
        where = where or (f"line {line}" if line is not None else "record")
        if self.strict:
            raise SessionReadError(self.path, reason if line is not None else f"{where}: {reason}", line)
        self.skipped.append(Skip(where, reason, line))

    def lines(self) -> Iterator[tuple[int, Any]]:
        return self.stamped(iter_jsonl(self.path, self.skip, self.max_line_bytes))

    def stamped(self, lines: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        """`lines`, noting each record's ``timestamp`` in `recorded_ns`, and its ``version`` when it
        changes (`version_at`), as it goes by."""
        for line, value in lines:
            self.note_time(value, line)
            version = value.get("version") if isinstance(value, dict) else None
            if isinstance(version, str) and version and (not self._versions or self._versions[-1][1] != version):
                self._versions.append((line, version))
            yield line, value
            value = None  # not kept while a followed session waits for its next line

    def note_time(self, record: Any, line: int | None = None, key: str = "timestamp") -> None:
        """Note the time `record` carries under `key` (if any) as the latest recorded (at `line`, for a JSONL
        record; a document's records have no line, so their events take the latest time noted)."""
        at = recorded_time_ns(record.get(key)) if isinstance(record, dict) else None
        if at is not None:
            self.recorded_ns = at
            if line is not None:
                self._times.append((line, at))

    def version_at(self, line: int | None) -> str | None:
        """The agent version the latest record at or before `line` carries under ``version`` (None: none
        read, or `line` None)."""
        if line is not None:
            for at_line, version in reversed(self._versions):
                if at_line <= line:
                    return version
        return None

    def time_of(self, line: int | None) -> int | None:
        """When the record at `line` (or the nearest stamped one before it) was written, if still known;
        else the latest time recorded."""
        if line is not None:
            for at_line, at in reversed(self._times):
                if at_line <= line:
                    return at
        return self.recorded_ns

    def document(self) -> Any:
        return load_document(self.path, self.max_document_bytes)

    def convert(self, read: Callable[[Any, int | None], Message], item: Any, line: int | None,
                where: str) -> Message | None:
        """`read(item)`, or None after recording a skip when the item is not a valid message."""
        try:
            message = read(item, None)
        except InvalidContextError as exc:
            self.skip(line, str(exc), where)
            return None
        self.note(message, where)
        return message

    def note(self, message: Message, where: str) -> None:
        """Remember `where` as the origin of the calls and the results `message` carries (the first one seen
        wins)."""
        for tool_id in message.call_ids:
            self.note_id(tool_id, where)
        for tool_id in message.result_ids:
            self.note_id(tool_id, where, "tool_result")

    def note_id(self, tool_id: str, where: str, side: ToolSide = "tool_use") -> None:
        """Remember `where` as the origin of `tool_id` on its `side`, unless it was seen there before."""
        key = (side, tool_id)
        if key not in self._origins:
            self._origins[key] = where
            if len(self._origins) > 2 * MAX_ORIGINS:
                self._origins.popitem(last=False)


def recorded_time_ns(value: Any) -> int | None:
    """An ISO 8601 timestamp with a time zone ("2026-02-11T21:41:40.277Z") in unix nanoseconds, else None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    since = moment - _EPOCH  # whole days, seconds and microseconds: exact
    return (since.days * 86_400 + since.seconds) * 1_000_000_000 + since.microseconds * 1000
