"""One forged span posing as an episode's start changes nothing a viewer of the loop sees (review 2, session 8).

A guard starts an episode at every session boundary, and the monitor takes the next episode's first span at
once, even alone, so a forged span numbered so (sequence 1, the episode after the loop's, its guard's instance
and detector run: computable for a `watch`- or `replay --otlp`-fed loop, see docs/monitor.md "Jumps") is
applied. Its cycle count alone does not make the loop follow the state it reports (one count differing after
an episode's end waits for the next span's), and a lone span numbered episodes ahead is not taken alone (it
would make every genuine span of the episodes it skipped late). A real monitor on 127.0.0.1, the OpenTelemetry
SDK's OTLP/HTTP exporter, one per sender, and a real `ContractionDetector` for the genuine guard's counts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MonitorProcess, Sender, running_monitor
from test_run_arrival import view_when

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    yield from running_monitor(tmp_path, "--order-wait", "0.25", "--grpc-port", "off")


LOOP, INSTANCE = "episode-start-victim", "guard-instance-a"
HEALTHY = [(0.40 + 0.02 * i, 30, 0) for i in range(5)]
CONTRACTING = [(0.60, 40, 0), (0.55, 40, 1), (0.50, 39, 2), (0.30, 37, 14), (0.20, 23, 12), (0.10, 11, 7),
               (0.05, 4, 3)]


class Guard:
    """The genuine guard: numbered compaction spans of one instance and detector run, counted by a real detector."""

    def __init__(self, monitor: MonitorProcess) -> None:
        self.sender, self.detector = Sender(monitor.url, service="genuine"), ContractionDetector()

    def task(self, episode: int, cycles: list[tuple[float, int, int]]) -> None:
        for sequence, (d, before, lost) in enumerate(cycles, 1):
            verdict = self.detector.update(d, before, lost)
            self.sender.mutation(LOOP, d=d, before=before, lost=lost, **{
                semconv.SEQUENCE: sequence, semconv.EPISODE: episode, semconv.GUARD_INSTANCE: INSTANCE,
                semconv.CONTRACTION_RUN: 0, semconv.CONTRACTION_CYCLE: verdict.cycle,
                semconv.CONTRACTION_STATE: verdict.state})
        self.sender.flush()


def started(monitor: MonitorProcess, cycles: list[tuple[float, int, int]]) -> Guard:
    """The genuine guard, its episode 0 of `cycles` applied by the monitor."""
    guard = Guard(monitor)
    guard.task(0, cycles)
    view_when(monitor, LOOP, lambda v: v["sequence"] == len(cycles))
    return guard


def forge(monitor: MonitorProcess, episode: int, cycle: int, state: str) -> None:
    forger = Sender(monitor.url, service="forger")
    forger.mutation(LOOP, d=0.45, before=30, lost=0, **{
        semconv.SEQUENCE: 1, semconv.EPISODE: episode, semconv.GUARD_INSTANCE: INSTANCE, semconv.CONTRACTION_RUN: 0,
        semconv.CONTRACTION_CYCLE: cycle, semconv.CONTRACTION_STATE: state})
    forger.close()
    time.sleep(1.5)  # six times order_wait: whatever waits for time has waited


def test_a_forged_next_episode_start_does_not_turn_a_healthy_loop_contracting(monitor: MonitorProcess) -> None:
    guard = started(monitor, HEALTHY)
    forge(monitor, 1, 1000, "contracting")
    view = view_when(monitor, LOOP, lambda v: True)
    assert (view["source"], view["state"], view["flagged_cycle"]) == ("monitor", "healthy", None), view
    guard.task(2, HEALTHY)  # the guard goes on (its episode 1 stood for by the forged span)
    view = view_when(monitor, LOOP, lambda v: v["episode"] == 2 and v["sequence"] == len(HEALTHY))
    assert (view["source"], view["state"], view["flagged_cycle"]) == ("guard", "healthy", None), view
    assert view["cycles"] == guard.detector.cycle  # the forged span fed a cycle: the loop follows the guard's count
    guard.sender.close()


def test_a_forged_span_episodes_ahead_does_not_mute_the_loop(monitor: MonitorProcess) -> None:
    guard = started(monitor, HEALTHY)
    forge(monitor, 10**9, len(HEALTHY), "healthy")
    guard.task(1, CONTRACTING)
    view = view_when(monitor, LOOP, lambda v: v["episode"] == 1 and v["sequence"] == len(CONTRACTING))
    assert guard.detector.state == "contracting"
    assert (view["state"], view["cycles"]) == (guard.detector.state, guard.detector.cycle), view
    guard.sender.close()


def test_a_forged_next_episode_start_does_not_clear_a_contracting_loop(monitor: MonitorProcess) -> None:
    guard = started(monitor, CONTRACTING)
    forge(monitor, 1, 1, "healthy")
    view = view_when(monitor, LOOP, lambda v: True)
    assert (view["source"], view["state"], view["status"]) == ("monitor", "contracting", "contracting"), view
    guard.sender.close()
