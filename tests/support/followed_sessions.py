"""A followed session in one thread, as ``ctxwatch watch`` runs it (`watch.live.LiveSession` on a `Tail`, the
audit, the span emitter): what it holds while it waits for its file to grow, and its file written one line per
wait. Used by tests/instrumentation/test_followed_session_memory.py and bench/bench_followed_memory.py."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from opentelemetry.trace import NoOpTracerProvider

from ctxwatch.contraction import DetectorConfig
from ctxwatch.literals import LiteralRegistry
from ctxwatch.replay.audit import Auditor, SessionAudit, feed
from ctxwatch.replay.backfill import Backfill
from ctxwatch.sessions import detect_session_format
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.watch.live import LiveSession
from ctxwatch.watch.tail import Tail


def no_spans() -> MutationTelemetry:
    return MutationTelemetry(NoOpTracerProvider(), capture_content=False)


def follow(path: Path, wait: Callable[[], bool], telemetry: MutationTelemetry | None = None,
           loop_id: str = "followed") -> tuple[LiveSession, Auditor]:
    """The watch pipeline on `path`, run in this thread until `wait()` (asked each time the lines run out) says
    to stop."""
    fmt = detect_session_format(path)
    session = LiveSession(Tail(path), fmt, wait, lambda _note: None)
    registry = LiteralRegistry()
    if hasattr(session, "measured_with"):  # not on a tree from before sessions.filed (the bench's baseline)
        session.measured_with(registry)
    auditor = Auditor(SessionAudit(str(path), loop_id, DetectorConfig(), format=fmt), session, registry)
    backfill = Backfill(telemetry or no_spans(), lambda: None, loop_id=loop_id, agent="a", service="s",
                        registry=registry)
    feed(session, auditor, backfill, final=False)
    return session, auditor


def held_when_caught_up(path: Path) -> tuple[int, Auditor]:
    """Bytes of Python heap the session's reader, audit and span emitter hold while it waits for more (after a
    garbage collection, measured by tracemalloc)."""
    held: list[int] = []
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]

        def caught_up() -> bool:
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0] - start)
            return False

        _, auditor = follow(path, caught_up)
    finally:
        tracemalloc.stop()
    return held[0], auditor


def line_by_line(original: Path, path: Path) -> Callable[[], bool]:
    """Write `original`'s first line to `path`; the `wait` that appends its next line each time it is asked
    (False once every line is written)."""
    lines = original.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0])
    written = iter(lines[1:])

    def one_more_line() -> bool:
        line = next(written, None)
        if line is not None:
            with path.open("ab") as f:
                f.write(line)
        return line is not None

    return one_more_line
