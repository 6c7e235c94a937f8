"""Eviction past `max_loops` ranks loops by on-call status (docs/monitor.md, "Eviction"; review D7).

A flood of new loop ids (one request of fresh ids, as `ContextGuard()`s without a loop id or one hostile
sender make) must not clear an alarm: refusing, contracting, blocked and halted loops stay tracked and on
the alarm list, in the engine (in process) and through the real monitor (subprocess, OTLP/HTTP). Only when
active alarms alone are more than `max_loops` does one go, the least recently seen; a loop that went idle
in an alarm goes after the calm loops and before the active alarms.
"""

from __future__ import annotations

import time
from typing import Any

from conftest import MonitorProcess, contracting_cycles, metric_value
from test_bad_input import mutation, request
from test_monitor_inprocess import spans_of

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector
from ctxwatch_monitor.config import MEMORY_STATE, MonitorConfig
from ctxwatch_monitor.engine import Engine
from ctxwatch_monitor.instruments import Instruments
from ctxwatch_monitor.loop_state import IDLE

ERROR_TYPE = semconv.GENAI_V1_41.error_type
NO_CYCLE = {semconv.HASH_DISTANCE: None, semconv.LITERALS_LOST: 0}
VICTIMS = {"victim-halted": "halted", "victim-refusing": "refusing", "victim-blocked": "blocked",
           "victim-contracting": "contracting"}


def victim_spans() -> list[dict[str, Any]]:
    """One loop in each alarming status: halted by the guard, refusing (an abort), blocked by the pass cap,
    and contracting (an instruction-absorption loop's cycles, up to the one the detector enters on)."""
    spans = [
        mutation("victim-halted", **NO_CYCLE, **{semconv.DECISION: "halt", semconv.VIOLATIONS: ["contraction"],
                                                  ERROR_TYPE: "ContractionRegimeError"}),
        mutation("victim-refusing", **NO_CYCLE, **{semconv.DECISION: "abort", semconv.VIOLATIONS: ["tool_pairing"],
                                                    semconv.ORPHANS_TOOL_RESULT: 1,
                                                    ERROR_TYPE: "OrphanedToolPairError"}),
        mutation("victim-blocked", **NO_CYCLE, **{semconv.DECISION: "abort", semconv.VIOLATIONS: ["pass_cap"],
                                                   semconv.PASS_NUMBER: 8, semconv.PASS_CAP: 8}),
    ]
    detector = ContractionDetector()
    for d, before, lost in contracting_cycles():
        verdict = detector.update(d, before, lost)
        spans.append(mutation("victim-contracting", **{semconv.HASH_DISTANCE: d, semconv.LITERALS_BEFORE: before,
                                                        semconv.LITERALS_LOST: lost, semconv.VIOLATIONS: []}))
        if verdict.entered:
            return spans
    raise AssertionError("the contracting cycles never entered the contraction regime")


def flood(prefix: str, n: int, **attrs: Any) -> list[dict[str, Any]]:
    """`n` spans of fresh loop ids (appends unless `attrs` say otherwise)."""
    return [mutation(f"{prefix}-{i}", **{semconv.MUTATION_KIND: "append", **NO_CYCLE, semconv.VIOLATIONS: [],
                                         **attrs}) for i in range(n)]


def board(engine: Engine) -> dict[str, tuple[str, str]]:
    """The alarm list as /api/alarms builds it: loop id -> (status, alarm)."""
    return {loop.loop_id: (loop.oncall.status, alarm)
            for alarm, loop in engine.store.on_alarm_board(time.time(), engine.config.alarm_retention)}


def evictions(engine: Engine) -> float:
    text = engine.instruments.metric_set.render(None)[0].decode()
    return metric_value(text, "ctxwatch_monitor_loop_evictions_total", reason="cap")


def small_engine(max_loops: int) -> Engine:
    config = MonitorConfig(state=MEMORY_STATE, max_loops=max_loops)
    engine = Engine(config, Instruments(config.label_cap), None)
    engine.restore()
    return engine


def test_a_flood_of_new_loop_ids_clears_no_alarm_in_process() -> None:
    engine = small_engine(10)
    try:
        for span in victim_spans():
            engine.apply(spans_of(span))
        alarmed = {loop_id: (status, "active") for loop_id, status in VICTIMS.items()}
        assert board(engine) == alarmed
        engine.apply(spans_of(*flood("newcomer", 60)))
        tracked = {loop.loop_id for loop in engine.store}
        assert tracked == VICTIMS.keys() | {f"newcomer-{i}" for i in range(54, 60)}  # the newest calm ones
        assert board(engine) == alarmed and evictions(engine) == 4 + 60 - 10
    finally:
        engine.shutdown()


def test_past_max_loops_of_alarms_the_least_recently_seen_alarm_goes() -> None:
    """Documented limit: the cap bounds memory, so alarms alone past it evict each other, oldest first.
    A calm newcomer is then forgotten at once (it would displace an alarm), an alarming one is kept."""
    engine = small_engine(4)
    try:
        for span in victim_spans():
            engine.apply(spans_of(span))
        assert len(engine.store) == 4 and len(engine.store.alarms) == 4
        engine.apply(spans_of(*flood("calm", 3)))
        assert {loop.loop_id for loop in engine.store} == VICTIMS.keys()
        engine.apply(spans_of(*flood("refusing", 2, **{semconv.MUTATION_KIND: "prune", semconv.DECISION: "abort",
                                                        semconv.VIOLATIONS: ["tool_pairing"]})))
        tracked = {loop.loop_id for loop in engine.store}
        assert tracked == {"victim-blocked", "victim-contracting", "refusing-0", "refusing-1"}
        assert board(engine) == {"victim-blocked": ("blocked", "active"),
                                 "victim-contracting": ("contracting", "active"),
                                 "refusing-0": ("refusing", "active"), "refusing-1": ("refusing", "active")}
        assert evictions(engine) == 3 + 2
    finally:
        engine.shutdown()


def test_a_loop_that_went_idle_in_an_alarm_goes_after_the_calm_ones_before_the_active_ones() -> None:
    engine = small_engine(4)
    try:
        engine.apply(spans_of(*flood("quiet", 1), *victim_spans()[:2]))  # quiet-0, victim-halted, victim-refusing
        store = engine.store
        for loop_id in ("quiet-0", "victim-halted"):  # what mark_idle does once idle_after has passed
            loop = store.get(loop_id)
            assert loop is not None
            store.set_status(loop, IDLE, time.time())
        assert board(engine)["victim-halted"] == (IDLE, "stopped")
        engine.apply(spans_of(*flood("calm", 2)))  # 5 loops: the idle calm loop goes, not the newer calm ones
        assert {loop.loop_id for loop in store} == {"victim-halted", "victim-refusing", "calm-0", "calm-1"}
        engine.apply(spans_of(*flood("refusing", 3, **{semconv.MUTATION_KIND: "prune", semconv.DECISION: "abort",
                                                        semconv.VIOLATIONS: ["tool_pairing"]})))
        # 7 loops: the calm ones go, then the stopped alarm, before any active one
        assert {loop.loop_id for loop in store} == {"victim-refusing", "refusing-0", "refusing-1", "refusing-2"}
    finally:
        engine.shutdown()


def test_a_flood_of_new_loop_ids_clears_no_alarm_through_the_monitor(tmp_path: Any) -> None:
    """review/repro_7.py: halted, refusing and blocked loops, then one request of 60 fresh loop ids."""
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--max-loops", "50").start()
    protobuf = {"Content-Type": "application/x-protobuf"}
    try:
        for span in victim_spans():
            assert monitor.post("/v1/traces", content=request(span), headers=protobuf).status_code == 200
        alarmed = {loop_id: (status, "active") for loop_id, status in VICTIMS.items()}

        def alarms() -> dict[str, tuple[str, str]]:
            return {a["loop_id"]: (a["status"], a["alarm"]) for a in monitor.get("/api/alarms").json()["alarms"]}

        assert alarms() == alarmed
        response = monitor.post("/v1/traces", content=request(*flood("newcomer", 60)), headers=protobuf)
        assert response.status_code == 200
        assert alarms() == alarmed
        for loop_id, status in VICTIMS.items():
            view = monitor.get(f"/api/loops/{loop_id}")
            assert view.status_code == 200 and view.json()["status"] == status
        listed = monitor.get("/api/loops", params={"limit": 1000}).json()
        assert listed["total"] == 50
        assert metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_loop_evictions_total",
                            reason="cap") == 4 + 60 - 50
        contracting = monitor.get("/api/loops", params={"state": "contracting"}).json()
        assert [loop["loop_id"] for loop in contracting["loops"]] == ["victim-contracting"]
    finally:
        monitor.stop()
