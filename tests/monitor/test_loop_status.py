"""Every on-call status transition (docs/monitor.md, "Loop status") through the real monitor.

Spans come from the OpenTelemetry SDK's OTLP/HTTP exporter, as a guard's would; the monitor runs as a
subprocess. The idle test's monitor has a short `idle_after` and `alarm_retention`, so a loop that stops
sending goes idle and ages out of the alarm list within the test, and a loop that resumes comes back with
its status; the other tests' monitor has long ones, so a slow machine never turns their loops idle
between two requests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess, Sender, contracting_cycles, healthy_cycles, metric_value

from ctxwatch import semconv

ERROR_TYPE = semconv.GENAI_V1_41.error_type
IDLE_AFTER, RETENTION = 5.0, 8.0  # the idle test's monitor
STEADY = 3600.0                     # every other test's: no loop goes idle or ages out during a test


@contextmanager
def running(path: Path, idle_after: float, retention: float) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(path, "--idle-after", str(idle_after), "--alarm-retention", str(retention)).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    with running(tmp_path / "state.sqlite3", STEADY, STEADY) as proc:
        yield proc


@pytest.fixture
def idling_monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    with running(tmp_path / "state.sqlite3", IDLE_AFTER, RETENTION) as proc:
        yield proc


@pytest.fixture
def sender(monitor: MonitorProcess) -> Iterator[Sender]:
    s = Sender(monitor.url)
    yield s
    s.close()


def loop(monitor: MonitorProcess, loop_id: str) -> dict[str, Any]:
    response = monitor.get(f"/api/loops/{loop_id}")
    assert response.status_code == 200, response.text
    return response.json()


def alarms(monitor: MonitorProcess, **params: str) -> dict[str, dict[str, Any]]:
    response = monitor.get("/api/alarms", params=params)
    assert response.status_code == 200, response.text
    return {a["loop_id"]: a for a in response.json()["alarms"]}


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def patches(sender: Sender, loop_id: str, n: int, **extra: Any) -> None:
    for d, before, lost in healthy_cycles(n):
        sender.mutation(loop_id, d=d, before=before, lost=lost, **extra)


def refusal(sender: Sender, loop_id: str, invariant: str, decision: str = "abort", **extra: Any) -> None:
    sender.mutation(loop_id, decision=decision, violations=(invariant,), before=30, lost=0,
                    **{ERROR_TYPE: "OrphanedToolPairError", **extra})


def test_healthy_refusing_and_back_to_healthy(monitor: MonitorProcess, sender: Sender) -> None:
    patches(sender, "calm", 4)
    sender.mutation("calm", kind="append")
    refusal(sender, "calm", "tool_pairing", **{semconv.ORPHANS_TOOL_USE: 2, semconv.ORPHANS_TOOL_RESULT: 1})
    patches(sender, "calm", 1)
    sender.flush()
    got = loop(monitor, "calm")
    assert got["status"] == "refusing"
    assert got["last_refusal"]["invariants"] == ["tool_pairing"]
    assert got["last_refusal"]["decision"] == "abort"
    assert got["last_refusal"]["error_type"] == "OrphanedToolPairError"
    assert (got["last_refusal"]["orphans_tool_use"], got["last_refusal"]["orphans_tool_result"]) == (2, 1)
    assert got["counts"]["by_invariant"] == {"tool_pairing": {"abort": 1}}
    assert got["counts"]["orphans_refused"] == 3 and got["counts"]["orphans_left"] == 0
    refused = [row for row in got["history"] if row["decision"] == "abort"]
    assert [row["invariants"] for row in refused] == [["tool_pairing"]]
    assert all(row["invariants"] == [] for row in got["history"] if row["decision"] == "patch")
    assert alarms(monitor)["calm"]["alarm"] == "active"
    patches(sender, "calm", 4)  # refusing_for (5) rewrites applied since the refusal
    sender.flush()
    got = loop(monitor, "calm")
    assert got["status"] == "healthy" and got["last_refusal"]["invariants"] == ["tool_pairing"]
    assert alarms(monitor)["calm"]["alarm"] == "resolved"


def test_contracting_then_halted_by_the_alarm_then_a_new_episode(monitor: MonitorProcess, sender: Sender) -> None:
    for d, before, lost in contracting_cycles()[:-1]:
        sender.mutation("absorbing", d=d, before=before, lost=lost)
    sender.flush()
    got = loop(monitor, "absorbing")
    assert (got["state"], got["status"]) == ("contracting", "contracting")
    d, before, lost = contracting_cycles()[-1]
    sender.mutation("absorbing", decision="halt", d=d, before=before, lost=lost, violations=("contraction",),
                    **{ERROR_TYPE: "ContractionRegimeError"})
    sender.flush()
    got = loop(monitor, "absorbing")
    assert got["status"] == "halted" and got["halted_time"] is not None
    assert got["last_refusal"]["decision"] == "halt" and got["last_refusal"]["invariants"] == ["contraction"]
    assert got["last_refusal"]["error_type"] == "ContractionRegimeError"
    assert got["history"][-1]["invariants"] == ["contraction"]
    assert alarms(monitor, status="halted")["absorbing"]["alarm"] == "active"
    sender.mutation("absorbing", kind="append")  # a new turn does not lift a halt
    sender.flush()
    assert loop(monitor, "absorbing")["status"] == "halted"
    patches(sender, "absorbing", 1, **{semconv.EPISODE: 1})  # the guard's new episode, after the fix
    patches(sender, "absorbing", 5, **{semconv.EPISODE: 1})
    sender.flush()
    got = loop(monitor, "absorbing")
    assert (got["episode"], got["status"], got["halted_time"]) == (1, "healthy", None)


def test_blocked_by_the_pass_cap_and_by_repeated_refusals(monitor: MonitorProcess, sender: Sender) -> None:
    patches(sender, "capped", 2)
    refusal(sender, "capped", "pass_cap", **{semconv.PASS_NUMBER: 8, semconv.PASS_CAP: 8})
    for _ in range(2):
        refusal(sender, "stubborn", "policy_isolation")
    for _ in range(4):  # deferred, not refused: queued for the session boundary
        sender.mutation("deferring", decision="defer", violations=("prefix_identity",))
    sender.flush()
    deferring = loop(monitor, "deferring")
    assert (deferring["status"], deferring["last_refusal"]) == ("healthy", None)
    assert deferring["counts"]["by_invariant"] == {"prefix_identity": {"defer": 4}}
    capped = loop(monitor, "capped")
    assert capped["status"] == "blocked" and "pass cap" in capped["blocked_reason"]
    assert (capped["last_refusal"]["pass_number"], capped["last_refusal"]["pass_cap"]) == (8, 8)
    assert loop(monitor, "stubborn")["status"] == "refusing"  # two refusals: below block_after (3)
    refusal(sender, "stubborn", "policy_isolation")
    sender.flush()
    stubborn = loop(monitor, "stubborn")
    assert stubborn["status"] == "blocked" and stubborn["blocked_reason"] == "3 refusals in a row by policy_isolation"
    assert stubborn["counts"]["by_invariant"] == {"policy_isolation": {"abort": 3}}
    metrics = monitor.get("/metrics").text
    assert metric_value(metrics, "ctxwatch_loops_by_status", status="blocked") == 2
    assert "loop_id" not in metrics and "stubborn" not in metrics
    patches(sender, "stubborn", 1)  # a rewrite went through: no longer blocked
    sender.flush()
    assert loop(monitor, "stubborn")["status"] == "refusing"
    assert alarms(monitor, status="blocked").keys() == {"capped"}


def test_a_loop_that_stops_goes_idle_ages_out_and_resumes(idling_monitor: MonitorProcess) -> None:
    monitor, sender = idling_monitor, Sender(idling_monitor.url)
    try:
        _stops_goes_idle_ages_out_and_resumes(monitor, sender)
    finally:
        sender.close()


def _stops_goes_idle_ages_out_and_resumes(monitor: MonitorProcess, sender: Sender) -> None:
    refusal(sender, "quiet", "contraction", decision="halt")
    patches(sender, "steady", 2)
    sender.flush()
    assert alarms(monitor)["quiet"]["status"] == "halted"
    wait_for(lambda: loop(monitor, "quiet")["status"] == "idle")
    got = loop(monitor, "quiet")
    assert got["before_idle"] == "halted"
    assert alarms(monitor)["quiet"]["alarm"] == "stopped"
    assert "steady" not in alarms(monitor)  # never alarmed
    wait_for(lambda: metric_value(monitor.get("/metrics").text, "ctxwatch_loops_by_status", status="idle") == 2)
    wait_for(lambda: "quiet" not in alarms(monitor))  # after alarm_retention
    assert loop(monitor, "quiet")["status"] == "idle"  # still tracked, off the list
    sender.mutation("quiet", kind="append")  # it sends again
    sender.flush()
    got = loop(monitor, "quiet")
    assert (got["status"], got["before_idle"]) == ("halted", None)
    assert alarms(monitor)["quiet"]["alarm"] == "active"


def test_a_loop_that_recovered_before_going_idle_is_resolved_not_stopped(tmp_path: Path) -> None:
    """Idle after its alarm resolved, a loop is listed `resolved` (someone saw it recover), while one that went
    idle in its alarm is `stopped`; both within a long alarm_retention, so no timing decides it."""
    with running(tmp_path / "state.sqlite3", 3.0, STEADY) as monitor:
        sender = Sender(monitor.url)
        try:
            refusal(sender, "recovered", "tool_pairing")
            patches(sender, "recovered", 5)  # refusing_for applied rewrites: healthy again
            refusal(sender, "gave-up", "tool_pairing")
            sender.flush()
            assert alarms(monitor)["recovered"]["alarm"] == "resolved"
            wait_for(lambda: all(loop(monitor, name)["status"] == "idle" for name in ("recovered", "gave-up")))
            listed = alarms(monitor)
            assert (listed["recovered"]["alarm"], listed["gave-up"]["alarm"]) == ("resolved", "stopped")
        finally:
            sender.close()


def test_the_status_survives_a_restart_and_filters_refuse_unknown_values(tmp_path: Path) -> None:
    proc = MonitorProcess(tmp_path / "state.sqlite3").start()
    try:
        sender = Sender(proc.url)
        refusal(sender, "kept", "plan_reference")
        refusal(sender, "kept", "plan_reference")
        refusal(sender, "kept", "plan_reference")
        sender.flush()
        sender.close()
        before = loop(proc, "kept")
        assert proc.get("/api/loops", params={"status": "asleep"}).status_code == 422  # one of STATUSES only
    finally:
        proc.stop()
    proc = MonitorProcess(tmp_path / "state.sqlite3").start()
    try:
        after = loop(proc, "kept")
        for key in ("status", "blocked_reason", "last_refusal", "counts", "history"):
            assert after[key] == before[key]
        assert proc.get("/api/loops", params={"status": "blocked"}).json()["total"] == 1
        assert alarms(proc)["kept"]["alarm"] == "active"
    finally:
        proc.stop()
