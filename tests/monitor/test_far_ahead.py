"""Review F4, in process: a span numbered far past a loop's position is not the loop's new position.

A recorded session's guard instance is a UUID v5 of its loop id (`ctxwatch.telemetry.sequence.recorded_instance`),
so anyone who knows the loop id can send a span of that very instance numbered 10^12. Held and applied once
its gap was given up, it would make every genuine span after it late. The engine (in memory, as the monitor
runs it) must hold such a span aside (`far_ahead`) until a second span near it corroborates it, so that
one forged span changes nothing the loop shows; a sparse sampler (spans more than `order_window` apart) and a
reordered burst that fills the gap before it are still applied. The same end to end, with a real
``ctxwatch replay --otlp`` and the SDK's exporter against a real monitor, is in tests/cli/test_rotation.py.
"""

from __future__ import annotations

import time
from typing import Any

from conftest import contracting_cycles, healthy_cycles
from test_monitor_inprocess import spans_of
from test_restart_ordering import Process

from ctxwatch import semconv
from ctxwatch.telemetry.sequence import recorded_instance
from ctxwatch_monitor.api import summary
from ctxwatch_monitor.config import MonitorConfig
from ctxwatch_monitor.engine import Engine
from ctxwatch_monitor.ordering import LoopOrder

LOOP = "claude-code-0cf3db51-1c73-43bb-8d05-dc02739514a5"
SHOWN = ("state", "status", "cycles", "sequence", "held", "source", "instance", "episode")


def _view(engine: Engine, loop_id: str = LOOP) -> dict[str, Any]:
    loop = engine.store.get(loop_id)
    assert loop is not None
    return summary(loop)


def _give_up_gaps(engine: Engine, loop_id: str = LOOP) -> None:
    """What the monitor's sweep does once every held span has waited far longer than `order_wait`."""
    loop = engine.store.get(loop_id)
    assert loop is not None
    later = time.time()
    while loop.order.waiting:  # each gap given up starts the wait for the next one
        later += 3600
        engine.sequencer.expire(loop, later)


def _late(engine: Engine) -> float:
    return float(engine.instruments.late_spans.values.get(("late",), 0))


def _numbered(process: Process, span: dict[str, Any], sequence: int) -> dict[str, Any]:
    """`span` renumbered as `sequence` (a forger's, or the one span in many a sampler kept)."""
    process.sequence = sequence
    return span | {semconv.SEQUENCE: sequence}


def test_one_forged_span_of_the_sessions_own_instance_numbered_far_ahead_changes_nothing(engine: Engine) -> None:
    genuine = Process(LOOP, recorded_instance(LOOP))
    engine.apply(spans_of(*[genuine.cycle(*c) for c in healthy_cycles(6)]))
    before = _view(engine)
    forger = Process(LOOP, recorded_instance(LOOP))  # computable from the loop id alone
    engine.apply(spans_of(_numbered(forger, forger.append(), 10**12)))
    _give_up_gaps(engine)
    after = _view(engine)
    assert after["far_ahead"] == 1 and {k: after[k] for k in SHOWN} == {k: before[k] for k in SHOWN}

    late = _late(engine)
    engine.apply(spans_of(*[genuine.cycle(*c) for c in contracting_cycles()]))  # the session goes on
    view = _view(engine)
    assert _late(engine) == late and view["sequence"] == genuine.sequence and view["source"] == "monitor"
    assert view["state"] == "contracting" and view["cycles"] == genuine.detector.cycle


def test_a_sparse_sampler_far_ahead_is_followed_once_a_second_span_corroborates_it(engine: Engine) -> None:
    sampled = Process("sampled", "0b5d0b0e-0000-4000-8000-00000000000a")
    engine.apply(spans_of(sampled.append()))
    engine.apply(spans_of(_numbered(sampled, sampled.append(), 200)))
    _give_up_gaps(engine, "sampled")
    view = _view(engine, "sampled")
    assert (view["sequence"], view["held"], view["far_ahead"]) == (1, 0, 1)  # one alone: never applied
    engine.apply(spans_of(_numbered(sampled, sampled.append(), 250)))  # within order_window of it
    view = _view(engine, "sampled")
    assert (view["sequence"], view["held"], view["far_ahead"]) == (1, 2, 0)  # held as any span ahead of a gap
    _give_up_gaps(engine, "sampled")
    assert (_view(engine, "sampled")["sequence"], _late(engine)) == (250, 0)


def test_a_far_ahead_span_reached_by_the_spans_before_it_is_applied_in_order(engine: Engine) -> None:
    burst = Process("burst", "0b5d0b0e-0000-4000-8000-00000000000b")
    spans = [burst.cycle(*c) for c in healthy_cycles(100)]
    engine.apply(spans_of(spans[0], spans[-1]))  # the last batch of a flush first: far ahead of the first span
    assert (_view(engine, "burst")["far_ahead"], _view(engine, "burst")["sequence"]) == (1, 1)
    engine.apply(spans_of(*spans[1:-1]))  # the batches before it, in order, with no wait
    view = _view(engine, "burst")
    assert (view["sequence"], view["held"], view["far_ahead"], view["cycles"]) == (100, 0, 0, 100)
    assert view["source"] == "monitor" and _late(engine) == 0


def test_a_forged_far_ahead_span_stays_aside_while_a_genuine_pair_is_followed_and_survives_the_state_file(
        engine: Engine) -> None:
    genuine = Process("pair", "0b5d0b0e-0000-4000-8000-00000000000c")
    forger = Process("pair", genuine.instance)
    engine.apply(spans_of(genuine.append(), _numbered(forger, forger.append(), 10**12)))
    loop = engine.store.get("pair")
    assert loop is not None
    restored = LoopOrder.from_json(loop.order.to_json())
    assert list(restored.far_ahead) == [10**12] and restored.sequenced
    engine.apply(spans_of(_numbered(genuine, genuine.append(), 300), genuine.append()))  # 300, 301: a genuine pair
    _give_up_gaps(engine, "pair")
    view = _view(engine, "pair")
    assert (view["sequence"], view["held"], view["far_ahead"]) == (301, 0, 1)


def test_shuffled_spans_far_apart_are_all_kept_and_a_flood_held_aside_is_bounded(engine: Engine) -> None:
    shuffled = Process("shuffled", "0b5d0b0e-0000-4000-8000-00000000000d")
    spans = [shuffled.cycle(*c) for c in healthy_cycles(300)]
    engine.apply(spans_of(spans[0], spans[149], spans[299]))  # far apart, each alone: none lost
    assert _view(engine, "shuffled")["far_ahead"] == 2
    engine.apply(spans_of(*spans[1:149], *spans[150:299]))
    view = _view(engine, "shuffled")
    assert (view["sequence"], view["held"], view["far_ahead"], view["source"]) == (300, 0, 0, "monitor")
    window = engine.config.order_window
    forger = Process("shuffled", shuffled.instance)
    engine.apply(spans_of(*[_numbered(forger, forger.append(), 10**12 + n * 1000) for n in range(window + 5)]))
    assert _view(engine, "shuffled")["far_ahead"] == window  # the ones numbered furthest went
    assert _view(engine, "shuffled")["sequence"] == 300


class _Loop:
    """A loop as the sequencer sees one: its order, its episode, and what was applied to it."""

    def __init__(self) -> None:
        self.order, self.episode, self.applied = LoopOrder(), 1, []


def _sequencer(window: int = 8) -> Any:
    from ctxwatch_monitor.ordering import Sequencer

    def apply(loop: _Loop, record: Any, now: float) -> None:
        loop.applied.append(record.sequence)

    def new_episode(loop: _Loop, episode: int, now: float) -> None:
        loop.episode = episode

    return Sequencer(window, 5.0, apply, new_episode, lone_waits=MonitorConfig().lone_waits)


def _span(sequence: int, instance: str = "A") -> Any:
    from ctxwatch_monitor.records import MutationRecord

    return MutationRecord({semconv.LOOP_ID: LOOP, semconv.SEQUENCE: sequence, semconv.EPISODE: 1,
                           semconv.GUARD_INSTANCE: instance}, 0)


def test_a_span_held_aside_that_the_run_has_passed_is_late_and_never_moves_the_run_back() -> None:
    """Review of the merge: a span held aside far ahead, then passed by a gap given up beyond it, was taken back
    into the held spans below the run's position, applied after newer ones, and moved the run backwards."""
    sequencer, loop = _sequencer(), _Loop()
    for sequence in (1, 2, 3, 4, 5, 100, 200, 201):
        sequencer.offer(loop, _span(sequence), 0.0)
    sequencer.expire(loop, 10.0)  # the gap before 200 is given up: 200 and 201 are applied, 100 passed
    sequencer.offer(loop, _span(202), 10.0)
    sequencer.expire(loop, 20.0)
    assert loop.applied == [1, 2, 3, 4, 5, 200, 201, 202]
    assert sequencer.offer(loop, _span(150), 20.0) == "late"


def test_one_far_ahead_span_of_the_instance_a_lone_span_replaced_does_not_give_the_loop_back() -> None:
    """Review of the merge: after a restart's lone span took the loop, one span of the instance it left,
    numbered far past where that stopped, gave the loop back to it (a new run) before the far-ahead rule saw it."""
    sequencer, loop = _sequencer(), _Loop()
    for sequence in range(1, 7):
        sequencer.offer(loop, _span(sequence), 0.0)
    sequencer.offer(loop, _span(1, "B"), 1.0)
    sequencer.expire(loop, 10.0)  # B's lone span waited with none of A's: taken for a restart
    assert loop.order.instance == "B" and loop.order.unconfirmed is not None
    assert sequencer.offer(loop, _span(10**6), 11.0) == "late"
    assert loop.order.instance == "B"
    assert sequencer.offer(loop, _span(7), 12.0) != "late"  # A going on where it stopped still gets it back
    assert loop.order.instance == "A"
