"""``ctxwatch watch [PATH ...]``: its options, and the loop that follows the session files.

Every ``--poll`` seconds the files of the sessions in memory are looked at (`Follower.poll`: a grown
file wakes its session's thread, so a new record is read within a poll interval, and its span waits
at most `SEND_DELAY_S` in the exporter's batch), and every ``--idle-poll`` seconds the files of the
evicted ones too (most files of a long-used machine: polling them less often is what keeps the idle
cost of thousands of files low); every ``--rescan`` seconds the places are searched again
for new session files (`discovery.Places`: one ``stat`` per directory, a listing of the
directories that changed); every ``--checkpoint`` seconds the spans made so far are flushed and the
state file written (so a restart neither repeats nor loses a span). Polling is the mechanism: one
``stat`` per file per interval (bench/bench_watch.py measures what it costs). SIGTERM and SIGINT
stop it cleanly: every session's thread ends, the spans are flushed, the state is saved.
``--once`` reads what every file holds now and exits.

Exit codes (as ``ctxwatch replay``): 2 bad usage (a bad option, an unusable --otlp, a state file
that cannot be written) and, with ``--once``, spans that could not be exported; else 1 when an
emitted mutation has an enforced finding (orphaned tool pairs, contraction), each noted on stderr
in one line when it is found; else 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from ..replay.backfill import TIMEOUT_S, BackfillError, Exporter
from ..replay.table import printable
from .discovery import Places
from .follower import Follower
from .identity import ServiceLabels
from .live import Emitter
from .state import FileState, StateError, default_state_path, load_state, save_state

DEFAULT_SERVICE_CAP = 20
SEND_DELAY_S = 0.2  # a span waits at most this long in the batch: a record reaches the monitor within a second
MAX_GONE = 4096  # deleted paths whose numbering a watcher remembers (a new file there goes on from it)


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 < number <= 86_400:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400 seconds: {value!r}")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="session files or directories "
                        "(default: ~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp/*/chats)")
    parser.add_argument("--otlp", metavar="URL", help="OTLP/HTTP endpoint of a monitor or collector (base URL); "
                        "default: the standard OTEL_EXPORTER_OTLP_* settings")
    parser.add_argument("--once", action="store_true", help="read what the files hold now, send it, and exit")
    parser.add_argument("--state", type=Path, metavar="FILE", help="where offsets and span counts are kept "
                        "(default $XDG_STATE_HOME/ctxwatch/watch.json)")
    parser.add_argument("--service", metavar="NAME", help="one service name for every session (default: the "
                        "session's project, the last part of its working directory)")
    parser.add_argument("--max-services", type=int, default=DEFAULT_SERVICE_CAP, metavar="N",
                        help=f"distinct project service names before 'other' (default {DEFAULT_SERVICE_CAP})")
    parser.add_argument("--poll", type=_seconds, default=0.25, metavar="SECONDS",
                        help="how often files are looked at (default 0.25)")
    parser.add_argument("--idle-poll", type=_seconds, default=1.0, metavar="SECONDS",
                        help="how often the files of sessions evicted from memory (or never started) are looked "
                        "at (default 1)")
    parser.add_argument("--rescan", type=_seconds, default=0.25, metavar="SECONDS",
                        help="how often the places are searched for new sessions (default 0.25: a search "
                        "stats each directory and lists only those that changed)")
    parser.add_argument("--idle", type=_seconds, default=300.0, metavar="SECONDS",
                        help="a session read to its end and not written for this long is evicted from memory "
                        "(resumed when it grows; default 300)")
    parser.add_argument("--checkpoint", type=_seconds, default=2.0, metavar="SECONDS",
                        help="how often spans are flushed and the state saved (default 2)")


class Watcher:
    """The followed files, the telemetry they share, and the state file."""

    def __init__(self, args: argparse.Namespace, exporter: Exporter, state_path: Path, note: Callable[[str], None],
                 home: Path) -> None:
        self.args, self.exporter, self.state_path, self.note = args, exporter, state_path, note
        self.emitter = Emitter(exporter.telemetry, lambda: exporter.pipeline.force_flush(TIMEOUT_S))
        self.services = ServiceLabels(args.service, args.max_services)
        self.places = Places(args.paths, home)
        self.followers: dict[Path, Follower] = {}
        self.stop = threading.Event()
        self._saved: dict[str, FileState] = {}  # in the state file, not followed (yet)
        # deleted while followed (in memory only): which file of its session each was, so that a new file at the
        # path (the session going on after ``mv session.jsonl session.jsonl.1``) is numbered as its next one
        self._gone: dict[str, FileState] = {}
        self._written: dict[str, FileState] | None = None  # what the state file holds now
        self._next_idle_poll = 0.0
        try:
            self._saved = load_state(state_path)
        except StateError as exc:
            note(f"{exc}; starting afresh")

    def scan(self) -> None:
        """Follow every session file found that is not followed yet."""
        for path in sorted(self.places.search() - self.followers.keys()):
            state = self._saved.pop(str(path), None) or self._gone.pop(str(path), None) or FileState()
            self.followers[path] = Follower(path, state, self.emitter, self.services, self.note,
                                            idle_s=self.args.idle)

    def poll(self) -> None:
        """Look at the files of the sessions in memory (or not started yet); every ``--idle-poll`` seconds at
        all the others too."""
        now = time.monotonic()
        everyone = now >= self._next_idle_poll
        if everyone:
            self._next_idle_poll = now + self.args.idle_poll
        for path, follower in list(self.followers.items()):
            if (everyone or follower.starting_or_active) and not follower.poll():
                del self.followers[path]
                self._gone[str(path)] = follower.state.next_file()
                if len(self._gone) > MAX_GONE:
                    del self._gone[next(iter(self._gone))]

    def checkpoint(self) -> None:
        """Flush the spans made so far, then record them as sent."""
        states = {str(p): f.checkpoint() for p, f in self.followers.items()}
        self.exporter.pipeline.force_flush(TIMEOUT_S)
        failed = self.exporter.take_failures()
        if failed:
            self.note(f"{self.exporter.failure(failed)}; the watcher goes on")
        self._saved = {name: saved for name, saved in self._saved.items() if Path(name).exists()}  # not followed now
        current = {**self._saved, **states}
        if current != self._written:  # an idle watcher does not rewrite (and fsync) the same state
            save_state(self.state_path, current)
            self._written = current

    def run(self) -> None:
        """Follow until `stop` is set; then end every session, flush and save."""
        next_scan = next_checkpoint = 0.0
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                if now >= next_scan:
                    self.scan()
                    next_scan = now + self.args.rescan
                self.poll()
                if now >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = now + self.args.checkpoint
                self.stop.wait(self.args.poll)
        finally:
            for follower in self.followers.values():
                follower.stop()
        self.checkpoint()

    def once(self) -> None:
        self.scan()
        for path in sorted(self.followers):
            if self.stop.is_set():
                break
            self.followers[path].catch_up()
        self.checkpoint()

    def findings(self) -> int:
        """Enforced findings on the mutations emitted (each was noted when it was found)."""
        return sum(len(f.findings) for f in self.followers.values())


def _note_to(err: TextIO) -> Callable[[str], None]:
    lock = threading.Lock()

    def note(message: str) -> None:
        with lock:
            err.write(f"ctxwatch watch: {printable(message)}\n")
            err.flush()
    return note


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.otlp and not args.otlp.startswith(("http://", "https://")):
        return f"--otlp expects an http:// or https:// URL, got {args.otlp!r}"
    if args.max_services < 1:
        return f"--max-services must be at least 1, got {args.max_services}"
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        return f"no such file or directory: {', '.join(missing)}"
    return None


def _on_signals(handler: Callable[..., Any], signals: Iterable[int]) -> None:
    for number in signals:
        signal.signal(number, handler)


def run(args: argparse.Namespace, err: TextIO | None = None) -> int:
    """Follow the session files (see the module docstring); the exit code."""
    err = err or sys.stderr
    note = _note_to(err)
    problem = _usage_problem(args)
    if problem is not None:
        note(problem)
        return 2
    try:
        exporter = Exporter(args.otlp, args.service or "ctxwatch-watch", schedule_delay_s=SEND_DELAY_S)
    except ImportError as exc:
        note(f"needs the OpenTelemetry SDK ({exc.name} is missing); install ctxwatch[otlp]")
        return 2
    except BackfillError as exc:
        note(str(exc))
        return 2
    state_path = args.state or default_state_path()
    watcher = Watcher(args, exporter, state_path, note, Path(os.environ.get("HOME", "~")).expanduser())
    _on_signals(lambda *_: watcher.stop.set(), (signal.SIGTERM, signal.SIGINT))
    try:
        watcher.once() if args.once else watcher.run()
    except OSError as exc:
        note(f"state file {state_path}: cannot be written ({exc.strerror or exc})")
        return 2
    finally:
        exported = _close(exporter, note)
    if args.once and not exported:
        return 2  # for cron and CI: what was read did not all reach the endpoint
    return 1 if watcher.findings() else 0


def _close(exporter: Exporter, note: Callable[[str], None]) -> bool:
    """Flush and stop the exporter; whether every export of the run went through (a failure not noted yet
    gets its line here)."""
    try:
        exporter.close()
    except BackfillError as exc:
        note(str(exc))
    return exporter.all_sent
