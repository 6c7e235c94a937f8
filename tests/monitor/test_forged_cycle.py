"""One forged span whose detector cycle count differs changes whose state no viewer of the loop sees (review,
docs/monitor.md, "Missing cycles").

A loop's `source` turns to `guard` (the loop follows the state the guard reports for the rest of the episode)
only when spans are known to be missing. A span applied in its turn, with no gap before it, whose
`ctxwatch.contraction.cycle` differs from the monitor's count is no span of the guard's: it leaves the loop's
source, state, alarm and cycle count as the genuine guard's spans make them. A real monitor on 127.0.0.1, the
genuine guard's and the forger's spans exported by two OpenTelemetry SDK OTLP/HTTP exporters.
"""

from __future__ import annotations

from conftest import MonitorProcess, Sender, contracting_cycles, healthy_cycles, metric_value
from test_run_arrival import INSTANCE, Guard, late, view_when

from ctxwatch import semconv

LOOP = "forged-cycle-victim"


def test_one_forged_span_with_another_cycle_count_leaves_the_loops_source_and_verdict(
        monitor: MonitorProcess) -> None:
    genuine, forger = Sender(monitor.url, service="genuine"), Sender(monitor.url, service="forger")
    try:
        guard = Guard(genuine, LOOP)
        cycles = healthy_cycles(5) + contracting_cycles()
        for cycle in cycles[:5]:
            guard.cycle(*cycle)
        genuine.flush()
        view_when(monitor, LOOP, lambda v: v["sequence"] == 5)
        d, before, lost = cycles[5]  # span 6 of the guard's instance, before the guard's own: the forged one
        forger.mutation(LOOP, d=d, before=before, lost=lost, **{
            semconv.SEQUENCE: 6, semconv.EPISODE: 0, semconv.GUARD_INSTANCE: INSTANCE,
            semconv.CONTRACTION_CYCLE: 1_000, semconv.CONTRACTION_STATE: "contracting"})
        forger.flush()
        forged = view_when(monitor, LOOP, lambda v: v["sequence"] == 6)
        assert (forged["source"], forged["state"], forged["flagged_cycle"]) == ("monitor", "healthy", None)
        for cycle in cycles[5:]:  # the guard goes on: its span 6 is late, the forged one stood for it
            guard.cycle(*cycle)
        genuine.flush()
        view = view_when(monitor, LOOP, lambda v: v["sequence"] == len(cycles))
        assert late(monitor) == 1
        assert (view["source"], view["source_reason"]) == ("monitor", None)
        assert (view["state"], view["cycles"]) == (guard.detector.state, guard.detector.cycle)
        assert view["state"] == "contracting" and view["flagged_cycle"] is not None
        onsets = metric_value(monitor.get("/metrics").text, "ctxwatch_contraction_onsets_total")
        assert onsets == 1  # the genuine guard's onset alone, none for the forged span's "contracting"
    finally:
        genuine.close()
        forger.close()
