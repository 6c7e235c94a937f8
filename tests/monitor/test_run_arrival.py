"""Which run a loop follows does not depend on which run's span arrives first (docs/monitor.md, "Order").

Three cases the arrival-order test (test_arrival_order.py) could not cover before:
- episodes of one guard instance are ordered: a later episode's first span arriving before the earlier
  episode's spans (a brand-new loop, its first span of episode 1) does not make the earlier episode's spans
  late, and a span of an earlier episode of the instance arriving once the loop follows a later one is late
  whatever the time between (it cannot take the loop back);
- a restart's lone first span in one request with the old guard's last span, before or after it (a collector's
  batch), is taken for a restart once it has waited, as one in a request of its own;
- a forged span held aside (numbered far ahead, of another instance, of another episode) is counted nowhere the
  genuine sender's spans are: not in the fleet metrics (nor under its own names), not as a sign of the loop's
  life.

A real monitor on 127.0.0.1, the spans exported by the OpenTelemetry SDK's OTLP/HTTP exporter; every wait is on
a condition, bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess, Sender, contracting_cycles, healthy_cycles, metric_value, samples

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector

INSTANCE, RESTARTED = "guard-instance-a", "guard-instance-b"
TRANSPORT = ("ctxwatch_monitor_requests", "ctxwatch_monitor_request_duration_seconds",
             "ctxwatch_monitor_db_write_duration_seconds", "ctxwatch_monitor_spans_held",
             "ctxwatch_monitor_inflight_requests", "ctxwatch_monitor_late_spans", "ctxwatch_monitor_spans_accepted")


class Guard:
    """One guard instance's numbering of a loop in one episode, with its own detector (what a guard reports)."""

    def __init__(self, sender: Sender, loop_id: str, instance: str = INSTANCE, episode: int = 0) -> None:
        self.sender, self.loop_id, self.instance, self.episode = sender, loop_id, instance, episode
        self.sequence, self.detector = 0, ContractionDetector()

    def cycle(self, d: float, before: int, lost: int, sequence: int | None = None) -> None:
        """A compaction the detector sees (numbered next, or `sequence`)."""
        verdict = self.detector.update(d, before, lost)
        self.sequence += 1
        self.sender.mutation(self.loop_id, d=d, before=before, lost=lost, **{
            semconv.SEQUENCE: self.sequence if sequence is None else sequence, semconv.EPISODE: self.episode,
            semconv.GUARD_INSTANCE: self.instance, semconv.CONTRACTION_CYCLE: verdict.cycle,
            semconv.CONTRACTION_STATE: verdict.state})


def view_when(monitor: MonitorProcess, loop_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        answer = monitor.get(f"/api/loops/{loop_id}")
        view = answer.json() if answer.status_code == 200 else {}
        if view and done(view):
            return view
        assert time.monotonic() < deadline, view
        time.sleep(0.05)


def timeless(value: Any) -> Any:
    """`value` without the times in it (when spans ended or arrived: no part of what the spans said)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if not (k == "time" or k.endswith(("_time", "_seen")))}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def late(monitor: MonitorProcess) -> float:
    return metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total", reason="late")


def monitor_waiting(tmp_path: Path, order_wait: str) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(tmp_path / f"wait-{order_wait}.sqlite3", "--order-wait", order_wait).start()
    try:
        yield proc
    finally:
        proc.close(grace_s=30.0)


@pytest.fixture
def patient(tmp_path: Path) -> Iterator[MonitorProcess]:
    """A monitor whose spans wait long for what comes before them (nothing here waits for the time to pass)."""
    yield from monitor_waiting(tmp_path, "120")


@pytest.fixture
def hasty(tmp_path: Path) -> Iterator[MonitorProcess]:
    """A monitor whose spans wait half a second for what comes before them."""
    yield from monitor_waiting(tmp_path, "0.5")


def test_a_later_episodes_first_span_arriving_first_makes_no_span_of_the_earlier_episode_late(
        patient: MonitorProcess) -> None:
    sender = Sender(patient.url, service="episodes")
    try:
        for loop_id, together in (("apart", False), ("together", True)):
            first, second = Guard(sender, loop_id), Guard(sender, loop_id, episode=1)
            second.cycle(*healthy_cycles(1)[0])  # the new episode's first span comes first
            if not together:
                sender.flush()
            for cycle in contracting_cycles():  # then the episode before it (the guard halted it), in one request
                first.cycle(*cycle)
            sender.flush()
            for cycle in healthy_cycles(3)[1:]:
                second.cycle(*cycle)
            sender.flush()
            view = view_when(patient, loop_id, lambda v: v["episode"] == 1 and v["sequence"] == 3)
            assert len(view["history"]) == first.sequence + 3, view["history"]  # every span of both, in order
            assert [c["d"] for c in view["history"][:first.sequence]] == [d for d, _, _ in contracting_cycles()]
            assert (view["state"], view["source"], view["cycles"]) == ("healthy", "monitor", 3)
            assert view["candidate_episode"] is None and view["held"] == 0
        assert late(patient) == 0
    finally:
        sender.close()


def test_a_span_of_an_earlier_episode_of_the_instance_is_late_once_the_loop_follows_a_later_one(
        hasty: MonitorProcess) -> None:
    sender = Sender(hasty.url, service="episodes")
    try:
        second = Guard(sender, "later-first", episode=1)
        for cycle in healthy_cycles(2):
            second.cycle(*cycle)
        sender.flush()
        view_when(hasty, "later-first", lambda v: v["episode"] == 1 and v["sequence"] == 2)
        clock = Guard(sender, "clock")  # a span ahead of a gap: once it is applied, order_wait has passed
        clock.cycle(*healthy_cycles(1)[0], sequence=2)
        sender.flush()
        view_when(hasty, "clock", lambda v: v["sequence"] == 2)
        first = Guard(sender, "later-first")
        for cycle in contracting_cycles()[:3]:  # the episode before, long after: it cannot take the loop back
            first.cycle(*cycle)
        sender.flush()
        deadline = time.monotonic() + 60
        while late(hasty) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        view = hasty.get("/api/loops/later-first").json()
        assert (view["episode"], view["sequence"], len(view["history"])) == (1, 2, 2)
        assert view["candidate_episode"] is None
    finally:
        sender.close()


def test_a_loops_first_span_of_a_later_episode_is_applied_once_it_has_waited(hasty: MonitorProcess) -> None:
    sender = Sender(hasty.url, service="episodes")
    try:
        midway = Guard(sender, "monitor-started-midway", episode=2)
        midway.sequence = 6
        for cycle in healthy_cycles(6):  # what the guard saw before the monitor started
            midway.detector.update(*cycle)
        midway.cycle(*healthy_cycles(1)[0])  # the monitor sees the loop from its episode 2, span 7
        sender.flush()
        view = view_when(hasty, "monitor-started-midway", lambda v: v["sequence"] == 7)
        assert (view["episode"], view["held"], view["candidate_episode"], len(view["history"])) == (2, 0, None, 1)
        assert view["source"] == "guard"  # the guard counts a cycle the monitor did not see
    finally:
        sender.close()


@pytest.mark.parametrize("lone_first", [False, True])
def test_a_lone_restart_span_in_one_request_with_the_old_guards_last_span_is_taken(
        hasty: MonitorProcess, lone_first: bool) -> None:
    sender = Sender(hasty.url, service="restarts")
    try:
        old, new = Guard(sender, "batched"), Guard(sender, "batched", instance=RESTARTED)
        for cycle in healthy_cycles(3):
            old.cycle(*cycle)
        sender.flush()
        view_when(hasty, "batched", lambda v: v["sequence"] == 3)
        # a collector's batch: the old process's last span and the restarted one's first, in either order
        if lone_first:
            new.cycle(*healthy_cycles(1)[0])
        old.cycle(*healthy_cycles(4)[3])
        if not lone_first:
            new.cycle(*healthy_cycles(1)[0])
        sender.flush()
        view = view_when(hasty, "batched", lambda v: v["instance"] == RESTARTED)
        assert (view["sequence"], view["unconfirmed_from"], len(view["history"])) == (1, INSTANCE, 5)
    finally:
        sender.close()


def test_forged_spans_held_aside_are_counted_nowhere_the_genuine_ones_are(tmp_path: Path) -> None:
    """The same genuine spans, once alone and once with forged ones held aside beside them: the same fleet
    metrics and loop views, the forged spans only in the transport counters."""
    seen: list[dict[str, Any]] = []
    for forged in (False, True):
        monitor = MonitorProcess(tmp_path / f"forged-{forged}.sqlite3", "--order-wait", "120").start()
        genuine, forger = Sender(monitor.url, service="genuine"), Sender(monitor.url, service="forger")
        try:
            guard = Guard(genuine, "victim")
            for cycle in contracting_cycles()[:4]:
                guard.cycle(*cycle)
            genuine.flush()
            before = view_when(monitor, "victim", lambda v: v["sequence"] == 4)
            if forged:
                for instance, episode, sequence in ((INSTANCE, 0, 10**6), (RESTARTED, 0, 7), (INSTANCE, 5, 1)):
                    Guard(forger, "victim", instance, episode).cycle(0.9, 50, 0, sequence=sequence)
                forger.flush()
                held = view_when(monitor, "victim", lambda v: v["far_ahead"] == 1 and v["candidate_instance"])
                assert held["last_seen"] == before["last_seen"]  # no sign of the loop's life
            for cycle in contracting_cycles()[4:]:
                guard.cycle(*cycle)
            genuine.flush()
            view = view_when(monitor, "victim", lambda v: v["sequence"] == len(contracting_cycles()))
            text = monitor.get("/metrics").text
            assert not [s for s in samples(text) if s.labels.get("service") == "forger"]
            metrics = sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in samples(text)
                             if not s.name.startswith(TRANSPORT))
            held_aside = ("far_ahead", "candidate_episode", "candidate_instance")
            seen.append({"metrics": metrics, "view": timeless({k: v for k, v in view.items() if k not in held_aside})})
        finally:
            genuine.close()
            forger.close()
            monitor.close(grace_s=30.0)
    alone, beside = seen
    assert beside["view"] == alone["view"]
    assert beside["metrics"] == alone["metrics"]
