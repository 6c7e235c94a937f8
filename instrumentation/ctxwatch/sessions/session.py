"""`Session`: one recorded session file, read lazily as a stream of events.

`read_session(path)` checks the file and names its format at once (so a missing, empty, binary
or unrecognised file fails before any work), then iterating the session reads it from disk
(again at each iteration) and yields `Snapshot` and `Mutation` events in file order. Lines that
could not be read are collected in `Session.skipped`, or raise at once with ``strict=True``.

While it is read, a session also keeps where each tool id first entered a buffer (`origin`: "line
381", "trajectory[3].messages[5]"), for the most recent `MAX_ORIGINS` ids, so a finding names the
record that introduced an id rather than the point where it was noticed; and `facts`, what the
reader learned about the session as a whole (e.g. Claude Code's ``inherited_compaction``).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import InvalidContextError
from ..model import Message
from .events import Event, Mutation, Skip, Snapshot
from .files import MAX_DOCUMENT_BYTES, MAX_LINE_BYTES, SessionReadError, check_file, iter_jsonl, load_document

EventReader = Callable[["Session"], Iterator[Event]]
MAX_ORIGINS = 50_000


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
        self._origins: OrderedDict[str, str] = OrderedDict()
        self._reader = reader

    def __iter__(self) -> Iterator[Event]:
        self.skipped = []
        self.facts = {}
        self._origins.clear()
        check_file(self.path)
        return self._reader(self)

    def origin(self, tool_id: str) -> str | None:
        """Where `tool_id` (a call's or a result's) was first read, if still remembered."""
        return self._origins.get(tool_id)

    def snapshots(self) -> Iterator[Snapshot]:
        return (e for e in self if isinstance(e, Snapshot))

    def mutations(self) -> Iterator[Mutation]:
        return (e for e in self if isinstance(e, Mutation))

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r}, format={self.format!r})"

    # --- for the format readers ------------------------------------------------------------
    def skip(self, line: int | None, reason: str, where: str | None = None) -> None:
        """Record an unreadable line or record (or raise at once when strict)."""
        where = where or (f"line {line}" if line is not None else "record")
        if self.strict:
            raise SessionReadError(self.path, reason if line is not None else f"{where}: {reason}", line)
        self.skipped.append(Skip(where, reason, line))

    def lines(self) -> Iterator[tuple[int, Any]]:
        return iter_jsonl(self.path, self.skip, self.max_line_bytes)

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
        """Remember `where` as the origin of the tool ids `message` carries (the first one seen wins)."""
        for tool_id in (*message.call_ids, *message.result_ids):
            if tool_id not in self._origins:
                self._origins[tool_id] = where
                if len(self._origins) > MAX_ORIGINS:
                    self._origins.popitem(last=False)
