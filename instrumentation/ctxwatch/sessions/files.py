"""Opening session files: checks, bounded JSONL streaming, capped JSON documents, and their errors.

A file that cannot be read at all (missing, a directory, a FIFO or device, a symlink loop, empty,
binary, a single JSON document over the size cap) raises `SessionReadError`, one line naming the
file; a FIFO or device is refused before anything is read from it. A file is binary when its
first line (up to 64 KiB) holds a NUL byte or is not UTF-8 text, whatever the file's size: garbage after valid records
costs only the lines it is on. Inside a JSONL file, a
corrupt, truncated or over-long line (or one whose bytes are not UTF-8 and are no JSON record with U+FFFD in
their place) is a `Skip` collected on the session (or, with
``strict=True``, a `SessionReadError` naming the line): one bad line does not cost the rest of a
long recording. JSONL is read in chunks cut at each newline, with a cap on the line length, so memory stays
bounded whatever the file size.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import InvalidContextError
from ..fastjson import REFUSED, decoded

MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
_SNIFF_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024  # read at a time by `iter_jsonl` (the heap holds one chunk)
UTF8_BOM = b"\xef\xbb\xbf"  # the byte order mark an editor may put first (Notepad, PowerShell 5 `Out-File`)


class SessionReadError(InvalidContextError):
    """A session file (or one of its lines) that cannot be read; the message names file and line."""

    def __init__(self, path: str | os.PathLike[str], reason: str, line: int | None = None) -> None:
        where = str(path) + (f", line {line}" if line is not None else "")
        super().__init__(reason, source=where)
        self.path = str(path)
        self.line = line


def check_file(path: Path) -> bytes:
    """The first bytes of a readable, non-empty, text file, less a UTF-8 byte order mark (see `without_bom`);
    SessionReadError otherwise."""
    try:
        # Opened without blocking and checked before reading: a FIFO would wait for a writer, a
        # device would be read for ever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        kind = _not_a_regular_file(os.fstat(fd).st_mode)
        if kind:
            os.close(fd)
            raise SessionReadError(path, f"is {kind}, not a session file")
        with os.fdopen(fd, "rb") as f:
            head = without_bom(f.read(_SNIFF_BYTES))
    except FileNotFoundError:
        raise SessionReadError(path, "no such file") from None
    except PermissionError:
        raise SessionReadError(path, "cannot be read (permission denied)") from None
    except OSError as exc:
        raise SessionReadError(path, f"cannot be read ({exc.strerror or exc})") from None
    if not head.strip():
        raise SessionReadError(path, "is empty")
    if _binary(head.lstrip()):
        raise SessionReadError(path, "is a binary file, not JSON or JSONL")
    return head


def without_bom(raw: bytes) -> bytes:
    """`raw` less the UTF-8 byte order mark it may start with: a file's start (its first line or its one
    document) is read as the same text with or without one."""
    return raw.removeprefix(UTF8_BOM)


def _not_a_regular_file(mode: int) -> str | None:
    """What a file of this mode is when it is not a regular file ("a directory", "a FIFO", ...)."""
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def _binary(head: bytes) -> bool:
    """Whether the first line of `head` holds a NUL byte or bytes that are not UTF-8 (a line cut
    at the end of `head` may end inside a character)."""
    first, newline, _ = head.partition(b"\n")
    if b"\x00" in first:
        return True
    try:
        first.decode("utf-8")
    except UnicodeDecodeError as exc:
        return bool(newline) or exc.start < len(first) - 3
    return False


class BadJSON(ValueError):
    """Text that is not one JSON value; `line` is the line of the error inside a multi-line document."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.line = line


def parse_line(raw: bytes) -> Any:
    """One JSON value; BadJSON with a short reason when it is not one. Columns count characters
    from 1; for text cut short it is the column just past its last character (where the rest was
    expected), also inside an unterminated string."""
    raw = without_bom(raw)
    value = decoded(raw)  # orjson, when it reads what json would
    if value is not REFUSED:
        return value
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        # A byte that is not UTF-8 inside a record's strings (a bad copy, an editor's Latin-1) leaves the
        # record whole: it is read with U+FFFD in that byte's place. Bytes that are no JSON even so are not text.
        try:
            return json.loads(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            raise BadJSON("not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        end = len(text.rstrip())
        if exc.pos >= end or exc.msg.startswith("Unterminated string"):
            line = text.count("\n", 0, end) + 1
            column = end - (text.rfind("\n", 0, end) + 1) + 1  # 1-based, one past the last character
            reason = "Unterminated string" if exc.msg.startswith("Unterminated string") else exc.msg
            raise BadJSON(f"truncated JSON ({reason}, column {column})", line) from None
        raise BadJSON(f"corrupt JSON ({exc.msg}, column {exc.colno})", exc.lineno) from None
    except ValueError as exc:  # not a JSONDecodeError: an integer over Python's digit limit (4,300)
        raise BadJSON(f"unreadable JSON number ({str(exc).partition(':')[0]})") from None
    except RecursionError:
        raise BadJSON("JSON nested too deeply to read") from None


def iter_jsonl(path: Path, skip: Callable[[int, str], None],
               max_line_bytes: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Any]]:
    """(1-based line number, value) for each non-blank line; bad lines go to `skip(line, reason)`."""
    with path.open("rb", buffering=0) as f:
        for lineno, raw in enumerate(_raw_lines(f, max_line_bytes), 1):
            if raw is None:
                skip(lineno, f"line longer than {max_line_bytes} bytes")
                continue
            if raw.isspace():  # blank (`raw` is never empty here); no stripped copy of every line
                continue
            try:
                value = parse_line(raw)
            except BadJSON as exc:
                skip(lineno, str(exc))
                continue
            yield lineno, value


def _raw_lines(f: BinaryIO, max_line_bytes: int, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes | None]:
    """Each line of `f` with its newline (the last one without, when the file does not end in one), as
    ``readline`` gives it; None for a line of more than `max_line_bytes` bytes before its newline, which is
    not kept. The file is read `chunk_bytes` at a time and cut at each newline found by ``bytes.find`` (a C
    ``memchr``; ``readline`` looks at every byte in a loop of its own), so what is held is a chunk and at
    most one line."""
    held: list[bytes] = []  # the start of a line that runs on past the chunks read so far
    size = 0  # its bytes; -1 while dropping an over-long line up to its newline
    while chunk := f.read(chunk_bytes):
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if size < 0 or size + end - start > max_line_bytes:
                yield None
                held = []
            elif held:
                yield b"".join((*held, chunk[start:end + 1]))
                held = []
            else:
                yield chunk[start:end + 1]
            size, start = 0, end + 1
        if start < len(chunk) and size >= 0:
            size += len(chunk) - start
            if size > max_line_bytes:
                held, size = [], -1
            else:
                held.append(chunk[start:])
    if size < 0:
        yield None
    elif held:
        yield b"".join(held)


def load_document(path: Path, max_document_bytes: int = MAX_DOCUMENT_BYTES) -> Any:
    """A whole-file JSON document (SWE-agent, OpenHands), refused over the size cap."""
    size = path.stat().st_size
    if size > max_document_bytes:
        raise SessionReadError(path, f"is {size / 2**20:.0f} MiB, over the {max_document_bytes / 2**20:.0f} "
                               "MiB limit for single-document formats (raise max_document_bytes to read it)")
    try:
        return parse_line(path.read_bytes())
    except BadJSON as exc:
        raise SessionReadError(path, str(exc), exc.line) from None
