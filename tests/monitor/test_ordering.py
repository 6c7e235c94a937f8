"""An alarm that does not depend on arrival order, sampling, loss or clocks (issue 15, items 1 and 4).

Real guards (the demo fleet's loops: healthy summarizers and instruction-absorbing scratchpads that
the guard halts, some of them given a new episode and run again) record their spans through the
OpenTelemetry SDK. The spans are then shuffled, a fraction of them dropped, and exported in many
small requests from concurrent threads with the SDK's OTLP/HTTP exporter to the real monitor. Once
the held spans have waited their turn, every loop's state, episode, detector cycle count and alarm
cycle in the monitor equal its guard's; with nothing dropped the monitor's own detector produced
them, with drops the loops that missed a cycle say they follow the guard's state, and why.

Then the attacks of the issue: one forged span with a new episode number and an end time in 2100
neither clears a contracting loop's alarm nor makes its later genuine spans late; a flood of new
loop ids past the cap on tracked loops evicts healthy loops, never the contracting ones.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import AGENT, MonitorProcess, metric_value
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_bad_input import mutation, request

from ctxwatch import semconv
from ctxwatch.demo.fleet import DemoLoop, ScratchpadLoop, SummarizerLoop
from ctxwatch.telemetry import MutationTelemetry

ORDER_WAIT = "0.3"
SENDERS = 8


class Fleet:
    """Healthy and contracting loops through real guards; half the scratchpads get a second episode.
    Their spans go to an in-memory exporter (`take` returns those recorded since the last call)."""

    def __init__(self, seed: int) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "ordering"}))
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        telemetry = MutationTelemetry(provider)
        self.loops: list[DemoLoop] = []
        for i in range(3):
            self.loops.append(SummarizerLoop("support-summarizer", i, seed * 100 + i, telemetry))
            self.loops.append(ScratchpadLoop("scratchpad-writer", i, seed * 100 + 50 + i, telemetry))
        for loop in self.loops:
            while not loop.done:
                loop.step()
            if isinstance(loop, ScratchpadLoop) and loop.tally.halted_at is not None and int(loop.loop_id[-1]) % 2:
                loop.guard.new_episode()       # the policy was "fixed"; it absorbs again and is halted again
                loop.tally.halted_at, loop.tally.cycles = None, 0
                while not loop.done:
                    loop.step()

    def take(self) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        self.exporter.clear()
        return spans


def deliver(url: str, spans: list[ReadableSpan], rng: random.Random) -> None:
    """Export `spans` in random small requests from concurrent senders (the SDK's OTLP/HTTP exporter)."""
    chunks, at = [], 0
    while at < len(spans):
        size = rng.randint(1, 12)
        chunks.append(spans[at:at + size])
        at += size
    exporters = [OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=30) for _ in range(SENDERS)]

    def send(index: int) -> SpanExportResult:
        return exporters[index % SENDERS].export(chunks[index])

    with ThreadPoolExecutor(SENDERS) as pool:
        assert set(pool.map(send, range(len(chunks)))) == {SpanExportResult.SUCCESS}
    for exporter in exporters:
        exporter.shutdown()


def settled(monitor: MonitorProcess, loop_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Every loop's view once no span is held any more (held spans wait ORDER_WAIT for a missing one)."""
    for _ in range(200):
        views = {i: monitor.get(f"/api/loops/{i}").json() for i in loop_ids}
        if all(v["held"] == 0 for v in views.values()):
            return views
        httpx.get(monitor.url + "/healthz", timeout=5)
    raise AssertionError("spans are still held")


@pytest.fixture
def ordered_monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(tmp_path / "state.sqlite3", "--order-wait", ORDER_WAIT).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("drop", [0.0, 0.25])
def test_shuffled_and_dropped_cycles_end_in_the_guards_state(ordered_monitor: MonitorProcess, drop: float) -> None:
    rng = random.Random(15)
    fleet = Fleet(seed=7)
    loops, spans = fleet.loops, fleet.take()
    by_loop: dict[str, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        by_loop[span.attributes[semconv.LOOP_ID]].append(span)
    kept = []
    for loop_spans in by_loop.values():
        *rest, last = loop_spans  # the last span of each loop arrives: it carries the guard's final state
        kept += [s for s in rest if rng.random() >= drop] + [last]
    rng.shuffle(kept)
    deliver(ordered_monitor.url, kept, rng)

    contracting = [loop for loop in loops if loop.guard.detector.state == "contracting"]
    assert len(contracting) >= 2 and any(loop.guard.episode for loop in contracting)
    views = settled(ordered_monitor, [loop.loop_id for loop in loops])
    assert_guards_state(loops, views, drop)
    alarms = {a["loop_id"] for a in ordered_monitor.get("/api/alarms").json()["alarms"]}
    assert alarms == {loop.loop_id for loop in contracting}
    # and it stays so once the loops are quiet: spans of an earlier episode that came meanwhile, held
    # aside as a candidate, do not take over (several gap-expiry ticks later)
    time.sleep(4 * float(ORDER_WAIT))
    assert_guards_state(loops, settled(ordered_monitor, [loop.loop_id for loop in loops]), drop)


def assert_guards_state(loops: list[DemoLoop], views: dict[str, dict[str, Any]], drop: float) -> None:
    for loop in loops:
        view, guard = views[loop.loop_id], loop.guard
        assert view["episode"] == guard.episode, loop.loop_id
        assert view["state"] == guard.detector.state, (loop.loop_id, view)
        assert view["cycles"] == guard.detector.cycle, (loop.loop_id, view)
        assert view["flagged_cycle"] == guard.halted_at, (loop.loop_id, view)
        if drop == 0.0:
            assert view["source"] == "monitor" and view["source_reason"] is None, view
        elif view["source"] == "guard":
            assert "missing" in view["source_reason"]
    if drop:
        assert any(view["source"] == "guard" for view in views.values())


def _span(loop_id: str, sequence: int, cycle: int, **extra: Any) -> dict[str, Any]:
    return mutation(loop_id, **{semconv.SEQUENCE: sequence, semconv.CONTRACTION_CYCLE: cycle, AGENT: "a", **extra})


def test_a_forged_episode_from_2100_clears_no_alarm(ordered_monitor: MonitorProcess) -> None:
    fleet = Fleet(seed=3)
    loops, spans = fleet.loops, fleet.take()
    victim = next(loop for loop in loops if loop.guard.detector.state == "contracting" and not loop.guard.episode)
    mine = [s for s in spans if s.attributes[semconv.LOOP_ID] == victim.loop_id]
    deliver(ordered_monitor.url, mine, random.Random(1))
    before = settled(ordered_monitor, [victim.loop_id])[victim.loop_id]
    assert before["state"] == "contracting" and before["flagged_cycle"] == victim.guard.halted_at

    # of the victim's own guard instance: a span of another one, numbered 1, would be a restart's lone span, taken
    # once the loop has been quiet for order_wait (docs/monitor.md, "Restarts"), which this test is not about
    instance = mine[0].attributes[semconv.GUARD_INSTANCE]
    forged = request(_span(victim.loop_id, 1, 0, **{semconv.EPISODE: victim.guard.episode + 1,
                                                  semconv.CONTRACTION_STATE: "healthy",
                                                  semconv.GUARD_INSTANCE: instance}))
    forged = forged.replace((1_700_000_000_000_000_000).to_bytes(8, "little"),
                            (4_102_444_800_000_000_000).to_bytes(8, "little"))  # its end time: 2100-01-01
    assert ordered_monitor.post("/v1/traces", content=forged,
                                headers={"Content-Type": "application/x-protobuf"}).status_code == 200
    late = metric_value(ordered_monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total")
    # the guard goes on: its halted loop retries its rewrite, and each refusal is a genuine span
    for _ in range(3):
        victim.rewrite()
    deliver(ordered_monitor.url, fleet.take(), random.Random(2))

    after = settled(ordered_monitor, [victim.loop_id])[victim.loop_id]
    assert after["state"] == "contracting" and after["episode"] == victim.guard.episode
    assert after["flagged_cycle"] == before["flagged_cycle"]
    assert after["sequence"] == before["sequence"] + 3  # the genuine spans were applied, none was late
    assert metric_value(ordered_monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total") == late
    assert victim.loop_id in {a["loop_id"] for a in ordered_monitor.get("/api/alarms").json()["alarms"]}


def test_a_flood_of_loop_ids_does_not_evict_contracting_loops(tmp_path: Path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--max-loops", "20").start()
    try:
        fleet = Fleet(seed=5)
        loops, spans = fleet.loops, fleet.take()
        alarmed = {loop.loop_id for loop in loops if loop.guard.detector.state == "contracting"}
        deliver(monitor.url, spans, random.Random(3))
        junk = [request(*[mutation(f"junk-{batch}-{i}") for i in range(25)]) for batch in range(8)]
        for body in junk:
            assert monitor.post("/v1/traces", content=body,
                                headers={"Content-Type": "application/x-protobuf"}).status_code == 200
        tracked = {loop["loop_id"] for loop in monitor.get("/api/loops", params={"limit": 1000}).json()["loops"]}
        assert len(tracked) == 20 and alarmed <= tracked
        assert {a["loop_id"] for a in monitor.get("/api/alarms").json()["alarms"]} == alarmed
    finally:
        monitor.stop()


def test_a_restarted_guard_counting_from_episode_0_is_followed_once_the_old_one_is_quiet(
        ordered_monitor: MonitorProcess) -> None:
    protobuf = {"Content-Type": "application/x-protobuf"}
    old = [_span("restarted", s, s, **{semconv.EPISODE: 2}) for s in (1, 2, 3)]
    assert ordered_monitor.post("/v1/traces", content=request(*old), headers=protobuf).status_code == 200
    fresh = [_span("restarted", s, s) for s in (1, 2)]  # the new process: episode 0 again
    assert ordered_monitor.post("/v1/traces", content=request(*fresh[:1]), headers=protobuf).status_code == 200
    assert ordered_monitor.get("/api/loops/restarted").json()["episode"] == 2  # spans of an episode before?
    view: dict[str, Any] = {}
    for _ in range(100):  # once the old guard has been quiet for order_wait, its successor takes the loop over
        ordered_monitor.post("/v1/traces", content=request(fresh[1]), headers=protobuf)
        view = ordered_monitor.get("/api/loops/restarted").json()
        if view["episode"] == 0:
            break
    assert view["episode"] == 0 and view["sequence"] == 2 and view["source"] == "monitor"
