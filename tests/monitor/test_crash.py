"""Crash safety (issue 5, "Persistence"): what was acknowledged with a 2xx survives `kill -9`.

Requests are built by the real OTel SDK (spans recorded by a TracerProvider, encoded by the OTLP
exporter's own encoder) and posted while the monitor is killed with SIGKILL from another thread.
After a restart on the same state file every acknowledged span's effect is there: each loop has
at least as many cycles as acknowledged requests carried (at most one more, the request in flight
when the process died), alarm states and onsets are intact, and persisted counters did not reset.
Run with one sender and with several concurrent ones, whose queued requests the monitor commits
together (group commit, `ctxwatch_monitor.batches`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from conftest import MonitorProcess, Sender, contracting_cycles, metric_value
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import semconv

LOOPS = 20      # in all, split between the senders
REQUESTS = 400  # in all, split between the senders
SENDERS = 4     # in the concurrent case


def _loops(sender: int, senders: int) -> range:
    return range(LOOPS // senders * sender, LOOPS // senders * (sender + 1))


def _request_bodies(loops: range, requests: int) -> list[bytes]:
    """Request i carries cycle i of each of `loops` (a healthy rewrite: d high, nothing lost)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "crash"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.monitor.crash")
    bodies = []
    for i in range(requests):
        for loop in loops:
            attrs = {semconv.LOOP_ID: f"crash-{loop}", semconv.MUTATION_KIND: "compact", semconv.DECISION: "patch",
                     semconv.HASH_DISTANCE: 0.4 + 0.001 * (i % 7), semconv.LITERALS_BEFORE: 20,
                     semconv.LITERALS_LOST: 0, semconv.PASS_NUMBER: i + 1}
            with tracer.start_as_current_span("ctxwatch compact", attributes=attrs):
                pass
        bodies.append(encode_spans(memory.get_finished_spans()).SerializeToString())
        memory.clear()
    return bodies


def _send_until_killed(url: str, bodies: list[bytes], acknowledged: list[int], index: int) -> None:
    """Post the bodies in order; count the 200s; stop at the first transport error (the kill)."""
    with httpx.Client(timeout=30) as client:
        for body in bodies:
            try:
                response = client.post(url + "/v1/traces", content=body,
                                        headers={"Content-Type": "application/x-protobuf"})
            except httpx.TransportError:
                return
            assert response.status_code == 200
            acknowledged[index] += 1


@pytest.mark.parametrize("senders", [1, SENDERS], ids=["one-sender", "concurrent-senders-group-commit"])
def test_kill_9_loses_no_acknowledged_span(tmp_path: Path, senders: int) -> None:
    """With concurrent senders the monitor commits the requests queued together in one transaction
    (ctxwatch_monitor.batches): still none is answered before its batch is on disk."""
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state).start()
    per_sender = REQUESTS // senders
    try:
        sender = Sender(monitor.url, service="crash")
        for d, before, lost in contracting_cycles():
            sender.mutation("crash-alarm", d=d, before=before, lost=lost, agent="absorber")
        sender.flush()
        sender.close()
        alarm_before = monitor.get("/api/loops/crash-alarm").json()
        assert alarm_before["state"] == "contracting"

        bodies = [_request_bodies(_loops(i, senders), per_sender) for i in range(senders)]
        acknowledged = [0] * senders
        killed = threading.Event()

        def kill_after_some_acks() -> None:
            while sum(acknowledged) < REQUESTS // 4:
                threading.Event().wait(0.005)
            monitor.kill9()
            killed.set()

        threads = [threading.Thread(target=_send_until_killed, args=(monitor.url, bodies[i], acknowledged, i))
                   for i in range(senders)]
        killer = threading.Thread(target=kill_after_some_acks)
        killer.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        killer.join(timeout=60)
        assert killed.is_set() and not monitor.alive()
        assert REQUESTS // 4 <= sum(acknowledged) < REQUESTS, "the kill did not land mid-stream"
    finally:
        monitor.stop()

    restarted = MonitorProcess(state).start()
    try:
        loops = {loop["loop_id"]: loop for loop in restarted.get("/api/loops", params={"limit": 1000}).json()["loops"]}
        for i in range(senders):
            for loop in _loops(i, senders):
                cycles = loops[f"crash-{loop}"]["cycles"]
                assert acknowledged[i] <= cycles <= acknowledged[i] + 1, (loop, cycles, acknowledged[i])
        alarm_after = restarted.get("/api/loops/crash-alarm").json()
        assert alarm_after == alarm_before
        metrics = restarted.get("/metrics").text
        assert metric_value(metrics, "ctxwatch_loops", state="contracting") == 1
        assert metric_value(metrics, "ctxwatch_contraction_onsets_total", agent="absorber") == 1
        compact = metric_value(metrics, "ctxwatch_mutations_total", kind="compact", service="crash")
        sent_alarm, per_request = len(contracting_cycles()), LOOPS // senders
        acked = sum(acknowledged)
        assert sent_alarm + acked * per_request <= compact <= sent_alarm + (acked + senders) * per_request
        assert restarted.get("/api/alarms").json()["alarms"][0]["loop_id"] == "crash-alarm"
    finally:
        restarted.stop()
