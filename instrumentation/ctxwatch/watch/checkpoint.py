"""Resume points: where a followed Claude Code session is read on from, and the audit state there.

A compaction's summary record starts an epoch: the reader's buffer is the summary alone and its record
links start afresh, so what the audit carries over from the epochs before is small and text-free — the
contraction detector's state, the reader's step, span and cycle counts, the pairs retired. `capture`
takes that state when the summary is read, as a `ResumePoint`, which the watcher keeps in its state
file beside the file's offset (`FileState.resume`). A restarted watcher, or an evicted session that
grows again, starts reading at the summary record with the state restored (`restore`): only the
current epoch is read again (its spans counted and not sent, as the offset and span count say), never
what came before it, so resuming costs the epoch, not the file.

On disk a resume point is offsets, counts, the detector's state (distances, sizes, literal *counts*)
and the summary message's 128-bit digest, which the record at the offset must still have: no message
text, no literal value, about 400 bytes. One that cannot be used — unreadable, of another version,
past what the state says was read, or at an offset that no longer holds the summary measured (the
file was rewritten) — is one line on stderr, and the session is read from its start as before.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..contraction import ContractionDetector
from ..model import Message
from ..replay.audit import Auditor
from ..replay.backfill import Backfill
from ..sessions import Mutation, Session
from ..sessions.claude_code import summary_at
from ..sessions.files import BadJSON, parse_line
from ..sessions.session import ReadFrom
from .tail import Tail

VERSION = 1
EPOCH_SOURCE = "claude_code.compact_boundary"  # the mutations an epoch starts at


class ResumeError(ValueError):
    """A resume point that cannot be used (one line, says why)."""


@dataclass(frozen=True)
class ResumePoint:
    """The audit state at the start of an epoch: the summary record at byte `offset` (after `line` lines)."""

    offset: int
    line: int
    summary: str          # hex digest of the summary message
    step: int             # the reader's step there
    spans: int            # spans made before the summary record was read
    cycles: int           # of them, mutations (the detector's cycles)
    pairs_retired: int
    time_ns: int | None   # the time recorded at or before `line`
    detector: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"v": VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: Any) -> ResumePoint:
        """ResumeError naming what is wrong when `data` is not a resume point of this version."""
        if not isinstance(data, dict) or data.get("v") != VERSION:
            raise ResumeError(f"the resume point is not one of version {VERSION}")
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = data.get(f.name)
            if f.name == "summary":
                ok = isinstance(value, str) and len(value) == 32
            elif f.name == "detector":
                ok = isinstance(value, dict)
            else:
                ok = (value is None and f.name == "time_ns") or (
                    isinstance(value, int) and not isinstance(value, bool) and value >= 0)
            if not ok:
                raise ResumeError(f"the resume point's {f.name!r} is malformed")
            values[f.name] = value
        return cls(**values)


def capture(mutation: Mutation, tail: Tail, session: Session, auditor: Auditor,
            backfill: Backfill) -> ResumePoint | None:
    """The resume point at the summary record `mutation` was just measured at, or None when it starts
    no epoch (not a compaction with its summary, or the reader is not at the summary's line)."""
    if mutation.source != EPOCH_SOURCE or mutation.summary is None or mutation.summary_line != tail.line:
        return None
    return ResumePoint(tail.line_start, tail.line - 1, mutation.summary.digest_hex, mutation.step, backfill.spans,
                       backfill.cycles, auditor.pairs_retired, session.time_of(tail.line - 1),
                       auditor.detector.to_dict())


def restore(point: ResumePoint, path: Path, session: Session, auditor: Auditor, backfill: Backfill) -> None:
    """Put `session`, `auditor` and `backfill` where `point` found them; the caller reads `path` on from
    ``point.offset``. ResumeError when the summary record there is not the one measured."""
    summary = _summary(point, path, session)
    try:
        detector = ContractionDetector.from_dict(point.detector, auditor.audit.config)
    except ValueError as exc:
        raise ResumeError(f"the resume point's detector state: {exc}") from None
    after = (summary,)
    auditor.resume(after, detector, point.pairs_retired)
    backfill.resume(after, point.spans, point.cycles, detector.state)
    session.read_from = ReadFrom(point.step, point.line, point.time_ns)


def _summary(point: ResumePoint, path: Path, session: Session) -> Message:
    with path.open("rb") as f:
        f.seek(point.offset)
        raw = f.readline(session.max_line_bytes + 1)
    try:
        summary = summary_at(session, parse_line(raw), point.line + 1) if raw.endswith(b"\n") else None
    except BadJSON:
        summary = None
    if summary is None or summary.digest_hex != point.summary:
        raise ResumeError(f"line {point.line + 1} is not the compaction summary it was (the file was rewritten?)")
    return summary
