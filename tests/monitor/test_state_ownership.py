"""State-file ownership (issue 15, item 7), with the real monitor as a subprocess.

A second monitor on the same state file refuses to start (it used to start, and the last writer
won); a corrupt row stops the start-up with one line naming the file, table and row (it used to
be a traceback); /readyz is 503 while the state file cannot be written (a file-size limit put on the
running process with prlimit: every write fails, as on a full disk) and ready again once writes
succeed; SIGTERM exits 0 with everything acknowledged on disk.
"""

from __future__ import annotations

import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import MonitorProcess, Sender
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import semconv

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def _start(state: Path) -> subprocess.CompletedProcess[str]:
    """Run a monitor that is expected to refuse to start."""
    return subprocess.run([sys.executable, "-m", "ctxwatch_monitor", "--port", "0", "--state", str(state)],
                          capture_output=True, text=True, timeout=60)


def _filled_state(tmp_path: Path) -> Path:
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state).start()
    try:
        sender = Sender(monitor.url, service="owned")
        for loop in ("loop-a", "loop-b"):
            sender.mutation(loop, d=0.5, before=10)
        sender.flush()
        sender.close()
    finally:
        assert monitor.stop() == 0
    return state


def test_a_second_monitor_on_the_same_state_file_refuses_to_start(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    first = MonitorProcess(state).start()
    try:
        result = _start(state)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "in use by another monitor" in result.stderr and str(state) in result.stderr
        assert str(first.proc.pid) in result.stderr
        assert first.get("/readyz").status_code == 200  # the owner is untouched
    finally:
        assert first.stop() == 0
    MonitorProcess(state).start().stop()  # released at exit


@pytest.mark.parametrize("column,value,needle", [
    ("detector", "{not json", "loop_id='loop-b'"),
    ("state", "bogus", "column state holds 'bogus'"),
    ("history", "text, not a blob", "column history holds str"),
    ("cycles", "many", "column cycles holds str"),
])
def test_a_corrupt_loop_row_is_one_line_naming_file_and_row(tmp_path: Path, column: str, value: str,
                                                           needle: str) -> None:
    state = _filled_state(tmp_path)
    with sqlite3.connect(state) as conn:
        conn.execute(f"UPDATE loops SET {column}=? WHERE loop_id='loop-b'", (value,))
    result = _start(state)
    assert result.returncode == 2, result.stderr
    line = result.stderr
    assert line.count("\n") == 1 and "Traceback" not in line
    assert str(state) in line and "table loops" in line and "loop-b" in line and needle in line


def test_a_corrupt_series_row_is_one_line_naming_it(tmp_path: Path) -> None:
    state = _filled_state(tmp_path)
    with sqlite3.connect(state) as conn:
        conn.execute("UPDATE series SET value='[1,' WHERE family='ctxwatch_mutations_total'")
    result = _start(state)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "table series" in result.stderr
    assert "ctxwatch_mutations_total" in result.stderr and str(state) in result.stderr


def _bodies(count: int, loops: int) -> list[bytes]:
    """Request i carries one healthy cycle for each of `loops` new loops (so the state file grows)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.monitor.disk")
    bodies = []
    for i in range(count):
        for loop in range(loops):
            attrs = {semconv.LOOP_ID: f"disk-{i}-{loop}-" + "x" * 200, semconv.MUTATION_KIND: "compact",
                     semconv.DECISION: "patch", semconv.HASH_DISTANCE: 0.5, semconv.LITERALS_BEFORE: 10,
                     semconv.LITERALS_LOST: 0}
            with tracer.start_as_current_span("ctxwatch compact", attributes=attrs):
                pass
        bodies.append(encode_spans(memory.get_finished_spans()).SerializeToString())
        memory.clear()
    return bodies


def test_readyz_reflects_a_failing_disk_and_recovers(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state).start()
    pid = monitor.proc.pid
    try:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, resource.RLIM_INFINITY))  # no file grows any more
        with httpx.Client(timeout=30) as client:
            refused = client.post(monitor.url + "/v1/traces", content=_bodies(1, 50)[0], headers=PROTOBUF)
            assert refused.status_code == 503 and "retry-after" in refused.headers
            ready = client.get(monitor.url + "/readyz")
            assert ready.status_code == 503 and "last write to the state file failed" in ready.json()["reason"]
            assert client.get(monitor.url + "/healthz").status_code == 200
            assert client.get(monitor.url + "/metrics").status_code == 200
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
            assert client.get(monitor.url + "/readyz").status_code == 200
            again = client.post(monitor.url + "/v1/traces", content=_bodies(1, 1)[0], headers=PROTOBUF)
            assert again.status_code == 200
    finally:
        assert monitor.stop() == 0
    assert "Traceback" not in monitor.stderr()


def test_sigterm_exits_0_with_every_acknowledged_span_on_disk(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state).start()
    sender = Sender(monitor.url, service="term")
    for _ in range(25):
        sender.mutation("term-loop", d=0.5, before=10)
    sender.flush()
    sender.close()
    cycles = monitor.get("/api/loops/term-loop").json()["cycles"]
    started = time.monotonic()
    assert monitor.stop() == 0
    assert time.monotonic() - started < 30
    restarted = MonitorProcess(state).start()
    try:
        assert restarted.get("/api/loops/term-loop").json()["cycles"] == cycles == 25
    finally:
        assert restarted.stop() == 0
