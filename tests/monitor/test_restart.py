"""An agent process restarted with the same loop id is followed by the monitor at once (review D2).

Three runs of a real agent process (`restarted_agent.py`: the README's `ContextGuard("support-loop-17")`
with its default telemetry, the OpenTelemetry SDK's OTLP/HTTP exporter installed globally) report one
loop to the real monitor, one after the other, as a supervisor restarting the agent would. The first
runs 40 turns; the second (a restart: its numbering starts at 1 again, far behind the loop's) has a
rewrite aborted for tool pairing, which the monitor must show at once (status `refusing`, its
`last_refusal`), not ignore as late until the new process has sent more spans than the old one; the
third contracts, and the alarm fires on the new run's own detector. No span of the restarts is late.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conftest import MonitorProcess, Sender, metric_value

from ctxwatch import semconv

AGENT = Path(__file__).with_name("restarted_agent.py")
LOOP = "support-loop-17"


def run_agent(monitor: MonitorProcess, phase: str) -> dict[str, Any]:
    """One run of the agent process; what it printed of its guard."""
    done = subprocess.run([sys.executable, str(AGENT), monitor.url, LOOP, phase], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy(), check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_restarted_agent_process_is_followed_at_once_and_its_refusal_and_contraction_alarm(
        monitor: MonitorProcess) -> None:
    run_agent(monitor, "chat")
    first = monitor.get(f"/api/loops/{LOOP}").json()
    assert first["sequence"] == 40 and first["status"] == "healthy" and first["last_refusal"] is None
    assert first["instance"] is not None

    refused = run_agent(monitor, "refuse")
    assert refused["decision"] == "abort" and "tool_pairing" in refused["violations"]
    second = monitor.get(f"/api/loops/{LOOP}").json()
    assert second["instance"] not in (None, first["instance"]) and second["candidate_instance"] is None
    assert second["sequence"] == 5 and second["episode"] == 0  # 3 turns, the tool round, the refusal
    assert second["status"] == "refusing"
    assert second["last_refusal"]["decision"] == "abort" and "tool_pairing" in second["last_refusal"]["invariants"]
    assert second["last_refusal"]["sequence"] == 5

    contracted = run_agent(monitor, "contract")
    assert contracted["decision"] == "halt" and contracted["state"] == "contracting"
    third = monitor.get(f"/api/loops/{LOOP}").json()
    assert third["instance"] not in (first["instance"], second["instance"])
    assert (third["state"], third["source"], third["cycles"]) == ("contracting", "monitor", contracted["cycles"])
    assert third["status"] == "halted"
    assert LOOP in {alarm["loop_id"] for alarm in monitor.get("/api/alarms").json()["alarms"]}
    assert metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total") == 0


def wait_for(monitor: MonitorProcess, path: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """GET `path` until `done` holds for its JSON (a generous bound: the machine may be loaded)."""
    deadline = time.monotonic() + 120
    while True:
        view = monitor.get(path).json()
        if done(view):
            return view
        assert time.monotonic() < deadline, f"{path} never got there: {view}"
        time.sleep(0.2)


def test_a_restart_that_sends_one_span_and_goes_quiet_is_shown_once_it_has_waited(tmp_path: Path) -> None:
    """The restarted process's one mutation (a refused prune: sequence 1 of its numbering) is the loop's new
    run once it has waited order_wait with no span of the old process meanwhile; not a candidate forever."""
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--order-wait", "1").start()
    try:
        run_agent(monitor, "chat")
        first = monitor.get(f"/api/loops/{LOOP}").json()
        refused = run_agent(monitor, "single")
        assert refused["decision"] == "abort" and "tool_pairing" in refused["violations"]
        view = wait_for(monitor, f"/api/loops/{LOOP}", lambda v: v["instance"] != first["instance"])
        assert view["candidate_instance"] is None and view["unconfirmed_from"] == first["instance"]
        assert (view["sequence"], view["status"], view["source"]) == (1, "refusing", "monitor")
        assert view["last_refusal"]["sequence"] == 1 and "tool_pairing" in view["last_refusal"]["invariants"]
        assert LOOP in {alarm["loop_id"] for alarm in monitor.get("/api/alarms").json()["alarms"]}
        assert metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total") == 0
    finally:
        monitor.close(grace_s=30.0)


class Guard:
    """A guard process's numbered spans for one loop, sent through the SDK's exporter (`Sender`)."""

    def __init__(self, sender: Sender, loop_id: str, instance: str) -> None:
        self.sender, self.loop_id, self.instance, self.sequence = sender, loop_id, instance, 0

    def send(self, sequence: int | None = None, **attrs: Any) -> None:
        if sequence is None:
            self.sequence = sequence = self.sequence + 1
        self.sender.mutation(self.loop_id, "append", **{semconv.SEQUENCE: sequence, semconv.GUARD_INSTANCE:
                                                        self.instance, semconv.CONTRACTION_CYCLE: 0, **attrs})


def test_a_lone_span_that_was_no_restart_holds_a_quiet_loop_only_until_its_guard_goes_on(tmp_path: Path) -> None:
    """Three strays of other guard instances: one numbered past 1 (never taken for a restart), one numbered
    1 (taken, once it waited, on the quiet loop), then the loop's own guard goes on: the loop is its again
    (following its reported state), the stray held aside; the guard's duplicates stay late."""
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--order-wait", "1").start()
    sender = Sender(monitor.url)
    try:
        genuine = Guard(sender, "quiet-loop", "genuine")
        for _ in range(6):
            genuine.send()
        Guard(sender, "other-loop", "other").send()
        sender.flush()  # the strays come later (a span in the same request as the loop's own is no restart)
        Guard(sender, "other-loop", "stray-ahead").send(7)  # a straggler numbered past 1: waits for a second span
        Guard(sender, "quiet-loop", "stray").send()
        sender.flush()
        view = wait_for(monitor, "/api/loops/quiet-loop", lambda v: v["instance"] == "stray")
        assert (view["unconfirmed_from"], view["sequence"]) == ("genuine", 1)
        assert monitor.get("/api/loops/other-loop").json()["candidate_instance"] == "stray-ahead"  # waited as long
        genuine.send(3)  # behind where it stopped: a late straggler of the genuine guard, no give-back
        sender.flush()
        assert monitor.get("/api/loops/quiet-loop").json()["instance"] == "stray"
        genuine.send(**{semconv.CONTRACTION_STATE: "healthy"})
        sender.flush()
        view = monitor.get("/api/loops/quiet-loop").json()
        assert (view["instance"], view["sequence"], view["candidate_instance"]) == ("genuine", 7, "stray")
        assert view["unconfirmed_from"] is None and view["source"] == "guard" and "stray" in view["source_reason"]
        assert metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_late_spans_total") == 1
    finally:
        sender.close()
        monitor.close(grace_s=30.0)
