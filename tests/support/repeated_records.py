"""Claude Code session files with records logged twice, as real files hold them (claude-code#66947, ctxrs/ctx#663):
the same ``uuid`` and ``timestamp``, byte for byte or differing in metadata only (``gitBranch``, ``version``,
``promptId``, an added ``slug``), the copy right after its record or later in the file. Each variant knows where
every line of the original went, so what a reader reports of it can be compared with what it reports of the
original (`in_original`). Used by tests/cli/test_replay_repeated_records.py and
tests/instrumentation/test_repeated_records.py."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LINE = re.compile(r"\bline (\d+)")
_SAYS_LINES = ("where", "message")  # the strings that name lines (literal values may hold "line 5" too)


@dataclass(frozen=True)
class Variant:
    """A session file's `lines` with copies added; `origin[i]` is the 1-based line of the original that output
    line i + 1 is, None for a copy."""

    name: str
    lines: list[bytes]
    origin: list[int | None]
    copies: int

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(self.lines))
        return path

    def in_original(self, value: Any) -> Any:
        """`value` (a replay JSON document or part of it) with every line number of this variant put back to the
        original's line (a copy's line becomes ``"copy"``, so a figure taken from a copy shows)."""
        if isinstance(value, dict):
            return {k: self._key(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.in_original(v) for v in value]
        return value

    def _key(self, key: str, value: Any) -> Any:
        if key in ("line", "records") and isinstance(value, int):
            return self._line(value)
        if key in _SAYS_LINES and isinstance(value, str):
            return _LINE.sub(lambda m: f"line {self._line(int(m.group(1)))}", value)
        return self.in_original(value)

    def _line(self, line: int) -> int | str:
        original = self.origin[line - 1] if 0 < line <= len(self.origin) else None
        return "copy" if original is None else original


def _has_uuid(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("uuid"), str)


def _restamped(line: bytes) -> bytes:
    """The record of `line` as another Claude Code build writes it again: same uuid, timestamp and message,
    other metadata, other bytes."""
    record = json.loads(line)
    record.update(gitBranch="feature/other", version="9.9.9", promptId="copy-prompt", slug="copied-slug")
    return json.dumps(record, separators=(", ", ": ")).encode() + b"\n"


def variant(path: Path, *, later: bool, restamp: bool, share: float = 0.05, seed: int = 7) -> Variant:
    """`path` with a `share` of its records that carry a uuid logged again (seeded): right after themselves, or
    (`later`) up to 300 lines further on; byte for byte, or (`restamp`) with other metadata. The last line is
    never copied past, so the file still ends with its own last record."""
    lines = path.read_bytes().splitlines(keepends=True)
    rnd = random.Random(seed)
    after: dict[int, list[bytes]] = {}  # index of the original line a copy follows -> the copies
    for i, line in enumerate(lines[:-1]):
        if rnd.random() < share and _has_uuid(line):
            at = rnd.randint(i + 1, min(len(lines) - 2, i + 300)) if later and i + 1 <= len(lines) - 2 else i
            after.setdefault(at, []).append(_restamped(line) if restamp else line)
    out: list[bytes] = []
    origin: list[int | None] = []
    for i, line in enumerate(lines):
        out.append(line)
        origin.append(i + 1)
        for copy in after.get(i, ()):
            out.append(copy)
            origin.append(None)
    name = f"{'later' if later else 'in a row'}, {'other metadata' if restamp else 'byte for byte'}"
    return Variant(name, out, origin, len(out) - len(lines))


def variants(path: Path) -> list[Variant]:
    """The four ways of logging records twice, for `path`."""
    return [variant(path, later=later, restamp=restamp) for later in (False, True) for restamp in (False, True)]
