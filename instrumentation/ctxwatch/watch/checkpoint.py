"""Resume points: where a followed session is read on from after a compaction, and the audit state there.

A compaction starts an epoch: the buffer is what the compaction left (Claude Code: the summary record alone,
with the record links starting afresh; Codex: a ``compacted`` record's replacement history), so what the
audit carries over from the epochs before is small and text-free — the contraction detector's state, the
reader's step, span and cycle counts, the pairs retired. `capture` takes that state once the compaction is
measured, as a `ResumePoint`, which the watcher keeps in its state file beside the file's offset
(`FileState.resume`); a followed session holds that buffer filed (`sessions.filed`), as its reader would.
A restarted watcher, or an evicted session that grows again, reads the file on from
there with the state restored (`restore`): the buffer the compaction left is read again from its record, by
offset, and checked against its digest; only the current epoch is read again (its spans counted and not
sent, as the offset and span count say), never what came before it, so resuming costs the epoch, not the
file. Where each format's epoch starts is `EPOCHS`.

On disk a resume point is offsets, counts, the detector's state (distances, sizes, literal *counts*) and a
128-bit digest of the buffer the compaction left: no message text, no literal value, about 400 bytes. One
that cannot be used — unreadable, of another version or format, past what the state says was read, or at an
offset that no longer holds the compaction measured (the file was rewritten) — is one line on stderr, and
the session is read from its start as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import xxhash

from ..contraction import ContractionDetector
from ..model import Message
from ..replay.audit import Auditor
from ..replay.backfill import Backfill
from ..sessions import Mutation, Session
from ..sessions.claude_code import filed_summary, summary_at
from ..sessions.codex import compacted_at
from ..sessions.codex import filed as codex_filed
from ..sessions.filed import Filing, Where
from ..sessions.files import BadJSON, parse_line
from ..sessions.session import ReadFrom
from .tail import Tail

VERSION = 1


@dataclass(frozen=True)
class Epochs:
    """Where one format's epochs start: after a mutation from `source`, whose record holds the buffer it left
    (`after_at(session, record, line)`); `reread`: the reader starts at that record again (Claude Code's
    summary is the first record of its buffer), else just after it, given the buffer."""

    source: str
    after_at: Callable[[Session, Any, int], tuple[Message, ...] | None]
    reread: bool
    filed: Callable[[tuple[Message, ...], Filing, Where, Any], tuple[Message, ...]]  # as a followed session holds it


EPOCHS = {
    "claude_code": Epochs("claude_code.compact_boundary",
                          lambda session, rec, line: (s,) if (s := summary_at(session, rec, line)) else None, True,
                          lambda after, filing, where, _: tuple(filed_summary(s, filing, where) for s in after)),
    "codex": Epochs("codex.compacted", compacted_at, False,
                    lambda after, filing, where, _: codex_filed(after, filing, where)),
}


class ResumeError(ValueError):
    """A resume point that cannot be used (one line, says why)."""


@dataclass(frozen=True)
class ResumePoint:
    """The audit state at the start of an epoch: the tail starts at byte `offset` (after `line` lines); the
    record at byte `record` holds the buffer the compaction left."""

    format: str
    offset: int
    line: int
    record: int
    after: str            # hex digest of the buffer the compaction left (`buffer_digest`)
    step: int             # the reader's step there
    spans: int            # spans made up to the compaction's, included
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
            if f.name == "format":
                ok = value in EPOCHS
            elif f.name == "after":
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


def buffer_digest(buffer: tuple[Message, ...]) -> str:
    """One 128-bit digest of the messages' digests, in order."""
    return xxhash.xxh3_128_hexdigest(b"".join(m.digest.to_bytes(16, "big") for m in buffer))


def capture(mutation: Mutation, tail: Tail, session: Session, auditor: Auditor,
            backfill: Backfill) -> ResumePoint | None:
    """The resume point after `mutation`, just measured, or None when it starts no epoch (not a compaction
    its format's epochs start at, the reader is not at the record holding the buffer it left, or that record read
    again as `restore` reads it leaves none: a Codex compaction without replacement history) or is no
    rewrite cycle of the alarm after one that was (an opaque compaction: the next cycle's d is measured from
    the buffer after the last cycle, which a resume point does not hold; with no cycle before, there is none)."""
    epochs = EPOCHS.get(session.format)
    at = mutation.summary_line if epochs is not None and epochs.reread else mutation.line
    if epochs is None or mutation.source != epochs.source or at is None or at != tail.line:
        return None
    if not auditor.audit.mutations or (auditor.audit.mutations[-1].cycle is None and auditor.detector.cycle):
        return None
    offset, line = (tail.line_start, tail.line - 1) if epochs.reread else (tail.offset, tail.line)
    point = ResumePoint(session.format, offset, line, tail.line_start, buffer_digest(mutation.after), mutation.step,
                        backfill.spans, backfill.cycles, auditor.pairs_retired, session.time_of(line),
                        auditor.detector.to_dict())
    try:  # a record `restore` would not resume at (a Codex compaction without replacement history) starts none
        _left_at(point, epochs, tail.path, session)
    except ResumeError:
        return None
    return point


def restore(point: ResumePoint, path: Path, session: Session, auditor: Auditor, backfill: Backfill) -> None:
    """Put `session`, `auditor` and `backfill` where `point` found them; the caller reads `path` on from
    ``point.offset``. ResumeError when the record there does not leave the buffer measured."""
    if point.format != session.format:
        raise ResumeError(f"the resume point is of a {point.format} session, not {session.format}")
    epochs = EPOCHS[point.format]
    after = _after(point, epochs, path, session)
    try:
        detector = ContractionDetector.from_dict(point.detector, auditor.audit.config)
    except ValueError as exc:
        raise ResumeError(f"the resume point's detector state: {exc}") from None
    auditor.resume(after, detector, point.pairs_retired)
    backfill.resume(after, point.spans, point.cycles, detector.state)
    session.read_from = ReadFrom(point.step, point.line, point.time_ns, () if epochs.reread else after)


def _after(point: ResumePoint, epochs: Epochs, path: Path, session: Session) -> tuple[Message, ...]:
    """The buffer the compaction's record (read again) leaves, when it is the one measured, as the session
    holds it."""
    after, raw, line = _left_at(point, epochs, path, session)
    filing = session.filing
    return after if filing is None else epochs.filed(after, filing, (point.record, len(raw), line), parse_line(raw))


def _left_at(point: ResumePoint, epochs: Epochs, path: Path, session: Session
             ) -> tuple[tuple[Message, ...], bytes, int]:
    """(the buffer, the raw record, its line) the compaction's record read again leaves; ResumeError when it
    leaves none or not the one measured."""
    line = point.line + 1 if epochs.reread else point.line
    with path.open("rb") as f:
        f.seek(point.record)
        raw = f.readline(session.max_line_bytes + 1)
    try:
        after = epochs.after_at(session, parse_line(raw), line) if raw.endswith(b"\n") else None
    except BadJSON:
        after = None
    if after is None or buffer_digest(after) != point.after:
        raise ResumeError(f"line {line} is not the compaction it was (the file was rewritten?)")
    return after, raw, line
