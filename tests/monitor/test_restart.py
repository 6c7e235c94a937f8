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
from pathlib import Path
from typing import Any

from conftest import MonitorProcess, metric_value

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
