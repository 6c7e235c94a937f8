"""The demo's "as designed" verdict (`ctxwatch.demo.run.verdicts`) can fail for every family: a healthy
family the monitor flagged, a contracting one it did not, and a designed failure its guard never refused
by the invariant it was built to break."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch.demo.run import CONTRACTING, HEALTHY, REFUSED_BY, Fleet, verdicts
from ctxwatch.telemetry import MutationTelemetry


def fleet(rounds: int) -> Fleet:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    f = Fleet(1, seed=3, telemetry=MutationTelemetry(provider, capture_content=False))
    for _ in range(rounds):
        f.step_all()
    return f


def test_every_family_has_a_verdict_rule() -> None:
    assert set(fleet(0).agents) == HEALTHY | CONTRACTING | set(REFUSED_BY)


def test_a_designed_failure_that_was_never_refused_is_not_as_designed() -> None:
    result = verdicts(fleet(0), [])
    assert not any(result[agent]["as_designed"] for agent in REFUSED_BY)
    assert all(result[agent]["as_designed"] for agent in HEALTHY)
    assert not any(result[agent]["as_designed"] for agent in CONTRACTING)  # nothing flagged yet


def test_refused_by_their_invariant_the_failures_are_as_designed_and_a_flagged_healthy_loop_is_not() -> None:
    f = fleet(12)
    healthy = next(iter(HEALTHY))
    flagged = [{"loop_id": lp.loop_id, "flagged_cycle": 3} for lp in f.agents[healthy].loops]
    result = verdicts(f, flagged)
    assert all(result[agent]["as_designed"] for agent in REFUSED_BY), {a: result[a]["violations"] for a in REFUSED_BY}
    assert not result[healthy]["as_designed"]
