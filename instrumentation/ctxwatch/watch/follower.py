"""`Follower`: one session file followed for as long as it exists.

Each poll compares the file with what was seen: grown or changed, its session is woken (or
started: identified from its first complete records, then audited by a thread of its own through
`live.LiveSession`); read to its end and not written for `idle_s` (by its modification time, so
old sessions are freed as soon as they are caught up), its thread ends and its memory is freed (the
file is still watched: it resumes at its current epoch, `checkpoint`, or else from the start, with the
spans already made skipped, see `live`);
shorter than what was read, or another file at the same path (rotated), it is read again from
its start (one that opens with another record than the file before is the session continued in it,
numbered as its next file: `_number`); gone, it is dropped. Each of these is one line on stderr,
never a traceback. A file in another format than Claude Code, Codex or Gemini CLI is reported once
and left alone.

With ``once`` (``ctxwatch watch --once``) nothing runs in the background: `catch_up` reads what
the file holds now and returns.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..literals import LiteralRegistry
from ..replay.audit import Auditor, feed
from ..replay.backfill import Backfill
from ..report import Finding
from ..sessions import Mutation, Session, SessionReadError, detect_session_format, read_session
from ..sessions.filed import TextChanged
from ..telemetry.sequence import Generation
from .checkpoint import ResumeError, ResumePoint, capture, restore
from .identity import AGENTS, HEAD_BYTES, ServiceLabels, SessionIdentity, head_records, identify, opening
from .live import Emitter, LiveSession, Note, SessionBackfill
from .state import FileState
from .tail import Tail

DOCUMENT_FORMATS = frozenset({"gemini_cli"})  # the formats that may be one JSON document rewritten whole


class Follower:
    """One followed file: its identity, its state, and the thread auditing it while it is active."""

    def __init__(self, path: Path, state: FileState, emitter: Emitter, services: ServiceLabels, note: Note,
                 *, idle_s: float = 300.0) -> None:
        self.path, self.state, self.emitter, self.services = path, state, emitter, services
        self.note, self.idle_s = note, idle_s
        self.identity: SessionIdentity | None = None
        self.format: str | None = None
        self.service = ""
        self.ignored = False
        self.findings: list[Finding] = []
        self._seen: tuple[int, int] | None = None
        self._waiting = False  # the session's thread has read all there is and waits for more
        self._unreadable = False  # noted once until it can be read again
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._once = False
        self._tail: Tail | None = None
        self._backfill: SessionBackfill | None = None

    # --- polled by the watcher ------------------------------------------------------------------
    def poll(self) -> bool:
        """Look at the file once; False when it is gone (the watcher forgets it)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.note(f"{self.path}: deleted; no longer followed")
            self.stop()
            return False
        except OSError as exc:
            if not self._unreadable:
                self.note(f"{self.path}: cannot be read ({exc.strerror or exc}); will try again")
            self._unreadable = True
            return True
        self._unreadable = False
        self._progress()
        if self.state.inode and st.st_ino != self.state.inode:
            self._restart(st.st_ino, "replaced by another file (rotated?); reading the new one from its start")
        elif st.st_size < self.state.offset:
            self._restart(st.st_ino, f"truncated to {st.st_size} bytes (was read to {self.state.offset}); "
                                     "reading it again from its start")
        self.state.inode = st.st_ino
        seen = (st.st_size, st.st_mtime_ns)
        if seen != self._seen:
            self._seen = seen
            self._activate()
        elif self.active and self._waiting and time.time() - st.st_mtime > self.idle_s:
            self._end_thread()  # read to its end and not written for idle_s: free its memory; it resumes from the state
        return True

    def catch_up(self) -> None:
        """Read what the file holds now, in this thread (``--once``)."""
        self._once = True
        if not self.poll():
            return
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    @property
    def active(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def starting_or_active(self) -> bool:
        """Whether its session is in memory or has not started yet (the files looked at every ``--poll``)."""
        return self.active or (self.identity is None and not self.ignored)

    def checkpoint(self) -> FileState:
        """The state to persist now (spans counted so far; the flush that follows exports them). The resume
        point is taken before the progress the session's thread has made, so it is never past it."""
        resume = self.state.resume
        self._progress()
        return replace(self.state, resume=resume)

    def stop(self) -> None:
        """End the session's thread (its stream ends, what it read is emitted) and wait for it."""
        self._end_thread()

    # --- the session ----------------------------------------------------------------------------
    def _progress(self) -> None:
        tail, backfill = self._tail, self._backfill
        if tail is not None and tail.offset > self.state.offset:
            self.state.offset, self.state.line = tail.offset, tail.line
        if backfill is not None:
            self.state.spans = max(self.state.spans, backfill.spans)

    def _restart(self, inode: int, why: str) -> None:
        self.note(f"{self.path}: {why}")
        self._end_thread()
        self.state = self.state.next_file(inode)
        self.identity, self.format, self.ignored, self._seen = None, None, False, None

    def _activate(self) -> None:
        if self.ignored or (self.identity is None and not self._identify()):
            return
        if self.active:
            self._wake.set()
            return
        self._stopping = False
        self._wake.clear()
        target = self._follow_document if self._is_document() else self._follow_lines
        self._thread = threading.Thread(target=self._guarded, args=(target,), name=f"ctxwatch-watch {self.path.name}",
                                        daemon=True)
        self._thread.start()

    def _is_document(self) -> bool:
        return self.format in DOCUMENT_FORMATS and self.path.suffix == ".json"

    def _identify(self) -> bool:
        """Name the session from its first complete records; False while there is none yet."""
        try:
            with self.path.open("rb") as f:
                head = f.read(HEAD_BYTES)
            if not head.strip() or (b"\n" not in head and self.path.suffix != ".json"):
                return False  # nothing complete written yet
            fmt = detect_session_format(self.path)
        except SessionReadError as exc:
            if self.path.suffix == ".json" and "truncated" in str(exc):
                return False  # a document being written
            self.note(f"{exc}; not followed")
            self.ignored = True
            return False
        except OSError:
            return False
        if fmt not in AGENTS:
            self.note(f"{self.path}: a {fmt} session, not Claude Code, Codex or Gemini CLI; not followed")
            self.ignored = True
            return False
        self.format = fmt
        self._number(opening(head, self._is_document()))
        identity = identify(self.path, fmt, head_records(head, self.path.suffix == ".json"))
        if self.state.project is not None:  # as first identified: a resume does not depend on the file's head
            identity = replace(identity, version=self.state.agent_version, project=self.state.project)
        else:
            self.state.agent_version, self.state.project = identity.version, identity.project
        self.identity = identity
        self.service = self.services.label(identity.project)
        return True

    def _number(self, first_record: str) -> None:
        """Which file of its session this is (`telemetry.sequence.Generation`): opening with another record than
        the file followed at this path before, the session continued in it (rotated), numbered afresh as the
        session's next generation; opening with the same one, that file read again."""
        state = self.state
        generation, state.opening = Generation(state.generation, state.opening).of(first_record)
        if generation != state.generation:  # nothing of the file read before counts for this one
            self.state = state = replace(state.next_file(state.inode), generation=generation)
            self.note(f"{self.path}: opens with another record than the file read before: the session continued "
                      f"in it, numbered as its file {state.generation + 1}")

    def _wait(self) -> bool:
        """Whether the stream goes on: blocks until the file changes, unless stopping or ``--once``."""
        if self._stopping or self._once:
            return False
        self._waiting = True
        self._wake.wait()
        self._waiting = False
        self._wake.clear()
        return not self._stopping

    def _end_thread(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopping = True
        self._wake.set()
        thread.join()
        self._thread = None
        self._progress()

    def _guarded(self, target: Callable[[], None]) -> None:
        try:
            target()
        except Exception as exc:  # noqa: BLE001 - one line naming the file, the watcher goes on
            self.note(f"{self.path}: cannot be followed ({type(exc).__name__}: {exc}); left alone")
            self.ignored = True

    def _run(self, session: Session, point: ResumePoint | None = None) -> None:
        """Audit `session` (a `LiveSession` whose tail starts at `point`, when given) and emit its spans."""
        assert self.identity is not None
        registry = LiteralRegistry()
        auditor = self.emitter.audit(session, self.identity, registry)
        backfill = self._backfill = self.emitter.backfill(self.identity, self.service, self.state.spans, registry,
                                                          self.note, lambda m: self._measured(m, auditor, backfill),
                                                          generation=self.state.generation)
        if point is not None and isinstance(session, LiveSession):
            try:
                restore(point, self.path, session, auditor, backfill)
            except (ResumeError, OSError) as exc:
                self._cannot_resume(exc)
                session.tail.seek(0, 0)
        try:
            feed(session, auditor, backfill, final=False)
        finally:
            self._progress()
            self._backfill = None
            self.findings.extend(backfill.findings)

    def _follow_lines(self) -> None:
        """Audit the session from where it resumes (the one place a session resumes): at the first record of
        its current epoch when a resume point was kept (`checkpoint`), else from its start, with the
        `state.spans` already made counted and not sent."""
        assert self.format is not None
        point = self._resume_point()
        while True:
            self._tail = Tail(self.path, point.offset, point.line) if point is not None else Tail(self.path)
            try:
                self._run(LiveSession(self._tail, self.format, self._wait, self.note, lambda: self._stopping), point)
                return
            except TextChanged as exc:  # a put-away message cannot be read again: the file is not what was read
                self.note(f"{self.path}: {exc}; reading it again from its start")
                self.state.resume, point = None, None
            finally:
                self._tail = None

    def _resume_point(self) -> ResumePoint | None:
        if self.state.resume is None:
            return None
        try:
            point = ResumePoint.from_json(self.state.resume)
            if point.offset > self.state.offset or point.spans > self.state.spans:
                raise ResumeError("the resume point is past what was read")
        except ResumeError as exc:
            self._cannot_resume(exc)
            return None
        return point

    def _cannot_resume(self, exc: Exception) -> None:
        self.note(f"{self.path}: cannot resume at its last compaction ({exc}); reading it again from its start")
        self.state.resume = None

    def _measured(self, mutation: Mutation, auditor: Auditor, backfill: Backfill) -> None:
        """Keep the resume point of the epoch `mutation` starts, if it starts one."""
        tail, session = self._tail, backfill.session
        if tail is not None and session is not None:
            point = capture(mutation, tail, session, auditor, backfill)
            if point is not None:
                self.state.resume = point.to_json()

    def _follow_document(self) -> None:
        while True:
            try:
                self._run(read_session(self.path, self.format))
                self.state.offset = self.state.line = 0  # a rewritten document: no offset to keep
            except SessionReadError:
                pass  # half-written: read again at the next change
            if not self._wait():
                return
