"""Crash safety (issue 5, "Persistence"): what was acknowledged with a 2xx survives `kill -9`.

Requests are built by the real OTel SDK (spans recorded by a TracerProvider, encoded by the OTLP
exporter's own encoder) and posted while the monitor is killed with SIGKILL from another thread.
After a restart on the same state file every acknowledged span's effect is there: each loop has
at least as many cycles as acknowledged requests carried (at most one more, the request in flight
when the process died), alarm states and onsets are intact, and persisted counters did not reset.
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from conftest import MonitorProcess, Sender, contracting_cycles, metric_value
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import semconv

LOOPS = 20
REQUESTS = 400


def _request_bodies() -> list[bytes]:
    """Request i carries cycle i of every loop (a healthy rewrite: d high, nothing lost)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "crash"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.monitor.crash")
    bodies = []
    for i in range(REQUESTS):
        for loop in range(LOOPS):
            attrs = {semconv.LOOP_ID: f"crash-{loop}", semconv.MUTATION_KIND: "compact", semconv.DECISION: "patch",
                     semconv.HASH_DISTANCE: 0.4 + 0.001 * (i % 7), semconv.LITERALS_BEFORE: 20,
                     semconv.LITERALS_LOST: 0, semconv.PASS_NUMBER: i + 1}
            with tracer.start_as_current_span("ctxwatch compact", attributes=attrs):
                pass
        bodies.append(encode_spans(memory.get_finished_spans()).SerializeToString())
        memory.clear()
    return bodies


def test_kill_9_loses_no_acknowledged_span(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state).start()
    try:
        sender = Sender(monitor.url, service="crash")
        for d, before, lost in contracting_cycles():
            sender.mutation("crash-alarm", d=d, before=before, lost=lost, agent="absorber")
        sender.flush()
        sender.close()
        alarm_before = monitor.get("/api/loops/crash-alarm").json()
        assert alarm_before["state"] == "contracting"

        bodies = _request_bodies()
        acknowledged = 0
        killed = threading.Event()

        def kill_after_some_acks() -> None:
            while acknowledged < REQUESTS // 4:
                threading.Event().wait(0.005)
            monitor.kill9()
            killed.set()

        killer = threading.Thread(target=kill_after_some_acks)
        killer.start()
        with httpx.Client(timeout=30) as client:
            for body in bodies:
                try:
                    response = client.post(monitor.url + "/v1/traces", content=body,
                                           headers={"Content-Type": "application/x-protobuf"})
                except httpx.TransportError:
                    break
                assert response.status_code == 200
                acknowledged += 1
        killer.join(timeout=60)
        assert killed.is_set() and not monitor.alive()
        assert REQUESTS // 4 <= acknowledged < REQUESTS, "the kill did not land mid-stream"
    finally:
        monitor.stop()

    restarted = MonitorProcess(state).start()
    try:
        loops = {loop["loop_id"]: loop for loop in restarted.get("/api/loops", params={"limit": 1000}).json()["loops"]}
        for loop in range(LOOPS):
            cycles = loops[f"crash-{loop}"]["cycles"]
            assert acknowledged <= cycles <= acknowledged + 1, (loop, cycles, acknowledged)
        alarm_after = restarted.get("/api/loops/crash-alarm").json()
        assert alarm_after == alarm_before
        metrics = restarted.get("/metrics").text
        assert metric_value(metrics, "ctxwatch_loops", state="contracting") == 1
        assert metric_value(metrics, "ctxwatch_contraction_onsets_total", agent="absorber") == 1
        compact = metric_value(metrics, "ctxwatch_mutations_total", kind="compact", service="crash")
        sent_alarm = len(contracting_cycles())
        assert sent_alarm + acknowledged * LOOPS <= compact <= sent_alarm + (acknowledged + 1) * LOOPS
        assert restarted.get("/api/alarms").json()["alarms"][0]["loop_id"] == "crash-alarm"
    finally:
        restarted.stop()
