"""A restarted guard process reusing its loop id (review D2), in process: the ordering rule for guard instances.

The spans of each process carry its own `ctxwatch.guard.instance.id` and number the loop from 1 again
(`ctxwatch.telemetry.sequence`). The engine (in memory, as the monitor runs it) must follow the new
instance once two of its spans arrived, whatever arrives interleaved with them; a late span of the old
process must not touch the new run; one forged span with a new instance id must change nothing the loop
shows (two do take it over: the documented limit, as for episodes); spans without an instance id behave
as before. The same rule end to end, with real guards in real processes, is in test_restart.py.
"""

from __future__ import annotations

import time
from typing import Any

from conftest import contracting_cycles, healthy_cycles
from test_bad_input import mutation
from test_monitor_inprocess import spans_of

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector
from ctxwatch_monitor.api import summary
from ctxwatch_monitor.engine import Engine
from ctxwatch_monitor.ordering import LoopOrder

OLD, NEW, FORGED = "0b5d0b0e-0000-4000-8000-000000000001", "0b5d0b0e-0000-4000-8000-000000000002", "f0f0"


class Process:
    """One guard process's spans for a loop: its own instance id, numbering from 1, its own detector."""

    def __init__(self, loop_id: str, instance: str | None) -> None:
        self.loop_id, self.instance = loop_id, instance
        self.sequence = 0
        self.detector = ContractionDetector()

    def _span(self, **attrs: Any) -> dict[str, Any]:
        self.sequence += 1
        numbering = {semconv.SEQUENCE: self.sequence, semconv.CONTRACTION_CYCLE: self.detector.cycle,
                     semconv.GUARD_INSTANCE: self.instance}
        return mutation(self.loop_id, **{**numbering, semconv.VIOLATIONS: [], **attrs})

    def cycle(self, d: float, before: int, lost: int) -> dict[str, Any]:
        verdict = self.detector.update(d, before, lost)
        return self._span(**{semconv.HASH_DISTANCE: d, semconv.LITERALS_BEFORE: before, semconv.LITERALS_LOST: lost,
                             semconv.CONTRACTION_STATE: verdict.state})

    def append(self) -> dict[str, Any]:
        return self._span(**{semconv.MUTATION_KIND: "append", semconv.HASH_DISTANCE: None, semconv.LITERALS_LOST: 0,
                             semconv.CONTRACTION_STATE: self.detector.state})

    def refusal(self) -> dict[str, Any]:
        return self._span(**{semconv.DECISION: "abort", semconv.HASH_DISTANCE: None, semconv.LITERALS_LOST: 0,
                             semconv.VIOLATIONS: ["tool_pairing"], semconv.ORPHANS_TOOL_RESULT: 1,
                             semconv.CONTRACTION_STATE: self.detector.state})


def _contract(process: Process) -> list[dict[str, Any]]:
    spans = []
    for cycle in contracting_cycles():
        spans.append(process.cycle(*cycle))
        if process.detector.state == "contracting":
            return spans
    raise AssertionError("the contracting cycles no longer enter the regime")


def _view(engine: Engine, loop_id: str) -> dict[str, Any]:
    loop = engine.store.get(loop_id)
    assert loop is not None
    return summary(loop)


def _late(engine: Engine) -> float:
    return float(engine.instruments.late_spans.values.get(("late",), 0))


def test_a_restarted_process_starts_a_new_run_that_late_spans_of_the_old_one_cannot_touch(engine: Engine) -> None:
    old = Process("support-loop-17", OLD)
    old_spans = [old.append() for _ in range(30)] + _contract(old)
    engine.apply(spans_of(*old_spans[:-2]))
    in_flight = old_spans[-2:]  # the old process's last batch, delivered after the restart's first spans
    new = Process("support-loop-17", NEW)
    first, second = new.append(), new.refusal()
    engine.apply(spans_of(first))
    view = _view(engine, "support-loop-17")
    assert view["instance"] == OLD and view["candidate_instance"] == NEW and view["sequence"] == len(old_spans) - 2
    # interleaved: the old process's late batch and the new one's second span arrive together
    engine.apply(spans_of(in_flight[0], second, in_flight[1]))
    view = _view(engine, "support-loop-17")
    assert (view["instance"], view["candidate_instance"], view["sequence"]) == (NEW, None, 2)
    assert view["status"] == "refusing" and view["last_refusal"]["invariants"] == ["tool_pairing"]
    assert view["state"] == "healthy" and view["cycles"] == 0  # the new run's detector, not the old one's
    late = _late(engine)
    engine.apply(spans_of(*old_spans[:3], old.cycle(0.01, 2, 2)))  # duplicates, and a straggler numbered ahead
    assert _late(engine) == late + 4
    assert _view(engine, "support-loop-17") == view | {"last_seen": _view(engine, "support-loop-17")["last_seen"]}

    engine.apply(spans_of(*_contract(new)))  # the restarted process contracts: its own run alarms
    view = _view(engine, "support-loop-17")
    assert view["state"] == "contracting" and view["source"] == "monitor" and view["cycles"] == new.detector.cycle
    assert "support-loop-17" in engine.store.alarms


def test_the_new_instances_spans_out_of_order_are_applied_in_its_own_sequence(engine: Engine) -> None:
    old, new = Process("reordered", OLD), Process("reordered", NEW)
    engine.apply(spans_of(*[old.cycle(*c) for c in healthy_cycles(12)]))
    fresh = [new.cycle(*c) for c in healthy_cycles(4)]
    engine.apply(spans_of(fresh[2], fresh[0]))  # two spans of the new instance: it takes the loop over
    view = _view(engine, "reordered")
    assert (view["instance"], view["sequence"], view["held"], view["cycles"]) == (NEW, 1, 1, 1)
    engine.apply(spans_of(fresh[3], fresh[1]))
    view = _view(engine, "reordered")
    assert (view["sequence"], view["held"], view["cycles"], view["source"]) == (4, 0, 4, "monitor")


def test_one_forged_span_with_a_new_instance_changes_nothing_the_loop_shows(engine: Engine) -> None:
    genuine = Process("victim", OLD)
    engine.apply(spans_of(*_contract(genuine)))
    before = _view(engine, "victim")
    assert before["state"] == "contracting" and before["instance"] == OLD
    forged = Process("victim", FORGED)
    engine.apply(spans_of(forged.cycle(0.9, 30, 0) | {semconv.CONTRACTION_STATE: "healthy"}))
    after = _view(engine, "victim")
    assert after["candidate_instance"] == FORGED
    assert {k: after[k] for k in ("state", "status", "cycles", "flagged_cycle", "instance", "sequence")} == \
        {k: before[k] for k in ("state", "status", "cycles", "flagged_cycle", "instance", "sequence")}
    late = _late(engine)
    engine.apply(spans_of(genuine.refusal(), genuine.append()))  # the genuine guard goes on: applied, none late
    view = _view(engine, "victim")
    assert view["sequence"] == before["sequence"] + 2 and _late(engine) == late and view["state"] == "contracting"
    # the limit (docs/monitor.md, "Restarts"): a second forged span of that instance takes the loop over
    engine.apply(spans_of(forged.append()))
    assert _view(engine, "victim")["instance"] == FORGED


def test_spans_without_an_instance_are_one_instance_and_an_upgraded_guard_restarting_takes_over(
        engine: Engine) -> None:
    unversioned = Process("upgraded", None)
    engine.apply(spans_of(*[unversioned.cycle(*c) for c in healthy_cycles(5)]))
    engine.apply(spans_of(*[mutation("upgraded", **{semconv.SEQUENCE: s, semconv.VIOLATIONS: []}) for s in (2, 3)]))
    view = _view(engine, "upgraded")
    assert (view["instance"], view["sequence"], view["cycles"]) == (None, 5, 5)  # duplicates, as before
    upgraded = Process("upgraded", NEW)
    engine.apply(spans_of(upgraded.append(), upgraded.append()))
    view = _view(engine, "upgraded")
    assert (view["instance"], view["sequence"], view["cycles"]) == (NEW, 2, 0)
    engine.apply(spans_of(unversioned.append()))  # the old guard's straggler: late
    assert _view(engine, "upgraded")["sequence"] == 2


def test_the_instances_a_loop_follows_and_left_survive_the_state_file(engine: Engine) -> None:
    old, new = Process("persisted", OLD), Process("persisted", NEW)
    engine.apply(spans_of(old.append(), old.append()))
    loop = engine.store.get("persisted")
    assert loop is not None
    plain = LoopOrder.from_json(loop.order.to_json())  # the common case's short form
    assert (plain.instance, plain.next, plain.left) == (OLD, 3, ())
    engine.apply(spans_of(new.append(), new.append(), Process("persisted", FORGED).append()))
    restored = LoopOrder.from_json(loop.order.to_json())
    assert (restored.instance, restored.left, restored.next) == (NEW, (OLD,), 3)
    assert (restored.candidate_instance, sorted(restored.candidates)) == (FORGED, [1])
    assert LoopOrder.from_json('{"next":4,"seen":1.0,"previous":null,"source":"monitor"}').instance is None


def test_a_lone_first_span_of_a_new_instance_is_a_restart_once_it_waited_and_a_second_span_confirms_it(
        engine: Engine) -> None:
    old, new = Process("lone", OLD), Process("lone", NEW)
    engine.apply(spans_of(*_contract(old)))
    engine.apply(spans_of(new.refusal()))
    loop = engine.store.get("lone")
    assert loop is not None and "lone" in engine.waiting
    assert not engine.sequencer.expire(loop, time.time())  # it has not waited yet
    assert engine.sequencer.expire(loop, time.time() + engine.config.order_wait)
    view = _view(engine, "lone")
    assert (view["instance"], view["unconfirmed_from"], view["status"], view["state"]) == (NEW, OLD, "refusing",
                                                                                            "healthy")
    restored = LoopOrder.from_json(loop.order.to_json())  # the unconfirmed restart survives the state file
    assert restored.unconfirmed is not None and restored.unconfirmed[:2] == (OLD, old.sequence + 1)
    engine.apply(spans_of(new.append()))  # the new instance's second span: confirmed, the old one is left for good
    assert _view(engine, "lone")["unconfirmed_from"] is None and loop.order.left == (OLD,)
    late = _late(engine)
    engine.apply(spans_of(old.append()))
    assert _late(engine) == late + 1 and _view(engine, "lone")["instance"] == NEW


def test_a_lone_span_numbered_past_one_or_racing_the_loops_own_is_never_taken_for_a_restart(engine: Engine) -> None:
    old = Process("busy", OLD)
    engine.apply(spans_of(old.append()))
    ahead = Process("busy", NEW)
    ahead.sequence = 4
    engine.apply(spans_of(ahead.append()))
    loop = engine.store.get("busy")
    assert loop is not None and loop.order.lone is None and "busy" not in engine.waiting
    racing = Process("busy", FORGED)
    engine.apply(spans_of(racing.append()))
    engine.apply(spans_of(old.append()))  # a span of the loop's own guard came after it
    assert not engine.sequencer.expire(loop, time.time() + 10 * engine.config.order_wait)
    assert _view(engine, "busy")["instance"] == OLD


def test_a_span_of_a_third_instance_makes_no_restart_lose_the_spans_it_sent(engine: Engine) -> None:
    """Found by test_arrival_order.py: a candidate run was replaced by the next span of another run, so one forged
    span between a restart's first two spans made the restart lose its first (and wait for a third)."""
    old, new, forged = Process("third", OLD), Process("third", NEW), Process("third", FORGED)
    engine.apply(spans_of(*[old.cycle(*c) for c in healthy_cycles(4)]))
    fresh = [new.cycle(*c) for c in healthy_cycles(3)]
    forged.sequence = 6
    engine.apply(spans_of(fresh[0]))
    engine.apply(spans_of(forged.append()))
    engine.apply(spans_of(fresh[1]))  # the restart's second span: it takes the loop over, its first span too
    view = _view(engine, "third")
    assert (view["instance"], view["sequence"], view["held"], view["source"]) == (NEW, 2, 0, "monitor")
    assert view["candidate_instance"] == FORGED  # still held aside, alone: it changes nothing the loop shows
    restored = LoopOrder.from_json(engine.store.get("third").order.to_json())  # type: ignore[union-attr]
    assert restored.shown == (0, FORGED)


def test_a_late_duplicate_of_the_old_guards_span_does_not_hold_a_lone_restart_back(engine: Engine) -> None:
    """Found by test_arrival_order.py: a duplicate (an exporter's retry, or a forgery) of a span the loop had
    applied counted as a sign of the old guard's life, so a restart's lone span was never taken."""
    old, new = Process("retried", OLD), Process("retried", NEW)
    sent = [old.cycle(*c) for c in healthy_cycles(3)]
    engine.apply(spans_of(*sent))
    engine.apply(spans_of(new.refusal()))
    late = _late(engine)
    engine.apply(spans_of(sent[-1]))  # the old guard's last export, sent again
    assert _late(engine) == late + 1
    loop = engine.store.get("retried")
    assert loop is not None and engine.sequencer.expire(loop, time.time() + engine.config.order_wait)
    assert (_view(engine, "retried")["instance"], _view(engine, "retried")["status"]) == (NEW, "refusing")
