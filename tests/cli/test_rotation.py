"""Review F1 and F4 as a user runs them: ``ctxwatch watch`` and ``ctxwatch replay --otlp`` subprocesses against a
real monitor subprocess (``python -m ctxwatch_monitor --port 0 --state :memory:``, uvicorn on 127.0.0.1).

F1: a Claude Code session file rotated (moved aside) and the session going on in a new file at the same path
(between two ``watch --once`` runs, or while a watcher follows it). The
new file is read from its start, so its numbering starts afresh: it must be the session's next file (a guard
instance of its own, `ctxwatch.telemetry.sequence.recorded_instance(loop, 1)`), which the monitor takes for a new
run of the loop, not duplicates of the first file's spans. Nothing may be late, both files' compactions must reach
the loop and the fleet counter, and ``replay --otlp`` of the two files in order must send the same spans again
(all duplicates), or, to a fresh monitor, the same figures.

F4: one span forged with the session's computable instance and ``ctxwatch.sequence`` 10^12, sent with the SDK's
OTLP/HTTP exporter, must not become the loop's position: after it waited well past ``order_wait``, the session
going on still reaches the monitor, none of its spans late.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from corpus_files import claude_code_compactions, claude_code_message_records, of_kind
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from replay_fixtures import ctxwatch, late_spans, loop_detail, metrics_text, replay_json
from test_watch import Watch, state_of, wait_for

from ctxwatch import semconv
from ctxwatch.demo.monitor_process import MonitorClient, MonitorProcess
from ctxwatch.telemetry.sequence import recorded_instance

ORDER_WAIT_S = 0.3
DEADLINE_S = 120.0


@pytest.fixture
def quick_monitor() -> Iterator[MonitorClient]:
    """A monitor giving gaps up after `ORDER_WAIT_S`, so a forged span would be applied within the test."""
    process = MonitorProcess(":memory:", "--grpc-port", "off", "--order-wait", str(ORDER_WAIT_S)).start()
    try:
        yield process.client
    finally:
        process.close()


class Session:
    """A real Claude Code session compacting twice: its lines, a line between the two compactions, its loop id."""

    def __init__(self, corpus: Path) -> None:
        for path in of_kind("claude_code", corpus):
            compactions = claude_code_compactions(path)
            if len(compactions) >= 2:
                self.lines = [line.rstrip(b"\n") + b"\n" for line in path.read_bytes().splitlines()]  # complete
                self.split = (compactions[0][0] + compactions[1][0]) // 2
                self.id = next(r["sessionId"] for _, r in claude_code_message_records(path)
                               if isinstance(r.get("sessionId"), str))
                self.loop = f"claude-code-{self.id}"
                return
        pytest.skip("no corpus Claude Code session compacting twice")

    def head(self) -> bytes:
        return b"".join(self.lines[:self.split - 1])

    def rest(self) -> bytes:
        return b"".join(self.lines[self.split - 1:])

    def path(self, tmp_path: Path) -> tuple[Path, Path]:
        """A temporary HOME, and where Claude Code writes the session in it."""
        home = tmp_path / "home"
        path = home / ".claude" / "projects" / "-home-dev-shop" / f"{self.id}.jsonl"
        path.parent.mkdir(parents=True)
        return home, path

    def begin(self, tmp_path: Path) -> tuple[Path, Path, Path]:
        """The session's first file written up to `split` (HOME, the file, and a watcher's state file to be)."""
        home, path = self.path(tmp_path)
        path.write_bytes(self.head())
        return home, path, tmp_path / "watch.json"


def watch_once(home: Path, url: str, state: Path) -> str:
    proc = ctxwatch("watch", "--once", "--otlp", url, "--state", state, timeout=300,
                    env={**os.environ, "HOME": str(home)})
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


def spans_made(state: Path, path: Path) -> int:
    return json.loads(state.read_text())["files"][str(path)]["spans"]


def compactions_counted(url: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in metrics_text(url).splitlines()
               if line.startswith("ctxwatch_mutations_total{") and 'kind="compact"' in line)


def rewrites(detail: dict) -> list[tuple[str, float | None]]:
    """(kind, d) of each mutation in the monitor's history; d None for one that is no cycle of the alarm."""
    return [(c["kind"], None if c["d"] is None else round(c["d"], 6)) for c in detail["history"]
            if c["kind"] != "append"]


def cycles_in(session: dict) -> int:
    """How many of the replay's mutations are rewrite cycles of the alarm (the monitor's detector counts those)."""
    return sum(m["cycle"] is not None for m in session["mutations"])


def test_a_rotated_session_goes_on_as_its_next_file_in_watch_and_replay(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    session = Session(corpus)
    home, path, state = session.begin(tmp_path)
    watch_once(home, monitor.url, state)
    first_spans = spans_made(state, path)
    rotated = path.with_name(path.name + ".1")
    path.replace(rotated)  # rotated: moved aside, the session goes on in a new file at the same path
    path.write_bytes(session.rest())
    notes = watch_once(home, monitor.url, state)
    assert "replaced by another file" in notes and "the session continued in it" in notes
    second_spans = spans_made(state, path)

    _, doc, _ = replay_json(rotated, path)
    assert [s["loop_id"] for s in doc["sessions"]] == [session.loop, session.loop]
    mutations = [m for s in doc["sessions"] for m in s["mutations"]]
    assert sum(m["kind"] == "compact" for m in mutations) >= 2
    detail = loop_detail(monitor.url, session.loop)
    assert detail is not None and late_spans(monitor.url) == 0
    assert (detail["instance"], detail["sequence"], detail["candidate_instance"]) == \
        (recorded_instance(session.loop, 1), second_spans, None)
    assert compactions_counted(monitor.url) == sum(m["kind"] == "compact" for m in mutations)
    assert rewrites(detail)[-len(doc["sessions"][1]["mutations"]):] == \
        [(m["kind"], None if m["hash_distance"] is None else round(m["hash_distance"], 6))
         for m in doc["sessions"][1]["mutations"]]
    assert detail["cycles"] == cycles_in(doc["sessions"][1])  # the new run's detector: the new file's

    # replay of the two files in order: the same numberings, so the same spans again (duplicates, late; replay
    # also sends the buffer a file ends with, which the watcher leaves for the file to go on)
    proc = ctxwatch("replay", rotated, path, "--otlp", monitor.url, timeout=300)
    assert proc.returncode in (0, 1) and proc.stderr == "", proc.stderr
    assert late_spans(monitor.url) >= first_spans + second_spans
    again = loop_detail(monitor.url, session.loop)
    assert again is not None and {k: again[k] for k in ("instance", "cycles", "history")} == \
        {k: detail[k] for k in ("instance", "cycles", "history")}


def test_replay_of_a_rotated_session_into_a_fresh_monitor_keeps_both_files(
        quick_monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    session = Session(corpus)
    _, path = session.path(tmp_path)
    rotated = path.with_name(path.name + ".1")
    rotated.write_bytes(session.head())
    path.write_bytes(session.rest())
    proc = ctxwatch("replay", rotated, path, path, "--otlp", quick_monitor.url, timeout=300)  # the last one twice
    assert proc.returncode in (0, 1) and proc.stderr == "", proc.stderr
    _, doc, _ = replay_json(rotated, path)
    detail = loop_detail(quick_monitor.url, session.loop)
    assert detail is not None and detail["instance"] == recorded_instance(session.loop, 1)
    assert compactions_counted(quick_monitor.url) == sum(m["kind"] == "compact" for s in doc["sessions"]
                                                         for m in s["mutations"])
    assert late_spans(quick_monitor.url) == detail["sequence"]  # the file given twice: its spans again, late


def forge(url: str, loop: str, sequence: int) -> None:
    """One span of the session's own (computable) instance, numbered `sequence`, through the SDK's exporter."""
    provider = TracerProvider(resource=Resource.create({"service.name": "forger"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=30)))
    attributes = {semconv.LOOP_ID: loop, semconv.GUARD_INSTANCE: recorded_instance(loop), semconv.SEQUENCE: sequence,
                  semconv.MUTATION_KIND: "append", semconv.DECISION: "patch", semconv.LITERALS_BEFORE: 0,
                  semconv.LITERALS_LOST: 0, semconv.ORPHANS_TOOL_USE: 0, semconv.ORPHANS_TOOL_RESULT: 0,
                  semconv.CONTRACTION_STATE: "healthy", semconv.CONTRACTION_CYCLE: 1, semconv.EPISODE: 0,
                  "gen_ai.agent.name": "claude-code"}
    with provider.get_tracer("forger").start_as_current_span("ctxwatch append", attributes=attributes):
        pass
    provider.shutdown()


def test_one_forged_span_numbered_far_ahead_does_not_mute_a_replayed_session(
        quick_monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    session = Session(corpus)
    _, path = session.path(tmp_path)
    path.write_bytes(session.head())
    assert ctxwatch("replay", path, "--otlp", quick_monitor.url, timeout=300).stderr == ""
    head = loop_detail(quick_monitor.url, session.loop)
    assert head is not None
    forge(quick_monitor.url, session.loop, 10**12)
    forged = loop_detail(quick_monitor.url, session.loop)
    assert forged is not None and forged["far_ahead"] == 1 and forged["sequence"] == head["sequence"]
    time.sleep(10 * ORDER_WAIT_S)  # what was held waited well past order_wait: a gap would have been given up
    assert loop_detail(quick_monitor.url, session.loop)["sequence"] == head["sequence"]

    path.write_bytes(b"".join(session.lines))  # the session went on: the whole file, as a watcher would go on with it
    assert ctxwatch("replay", path, "--otlp", quick_monitor.url, timeout=300).stderr == ""
    _, doc, _ = replay_json(path)
    deadline = time.monotonic() + DEADLINE_S
    while (detail := loop_detail(quick_monitor.url, session.loop))["cycles"] < cycles_in(doc["sessions"][0]):
        assert time.monotonic() < deadline, detail
        time.sleep(0.1)
    assert detail["state"] == doc["sessions"][0]["verdict"]["state"] and detail["source"] == "monitor"
    assert late_spans(quick_monitor.url) == head["sequence"]  # the head sent twice: only those are late
    assert detail["far_ahead"] == 1 and sys.maxsize > detail["sequence"] > head["sequence"]


def test_a_watcher_following_a_session_goes_on_with_its_rotated_continuation(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    session = Session(corpus)
    home, path, state = session.begin(tmp_path)
    watch = Watch(home, monitor.url, state)
    try:
        wait_for(lambda: state_of(state, path).get("line") == session.split - 1, "the first file read")
        path.replace(path.with_name(path.name + ".1"))
        path.write_bytes(session.rest())  # the agent goes on in a new file at the same path
        rest = len(session.lines) - session.split + 1
        wait_for(lambda: state_of(state, path).get("generation") == 1 and state_of(state, path).get("line") == rest,
                 "the continuation read as the session's next file")
    finally:
        code, stderr = watch.stop()
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    assert "the session continued in it, numbered as its file 2" in stderr
    _, doc, _ = replay_json(path.with_name(path.name + ".1"), path)
    wait_for(lambda: compactions_counted(monitor.url) == sum(m["kind"] == "compact" for s in doc["sessions"]
                                                             for m in s["mutations"]), "both files' compactions")
    detail = loop_detail(monitor.url, session.loop)
    assert detail is not None and detail["instance"] == recorded_instance(session.loop, 1)
    assert detail["sequence"] == state_of(state, path)["spans"] and late_spans(monitor.url) == 0
