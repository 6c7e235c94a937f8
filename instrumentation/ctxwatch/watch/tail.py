"""`Tail`: the complete lines of a file that is being written, from an offset.

Only lines ending in a newline are handed out: a half-written last line waits for its newline
(the writer has not finished it). The offset and line number advance as lines are handed out, so
a caller that stops and starts again (or a restarted watcher, from the state file) continues
where it was; `line_start` is where the line last handed out starts. A line longer than
`max_line_bytes` is handed out as None (to be reported as skipped) and its bytes are not kept.
Memory: one read chunk and the line being assembled.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..sessions import MAX_LINE_BYTES

CHUNK = 1 << 20


class Tail:
    """Complete lines of `path` after `offset` (line numbers continue from `line`)."""

    def __init__(self, path: Path, offset: int = 0, line: int = 0, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.path = path
        self.offset = offset
        self.line = line
        self.line_start = offset
        self.max_line_bytes = max_line_bytes

    def seek(self, offset: int, line: int) -> None:
        """Hand out the lines after `offset` next (numbered on from `line`)."""
        self.offset = self.line_start = offset
        self.line = line

    def lines(self) -> Iterator[tuple[int, bytes | None]]:
        """(line number, raw line) of every complete line written since the last call; None for an
        over-long line. OSError when the file cannot be opened."""
        with self.path.open("rb") as f:
            f.seek(self.offset)
            carry, overlong, consumed = b"", False, 0
            while chunk := f.read(CHUNK):
                data = carry + chunk if carry else chunk
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    raw = data[start:end + 1]
                    consumed += len(raw)
                    start = end + 1
                    self.line_start, self.offset, self.line = self.offset, self.offset + consumed, self.line + 1
                    consumed = 0
                    yield self.line, None if overlong or len(raw) > self.max_line_bytes + 1 else raw
                    overlong = False
                carry = data[start:]
                if len(carry) > self.max_line_bytes:
                    consumed += len(carry)
                    carry, overlong = b"", True
