"""A loop with a session boundary per task, seen by the monitor (review findings F15 and F16).

docs/guard.md's loop calls `guard.session_boundary()` before every task, so each task is an episode of
its own: one span when the model answers without a tool. An episode starting is expected, not a gap:
the monitor takes every one of them (F15), and its detector, like the guard's, lives for the loop
(F16): the alarm the guard raised across episodes is the monitor's too. A real monitor on 127.0.0.1
fed by real guards through the OpenTelemetry SDK's OTLP/HTTP exporter.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MonitorProcess, Sender, metric_value, running_monitor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from test_run_arrival import view_when

from ctxwatch import ContextGuard, semconv
from ctxwatch.demo.fleet import ScratchpadLoop
from ctxwatch.telemetry import MutationTelemetry

TASKS = 12


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    yield from running_monitor(tmp_path, "--order-wait", "0.25", "--grpc-port", "off")


def test_every_episode_of_one_span_is_shown(monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, service="inventory-svc")
    guard = ContextGuard("inventory-openai", agent="inventory", telemetry=MutationTelemetry(sender.provider))
    messages: list[dict] = [{"role": "system", "content": "You are an inventory agent. Look SKUs up before answering."}]
    for task in range(TASKS):  # docs/guard.md's loop; every task answered without a tool
        guard.session_boundary(current=messages)
        messages = guard.messages
        messages.append({"role": "user", "content": f"How many units of SKU-{task:05d} and its neighbours?"})
        guard.observe(messages)  # the one span of the task's episode
        messages.append({"role": "assistant", "content": f"SKU-{task:05d}: 4 units."})
        sender.flush()  # each task's span in its own request, as a slow loop's batches are
    sender.close()
    view = view_when(monitor, guard.loop_id, lambda v: v["episode"] == guard.episode)
    assert view["episode"] == TASKS and view["candidate_episode"] is None
    deadline = time.monotonic() + 60
    while (shown := metric_value(monitor.get("/metrics").text, "ctxwatch_mutations_total",
                                 service="inventory-svc")) < TASKS:
        assert time.monotonic() < deadline, f"{shown} of {TASKS} mutations shown"
        time.sleep(0.05)
    assert shown == TASKS
    late = metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total")
    assert late == 0


def test_the_alarm_raised_across_session_boundaries_is_the_monitors_too(monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, service="scratch-svc")
    loop = ScratchpadLoop("scratchpad-writer", 0, 4150, MutationTelemetry(sender.provider))
    while not loop.done:  # the demo's loop, one task per cycle, a session boundary after each
        loop.step()
        sender.flush()
        if not loop.done:
            loop.guard.session_boundary(current=loop.buffer)
            loop.buffer = list(loop.guard.messages)
    sender.close()
    guard = loop.guard
    assert guard.halted_at is not None and guard.episode >= 3
    view = view_when(monitor, loop.loop_id, lambda v: v["episode"] == guard.episode and v["status"] == "halted")
    assert (view["state"], view["cycles"], view["flagged_cycle"]) == (guard.detector.state, guard.detector.cycle,
                                                                       guard.halted_at)
    assert view["source"] == "monitor"


class DropFirstCycle(BatchSpanProcessor):
    """The SDK's batch processor, except that the first span of a rewrite cycle (one with a hash distance) is
    lost on its way: the guard's own span, never exported (head sampling, a crash of the exporter)."""

    def __init__(self, exporter: OTLPSpanExporter) -> None:
        super().__init__(exporter)
        self.dropped: int | None = None

    def on_end(self, span: ReadableSpan) -> None:
        if self.dropped is None and span.attributes.get(semconv.HASH_DISTANCE) is not None:
            self.dropped = span.attributes[semconv.SEQUENCE]
            return
        super().on_end(span)


def test_a_cycle_lost_before_a_session_boundary_stays_lost_after_it(monitor: MonitorProcess) -> None:
    """The monitor gave a gap up that held a cycle, so it follows the guard's reported state. Its detector goes
    on through the session boundaries, and so does the missing cycle: the loop follows the guard to the end."""
    processor = DropFirstCycle(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces", timeout=30))
    provider = TracerProvider(resource=Resource.create({"service.name": "scratch-svc"}))
    provider.add_span_processor(processor)
    loop = ScratchpadLoop("scratchpad-lossy", 0, 4150, MutationTelemetry(provider))
    while not loop.done:
        loop.step()
        processor.force_flush()
        time.sleep(0.3)  # past order_wait: the gap before the next span is given up
        if not loop.done:
            loop.guard.session_boundary(current=loop.buffer)
            loop.buffer = list(loop.guard.messages)
    provider.shutdown()
    guard = loop.guard
    assert processor.dropped is not None and guard.halted_at is not None
    view = view_when(monitor, loop.loop_id, lambda v: v["episode"] == guard.episode and v["status"] == "halted")
    assert view["source"] == "guard" and view["source_reason"], view
    assert (view["state"], view["cycles"], view["flagged_cycle"]) == (guard.detector.state, guard.detector.cycle,
                                                                       guard.halted_at)
