"""One session audited as its file grows: the replay's reader and audit, fed from a `Tail`.

`LiveSession` is a `ctxwatch.sessions.Session` whose records come from a `Tail` instead of one
pass over the file: when no complete line is left, it asks `wait()` whether to go on (a daemon
waits for the file to grow; ``--once`` and a stopping watcher end the stream). The format's own
reader (`sessions.READERS`) turns the records into events, and `replay.audit.feed` runs them
through the same `Auditor` (the guard's checks: orphaned pairs, lost literals, hash distance, the
contraction detector) and into a `SessionBackfill`, the replay's span emitter. The buffer left at
the end of the stream is not a request the agent sent, so it emits nothing.

A resumed session (after a restart or an eviction) is read again from the start of its current epoch
(`checkpoint`: after its last Claude Code or Codex compaction, the audit state restored), else from the start of
the file, with the spans an earlier run made (`skip`) counted but not emitted: the audit state is rebuilt
exactly, and no span is repeated.
Single-document recordings (Gemini CLI's ``.json``) are rewritten whole by the agent: each change
is read again the same way (`run_document`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..contraction import DetectorConfig
from ..literals import LiteralRegistry
from ..replay.audit import Auditor, MutationAudit, SessionAudit
from ..replay.backfill import Backfill
from ..report import Finding
from ..sessions import READERS, Event, Mutation, Session
from ..sessions.filed import Filing, TextChanged, changed_at
from ..sessions.files import BadJSON, parse_line
from ..telemetry import MutationTelemetry
from .identity import SessionIdentity
from .tail import Tail

Note = Callable[[str], None]


class _LinesEnded(Exception):
    """The stream of a followed session ends here (raised through the reader, which makes nothing of it)."""


class LiveSession(Session):
    """A session whose lines come from `tail` while `wait()` says to go on (and `stopping()` does not
    say to stop at once); skips become notes.

    The reader makes nothing of the lines ending (what it would make of an end of file — a compaction whose
    summary is not written yet, the buffer left at the end — is not what the file holds: it has not ended, and
    a resumed session reads those records again and emits what they become): the end is raised through it.

    Its readers file their messages (`sessions.filed`): before the session waits for its file to grow, the
    text of every message is put away, and read again from the file (by offset, checked by digest) if a
    measurement needs it; a record that no longer reads as it did raises `sessions.filed.TextChanged`.
    """

    def __init__(self, tail: Tail, format: str, wait: Callable[[], bool], note: Note,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        super().__init__(tail.path, format, READERS[format], max_line_bytes=tail.max_line_bytes)
        self.tail, self.wait, self.stopping, self._note = tail, wait, stopping, note
        self.filing = Filing(self, lambda: (tail.line_start, tail.offset - tail.line_start))
        self._forget_tokens: Callable[[], None] = lambda: None

    def measured_with(self, registry: LiteralRegistry) -> None:
        """The audit reads literal sets with `registry`: each message's are read (and cached there) before its
        text is put away, so the next snapshot or mutation finds them without reading the text back."""
        assert self.filing is not None
        self.filing.keep = lambda message: (registry.of(message), registry.downstream(message))
        self._forget_tokens = registry.forget_tokens  # pieces of the text, not held through a wait either

    def __iter__(self) -> Iterator[Event]:
        try:
            for event in super().__iter__():
                yield event
                del event  # not kept through the wait for more lines (a compaction's buffer before is large)
        except _LinesEnded:
            return

    def lines(self) -> Iterator[tuple[int, Any]]:
        return self.stamped(self._complete_lines())

    def _complete_lines(self) -> Iterator[tuple[int, Any]]:
        filing = self.filing
        assert filing is not None
        while True:
            for line, raw in self.tail.lines():
                if self.stopping():
                    raise _LinesEnded  # the spans made so far are counted; a resumed session goes on from them
                if raw is None:
                    self.skip(line, f"line longer than {self.max_line_bytes} bytes")
                elif raw.strip():
                    try:
                        yield line, parse_line(raw)
                    except BadJSON as exc:
                        self.skip(line, str(exc))
                raw = None  # not kept through the wait
            filing.put_away()
            self._forget_tokens()
            if not self.wait():
                raise _LinesEnded

    def skip(self, line: int | None, reason: str, where: str | None = None) -> None:
        if self.filing is not None and self.filing.rereading:  # a record read before no longer reads
            raise TextChanged(changed_at(line))
        self._note(f"{self.path}, {where or f'line {line}'}: skipped: {reason}")


class SessionBackfill(Backfill):
    """The replay's span emitter, noting (one line each) and keeping the enforced findings of the
    mutations it emitted."""

    def __init__(self, *args: Any, note: Note, measured: Callable[[Mutation], None],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.note, self.measured = note, measured
        self.findings: list[Finding] = []

    def mutation(self, mutation: Mutation, audit: MutationAudit) -> None:
        super().mutation(mutation, audit)
        if self.spans > self.skip:
            for finding in audit.findings():
                if finding.enforced:
                    self.findings.append(finding)
                    self.note(f"{self.loop_id}: {finding.invariant}: {finding.message}")
        self.measured(mutation)


class Emitter:
    """What every session's spans go through: the telemetry, its flush, the detector settings."""

    def __init__(self, telemetry: MutationTelemetry, flush: Callable[[], object],
                 config: DetectorConfig | None = None) -> None:
        self.telemetry, self.flush = telemetry, flush
        self.config = config or DetectorConfig()

    def backfill(self, identity: SessionIdentity, service: str, skip: int, registry: LiteralRegistry,
                 note: Note, measured: Callable[[Mutation], None], *,
                 generation: int = 0) -> SessionBackfill:
        """The session's span emitter (numbered as the session's `generation`-th file); `measured` is told of
        each mutation once its span is made."""
        return SessionBackfill(self.telemetry, self.flush, loop_id=identity.loop_id, agent=identity.agent,
                               service=service, registry=registry, agent_version=identity.version, skip=skip,
                               note=note, measured=measured, generation=generation)

    def audit(self, session: Session, identity: SessionIdentity, registry: LiteralRegistry) -> Auditor:
        audit = SessionAudit(str(session.path), identity.loop_id, self.config, format=session.format)
        if isinstance(session, LiveSession):
            session.measured_with(registry)
        return Auditor(audit, session, registry)
