"""One span alone ahead of a gap gives up no run of genuine spans (review F2, docs/monitor.md, "Order").

A span held ahead of a gap that no other held span within `order_window` corroborates (the far-ahead rule's
corroboration) waits `LONE_WAITS` times `order_wait` for its gap, not one `order_wait`; once applied alone, a span of
the gap given up for it takes the loop back to where its run stopped (the lone span's own number is then passed
over). So one forged span numbered within the window, of the loop's own instance (a recorded session's is
computable from its loop id), displaces at most the one genuine span with its number, however long the genuine
guard is quiet; a guard that lost spans and goes on is followed after `order_wait`, and its lone last span after a
loss after `LONE_WAITS` times as long, then its late-delivered spans of the gap are applied, not late.

A real monitor on 127.0.0.1 fed by the OpenTelemetry SDK's OTLP/HTTP exporter (`Sender`), every wait on a
condition, bounded; the sequencer's own cases (the state file, a second lone span) in process.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess, Sender, healthy_cycles, metric_value
from test_far_ahead import _Loop, _sequencer, _span
from test_run_arrival import Guard, late, view_when

from ctxwatch_monitor.config import MonitorConfig
from ctxwatch_monitor.ordering import LoopOrder

ORDER_WAIT = 0.25
LONE_WAITS = MonitorConfig().lone_waits  # the default setting
WINDOW = 64  # the default order_window
LOOP = "lone-victim"


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(tmp_path / "state.sqlite3", "--order-wait", str(ORDER_WAIT), "--grpc-port", "off").start()
    try:
        yield proc
    finally:
        proc.close(grace_s=30.0)


def _compactions(monitor: MonitorProcess, service: str) -> float:
    return metric_value(monitor.get("/metrics").text, "ctxwatch_mutations_total", service=service, kind="compact")


def _held_once(monitor: MonitorProcess) -> None:
    deadline = time.monotonic() + 60
    while metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_spans_held_total") < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _send(guard: Guard, cycles: int, skip: int = 0) -> None:
    """`cycles` compactions of `guard`; the first `skip` of them numbered but never sent (an exporter's lost batch)."""
    sender = guard.sender
    for at, cycle in enumerate(healthy_cycles(cycles)):
        if at < skip:
            guard.detector.update(*cycle)
            guard.sequence += 1
            continue
        guard.cycle(*cycle)
    sender.flush()


@pytest.mark.parametrize("quiet", ["shorter than the lone wait", "until the lone span is applied"])
def test_one_forged_span_within_the_window_makes_at_most_the_span_of_its_number_late(
        monitor: MonitorProcess, quiet: str) -> None:
    genuine, forger = Sender(monitor.url, service="genuine"), Sender(monitor.url, service="forger")
    try:
        guard = Guard(genuine, LOOP)
        _send(guard, 10)
        before = view_when(monitor, LOOP, lambda v: v["sequence"] == 10)
        forged = 10 + WINDOW  # not far ahead: held as a span ahead of a gap
        Guard(forger, LOOP).cycle(0.9, 50, 0, sequence=forged)
        forger.flush()
        _held_once(monitor)
        held = view_when(monitor, LOOP, lambda v: True)
        if quiet == "shorter than the lone wait":
            time.sleep(4 * ORDER_WAIT)  # on main the gap 11-73 was given up by now, the forged span the position
        else:  # a patient forger: the genuine guard is quiet until the lone span was applied
            view_when(monitor, LOOP, lambda v: v["sequence"] == forged)
        _send(guard, 2 * WINDOW)  # the session goes on, through the forged span's number
        view = view_when(monitor, LOOP, lambda v: v["sequence"] == 10 + 2 * WINDOW and v["held"] == 0)
        assert late(monitor) == 1  # the genuine span numbered as the forged one; no run of them
        assert _compactions(monitor, "genuine") == 10 + 2 * WINDOW - 1
        assert view["cycles"] == guard.detector.cycle and view["state"] == guard.detector.state
        assert quiet != "shorter than the lone wait" or held["last_seen"] == before["last_seen"]  # held alone:
        # no sign of the loop's life
    finally:
        genuine.close()
        forger.close()


def test_a_guard_that_lost_a_batch_and_goes_on_is_followed_after_one_order_wait(monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, service="lossy")
    try:
        guard = Guard(sender, LOOP)
        _send(guard, 10)
        _send(guard, 20, skip=10)  # 11-20 lost, 21-30 sent: the spans held ahead of the gap corroborate each other
        view = view_when(monitor, LOOP, lambda v: v["sequence"] == 30)
        assert view["source"] == "guard" and f"11-20 of episode 0 missing (not received within {ORDER_WAIT:g} s)" \
            in view["source_reason"]
        assert late(monitor) == 0 and _compactions(monitor, "lossy") == 20
        assert view["cycles"] == guard.detector.cycle
    finally:
        sender.close()


def test_a_lone_last_span_after_a_loss_is_applied_after_the_lone_wait_and_its_gap_still_comes_in(
        monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, service="lossy")
    try:
        guard = Guard(sender, LOOP)
        _send(guard, 10)
        delayed = Guard(sender, LOOP)  # 11-20: a batch that comes long after the span after it
        delayed.detector = copy.deepcopy(guard.detector)
        _send(guard, 11, skip=10)  # 21 alone, then the guard is quiet
        lone_wait = ORDER_WAIT * LONE_WAITS
        view = view_when(monitor, LOOP, lambda v: v["sequence"] == 21)
        assert f"11-20 of episode 0 missing (not received within {lone_wait:g} s)" in (view["source_reason"] or "")
        assert _compactions(monitor, "lossy") == 11
        for sequence, cycle in enumerate(healthy_cycles(10), start=11):  # the batch 11-20 after all
            delayed.cycle(*cycle, sequence=sequence)
        sender.flush()
        view_when(monitor, LOOP, lambda v: v["sequence"] == 21 and "then span 11 came" in v["source_reason"])
        _send(guard, 1)  # and the guard goes on: 22
        view = view_when(monitor, LOOP, lambda v: v["sequence"] == 22)
        assert late(monitor) == 0 and _compactions(monitor, "lossy") == 22
        assert view["source"] == "guard" and view["cycles"] == guard.detector.cycle
    finally:
        sender.close()


def _offered(window: int = 8) -> tuple[Any, _Loop]:
    sequencer, loop = _sequencer(window), _Loop()
    for sequence in range(1, 6):
        sequencer.offer(loop, _span(sequence), 0.0)
    return sequencer, loop


def test_a_lone_span_waits_the_lone_wait_a_second_span_ahead_the_order_wait() -> None:
    sequencer, loop = _offered()
    assert sequencer.offer(loop, _span(12), 1.0) == "aside"  # alone ahead of 6-11: no sign of the loop's life
    assert not sequencer.expire(loop, 1.0 + 2 * sequencer.wait)
    assert sequencer.offer(loop, _span(6), 2.0) == "applied"  # the genuine next span, while the lone one is held
    assert sequencer.offer(loop, _span(10), 3.0) == "held"  # corroborates 12: the gap 7-9 waits order_wait
    assert sequencer.expire(loop, 3.0 + sequencer.wait)
    assert loop.applied == [1, 2, 3, 4, 5, 6, 10] and loop.order.jump is None  # 12 alone again, waiting anew
    assert not sequencer.expire(loop, 3.0 + 2 * sequencer.wait)
    assert sequencer.expire(loop, 3.0 + (LONE_WAITS + 1) * sequencer.wait)
    assert loop.applied[-1] == 12 and loop.order.jump == (11, 12)


def test_a_lone_span_applied_survives_the_state_file_and_its_gap_takes_the_run_back() -> None:
    sequencer, loop = _offered()
    sequencer.offer(loop, _span(12), 1.0)
    sequencer.expire(loop, 1.0 + LONE_WAITS * sequencer.wait)
    assert loop.applied[-1] == 12
    loop.order = LoopOrder.from_json(loop.order.to_json())
    assert loop.order.jump == (6, 12)
    assert sequencer.offer(loop, _span(8), 100.0) == "aside"  # back to 6: 8 is held alone ahead of 6-7
    assert sequencer.offer(loop, _span(14), 100.0) == "held"  # past the lone span: held too
    outcomes = [sequencer.offer(loop, _span(s), 101.0) for s in (6, 7, 9, 10, 11, 12, 13)]
    assert outcomes == ["applied"] * 5 + ["late", "applied"]  # 12: the lone span's number, passed over
    assert loop.order.source == "guard" and "then span 8 came" in (loop.order.reason or "")
    assert loop.applied == [1, 2, 3, 4, 5, 12, 6, 7, 8, 9, 10, 11, 13, 14]
    assert loop.order.jump is None and loop.order.next == 15


def test_a_span_after_the_lone_one_confirms_it_and_the_gap_is_late_from_then_on() -> None:
    sequencer, loop = _offered()
    sequencer.offer(loop, _span(12), 1.0)
    sequencer.expire(loop, 1.0 + LONE_WAITS * sequencer.wait)
    assert sequencer.offer(loop, _span(13), 100.0) == "applied"
    assert loop.order.jump is None and sequencer.offer(loop, _span(7), 100.0) == "late"
    assert loop.order.source == "monitor"
