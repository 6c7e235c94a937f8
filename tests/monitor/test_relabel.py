"""A span the loop does not take renames nothing: a late duplicate or a forged span with other labels.

A span already applied (the same guard instance and `ctxwatch.sequence`: a retry, a second `replay --otlp`, or a
forgery) that arrives again with another `service.name`, agent name and agent version is late: counted in
`ctxwatch_monitor_late_spans_total` only. It must not relabel the loop (its `/api/loops` names and its
`ctxwatch_loops` series), nor mark it seen, whether it comes after the loop's last span, while spans wait for a
missing one, or with a forged span numbered far ahead. The loop carries the names of the last span applied in
its guard's sequence, whatever the arrival order.

A real monitor on 127.0.0.1, the spans exported by the OpenTelemetry SDK's OTLP/HTTP exporter (one SDK per
resource: the genuine agent's and the forger's).
"""

from __future__ import annotations

import time
from typing import Any

from conftest import MonitorProcess, Sender, metric_value

from ctxwatch import semconv
from ctxwatch_monitor.records import AGENT_VERSION

INSTANCE = "0a3c5e6f-guard-instance"


def span(sender: Sender, loop_id: str, sequence: int, agent: str, version: str) -> None:
    sender.mutation(loop_id, agent=agent, d=0.4, before=10, **{semconv.SEQUENCE: sequence,
                    semconv.GUARD_INSTANCE: INSTANCE, semconv.CONTRACTION_CYCLE: sequence, AGENT_VERSION: version})


def view_when(monitor: MonitorProcess, loop_id: str, **expected: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        answer = monitor.get(f"/api/loops/{loop_id}")
        view = answer.json() if answer.status_code == 200 else {}
        if expected.items() <= view.items():
            return view
        assert time.monotonic() < deadline, view
        time.sleep(0.05)


def test_a_late_duplicate_or_a_forged_span_with_other_labels_does_not_relabel_the_loop(
        monitor: MonitorProcess) -> None:
    genuine, forger = Sender(monitor.url, service="genuine"), Sender(monitor.url, service="forged")
    try:
        # after the loop's last span: duplicates of an applied span, and one numbered far ahead
        for sequence in (1, 2, 3):
            span(genuine, "after", sequence, "agent-a", "1.0")
        genuine.flush()
        seen = view_when(monitor, "after", sequence=3)["last_seen"]
        for sequence in (3, 2, 10**9):
            span(forger, "after", sequence, "agent-x", "6.6.6")
        forger.flush()
        # while spans wait for a missing one: duplicates of a held span and of an applied one, then the gap fills
        for sequence in (1, 3):
            span(genuine, "held", sequence, "agent-a", "1.0")
        genuine.flush()
        view_when(monitor, "held", sequence=1, held=1)
        for sequence in (3, 1):
            span(forger, "held", sequence, "agent-x", "6.6.6")
        forger.flush()
        span(genuine, "held", 2, "agent-a", "1.0")
        genuine.flush()
        view_when(monitor, "held", sequence=3, held=0)

        after = view_when(monitor, "after", far_ahead=1)
        assert (after["service"], after["agent"], after["sequence"]) == ("genuine", "agent-a", 3)
        assert after["last_seen"] == seen  # the far-ahead span is held aside, no sign of life until corroborated
        held = monitor.get("/api/loops/held").json()
        assert (held["service"], held["agent"]) == ("genuine", "agent-a")
        metrics = monitor.get("/metrics").text
        assert metric_value(metrics, "ctxwatch_loops", service="genuine", agent="agent-a") == 2
        assert metric_value(metrics, "ctxwatch_loops", service="forged") == 0
        assert metric_value(metrics, "ctxwatch_loops", agent="agent-x") == 0
        assert metric_value(metrics, "ctxwatch_monitor_late_spans_total", reason="late") == 4
        # the late duplicates are in no fleet series, nor the one held aside far ahead (counted once applied)
        assert metric_value(metrics, "ctxwatch_mutations_total", agent_version="6.6.6") == 0
        assert metric_value(metrics, "ctxwatch_mutations_total", service="genuine", agent_version="1.0") == 6
    finally:
        genuine.close()
        forger.close()


def test_the_loop_carries_the_names_of_its_last_span_in_sequence_whatever_the_arrival_order(
        monitor: MonitorProcess) -> None:
    """A guard renamed mid-run (an upgraded agent): its spans 3 and 4 carry the new names. Whether they arrive
    first or last, the loop ends with the names of span 4, and each span is counted under its own names."""
    old, new = Sender(monitor.url, service="svc-old"), Sender(monitor.url, service="svc-new")
    try:
        for loop_id, order in (("in-order", (1, 2, 3, 4)), ("reversed", (4, 3, 2, 1))):
            for sequence in order:
                sender = new if sequence > 2 else old
                span(sender, loop_id, sequence, "agent-new" if sequence > 2 else "agent-old", "1.0")
                sender.flush()
            view = view_when(monitor, loop_id, sequence=4, held=0)
            assert (view["service"], view["agent"]) == ("svc-new", "agent-new"), view
        metrics = monitor.get("/metrics").text
        assert metric_value(metrics, "ctxwatch_loops", service="svc-new", agent="agent-new") == 2
        assert metric_value(metrics, "ctxwatch_loops", service="svc-old") == 0
        assert metric_value(metrics, "ctxwatch_mutations_total", service="svc-old", agent="agent-old") == 4
        assert metric_value(metrics, "ctxwatch_mutations_total", service="svc-new", agent="agent-new") == 4
    finally:
        old.close()
        new.close()
