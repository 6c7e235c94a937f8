"""Messages whose text lives in the session file: held while they are read and measured, put away while a followed
session waits for its file to grow, read again by offset (and checked against their digest) when a measurement
needs them.

``ctxwatch watch`` follows a session for days, so what it holds between records must be what the audit needs
(digests, sizes, roles, tool ids, literal sets, fingerprints), not the text. A `FiledMessage` is a `Message` that
also knows where its parts were read from (its `Source`: the records and which of their parts, made by the format's
reader). A `Filing` is one followed file's: it knows where the record being read lies (`here`) and which filed
messages hold their text; `put_away()`, called before the session waits, first lets the reader finish the messages
it is still collecting parts for (`settle`), lets the measurement take what it keeps of each message (`keep`: its
literal sets, cached by digest, which the next snapshot or mutation asks for), then drops the parts, canonical
bytes and text of every filed message, keeping its digest, size, role and tool ids. Touching a put-away message's
parts (a rewind's cut, a microcompaction, a measurement whose caches do not hold what it needs) reads its records
again (`Filing.reread`, by byte offset), rebuilds it with the reader's own conversion (`Source.rebuild`) and checks
the digest; it then holds its text until the next wait. A record that no longer reads as it did (the file was
rewritten under the watcher) raises `TextChanged`, and the watcher reads the session again from its start
(`watch.follower`). A session read whole (``ctxwatch replay``) files nothing: its messages are plain.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..model import Message, Part, ToolCall
from .files import BadJSON, parse_line

if TYPE_CHECKING:
    from .session import Session

_PARTS = Message.__dict__["parts"]  # the slots of `Message` a filed message empties while put away
_TOOL_CALLS = Message.__dict__["tool_calls"]

# where a record lies in its file: (byte offset, length in bytes, line number)
Where = tuple[int, int, int]


class TextChanged(RuntimeError):
    """A put-away message's record no longer reads as it did (one line: which line, and that the file was
    rewritten)."""


class Source(Protocol):
    """Where a filed message's parts were read from (`where`: its first record), and how its reader builds it
    from them again."""

    @property
    def where(self) -> Where: ...

    def rebuild(self, filing: Filing) -> Message: ...


class FiledMessage(Message):
    """A `Message` that can put its text away and read it back from the session file (see the module)."""

    __slots__ = ("_source", "_filing", "_size", "__weakref__")

    def __init__(self, role: str, parts: Iterable[Part], *, id: str | None = None, name: str | None = None,
                 extra: str | None = None, source: Source, filing: Filing) -> None:
        super().__init__(role, parts, id=id, name=name, extra=extra)
        self._source, self._filing, self._size = source, filing, -1
        filing.holding(self)

    @classmethod
    def of(cls, message: Message, source: Source, filing: Filing) -> FiledMessage:
        """`message`, filed: read from `source`."""
        return cls(message.role, message.parts, id=message.id, name=message.name, extra=message.extra,
                   source=source, filing=filing)

    @property  # type: ignore[override]
    def parts(self) -> tuple[Part, ...]:
        try:
            return _PARTS.__get__(self)  # type: ignore[no-any-return]
        except AttributeError:
            return self._fetch()

    @parts.setter
    def parts(self, value: tuple[Part, ...]) -> None:
        _PARTS.__set__(self, value)

    @property  # type: ignore[override]
    def tool_calls(self) -> tuple[ToolCall, ...]:
        try:
            return _TOOL_CALLS.__get__(self)  # type: ignore[no-any-return]
        except AttributeError:
            self._fetch()
            return _TOOL_CALLS.__get__(self)  # type: ignore[no-any-return]

    @tool_calls.setter
    def tool_calls(self, value: tuple[ToolCall, ...]) -> None:
        _TOOL_CALLS.__set__(self, value)

    @property
    def size(self) -> int:
        return self._size if self._size >= 0 else len(self.text)

    @property
    def source(self) -> Source:
        return self._source

    @property
    def held(self) -> bool:
        """Whether the message holds its text now."""
        try:
            _PARTS.__get__(self)
        except AttributeError:
            return False
        return True

    def put_away(self) -> None:
        """Keep the digest, size, role and tool ids; let go of the parts, canonical bytes and text."""
        if self.held:
            self.digest  # noqa: B018 - computed (and kept) before the canonical bytes go
            self._size = len(self.text)
            _PARTS.__delete__(self)
            _TOOL_CALLS.__delete__(self)
            self._canonical = self._text = None

    def _fetch(self) -> tuple[Part, ...]:
        rebuilt = self._source.rebuild(self._filing)
        if rebuilt.digest != self._digest:
            raise TextChanged(changed_at(self._source.where[2]))
        _PARTS.__set__(self, rebuilt.parts)
        _TOOL_CALLS.__set__(self, rebuilt.tool_calls)
        self._canonical = rebuilt._canonical
        self._filing.holding(self)
        return rebuilt.parts


class Filing:
    """The filed messages of one followed file, and how to read its records again."""

    def __init__(self, session: Session, here: Callable[[], tuple[int, int]]) -> None:
        self.session = session
        self._here = here
        self._holding: weakref.WeakValueDictionary[int, FiledMessage] = weakref.WeakValueDictionary()
        self.settle: Callable[[], object] | None = None  # the reader's: build the messages it still collects
        self.keep: Callable[[Message], object] | None = None  # the measurement's: what it keeps of a message
        self.rereading = False
        self.reads = 0  # records read again so far (what putting text away cost)

    @property
    def path(self) -> Path:
        return self.session.path

    def here(self, line: int) -> Where:
        """Where the record being read (at `line`) lies in the file."""
        offset, length = self._here()
        return offset, length, line

    def holding(self, message: FiledMessage) -> None:
        self._holding[id(message)] = message

    def put_away(self) -> None:
        """Put away the text of every filed message that holds it (the session is about to wait)."""
        if self.settle is not None:
            self.settle()
        for message in list(self._holding.values()):
            if self.keep is not None:
                self.keep(message)
            message.put_away()
        self._holding.clear()

    def reread(self, where: Where, convert: Callable[[Session, Any, int], Message | None]) -> Message:
        """The message `convert(session, record, line)` makes of the record at `where`, read again; TextChanged
        when the record is no longer a whole JSON line, or makes no message, or the session would skip it (a
        record read before reads again unless the file changed)."""
        offset, length, line = where
        self.reads += 1
        with self.path.open("rb") as f:
            f.seek(offset)
            raw = f.read(length)
        try:
            if len(raw) != length or not raw.endswith(b"\n"):
                raise BadJSON("cut short")
            record = parse_line(raw)
        except BadJSON:
            raise TextChanged(changed_at(line)) from None
        self.rereading = True
        try:
            message = convert(self.session, record, line)
        finally:
            self.rereading = False
        if message is None:
            raise TextChanged(changed_at(line))
        return message


def changed_at(line: int | None) -> str:
    """Why a message cannot be read again: its record at `line` is not what was read there."""
    return f"line {line} no longer holds the message read there (the file was rewritten?)"
