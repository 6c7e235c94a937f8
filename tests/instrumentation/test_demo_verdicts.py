"""The demo's "as designed" verdict (`ctxwatch.demo.run.verdicts`) can fail for every family: a healthy
family the monitor flagged, a contracting one it did not, a designed failure its guard never refused
by the invariant it was built to break, and one its guard or the monitor also took for contraction."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch.demo.run import CONTRACTING, CONVERGING_TOO, HEALTHY, REFUSED_BY, Fleet, verdicts
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
    flagged += [{"loop_id": loop_id, "flagged_cycle": 4}
                for agent in CONVERGING_TOO for loop_id in f.agents[agent].halted]
    result = verdicts(f, flagged)
    assert all(result[agent]["as_designed"] for agent in REFUSED_BY), {a: result[a]["violations"] for a in REFUSED_BY}
    assert not result[healthy]["as_designed"]


def test_a_designed_failure_halted_or_flagged_beyond_its_design_is_not_as_designed() -> None:
    """Review F8: the verdict of a designed failure only asked whether its invariant fired, so a loop halted
    for contraction went unnoticed. Now a designed failure that does not converge must halt nothing and be
    flagged nowhere, and one that does (the fixer) must be flagged by the monitor wherever its guard halted."""
    f = fleet(24)  # the fixer's guard halts it at round 21 on this seed (fall_ratio 0.6, docs/alarm.md)
    result = verdicts(f, [])
    for agent in set(REFUSED_BY) - CONVERGING_TOO:
        assert result[agent]["as_designed"], (agent, result[agent]["halted"])
        first = f.agents[agent].loops[0]
        assert not verdicts(f, [{"loop_id": first.loop_id, "flagged_cycle": 2}])[agent]["as_designed"]
        first.tally.halted_at = 4
        assert not verdicts(f, [])[agent]["as_designed"], agent
    for agent in CONVERGING_TOO:
        halted = f.agents[agent].halted
        assert halted, "the fixer converges within 24 cycles on this seed"
        assert not result[agent]["as_designed"]  # halted by its guard, not flagged by the monitor
        flagged = [{"loop_id": loop_id, "flagged_cycle": 4} for loop_id in halted]
        assert verdicts(f, flagged)[agent]["as_designed"]
