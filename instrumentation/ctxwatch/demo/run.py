"""`ctxwatch demo`: the monitor plus a simulated fleet, a live terminal view and a closing summary.

The fleet's guards export their spans with the real OpenTelemetry SDK and OTLP/HTTP exporter,
either to a monitor the demo starts (default) or to `--otlp URL` (a collector or a monitor
elsewhere). Loops run round-robin, paced over `--duration` seconds; a finished loop is replaced
by a fresh one of the same agent, so the monitor and its dashboards see steady traffic.

At the end the demo asks the monitor which loops it flagged and compares them with what each
family is built to do: absorption loops must be flagged, healthy loops never.

SIGINT (Ctrl-C) or SIGTERM stops the fleet where it is: the demo prints a partial summary of the
cycles run so far, then shuts the span pipeline down, stops the monitor and removes its temp folder
(see `stop_signals`), and exits with 128 + the signal number.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..telemetry import MutationTelemetry
from .fleet import FAMILIES, DemoLoop
from .monitor_process import MonitorClient, MonitorProcess, MonitorUnavailable
from .stop_signals import Interrupted, StopSignals
from .view import FleetView

HEALTHY = {"support-summarizer", "research-ranker"}
CONTRACTING = {"scratchpad-writer"}
# each designed failure and the invariant its guard must refuse it by
REFUSED_BY = {"ops-compactor": "tool_pairing", "ledger-keeper": "policy_isolation", "config-fixer": "plan_reference"}
# designed failures that also converge: the fixer paraphrases its whole history again every cycle, so once its
# literals are gone the paraphrase is the identity on its own output (record 003's fixed point) and the alarm
# halts it; every such halt must be flagged by the monitor too. The other designed failures halt nothing.
CONVERGING_TOO = {"config-fixer"}
ROUND_S = 1.0  # every active loop runs one cycle per round
FLUSH_S = 10.0  # the closing flush of a complete run
SHUTDOWN_S = 2.0  # the flush of an interrupted run, and the span pipeline's shutdown


@dataclass
class DemoOptions:
    duration: float = 60.0
    loops: int = 3
    port: int = 0
    otlp: str | None = None
    seed: int = 7
    summary_json: Path | None = None
    keep: bool = False


@dataclass
class AgentTally:
    """Everything one agent's loops did, summed."""

    description: str
    loops: list[DemoLoop] = field(default_factory=list)

    @property
    def decisions(self) -> Counter:
        return sum((lp.tally.decisions for lp in self.loops), Counter())

    @property
    def violations(self) -> Counter:
        return sum((lp.tally.violations for lp in self.loops), Counter())

    @property
    def cycles(self) -> int:
        return sum(lp.tally.cycles for lp in self.loops)

    @property
    def halted(self) -> list[str]:
        return [lp.loop_id for lp in self.loops if lp.tally.halted_at is not None]


class Fleet:
    """The running loops, per agent, replaced by fresh ones as they finish."""

    def __init__(self, per_agent: int, seed: int, telemetry: MutationTelemetry) -> None:
        self.telemetry = telemetry
        self.seed = seed
        self.agents = {name: AgentTally(desc) for name, (desc, _) in FAMILIES.items()}
        self.active: list[DemoLoop] = []
        for name in FAMILIES:
            for _ in range(per_agent):
                self._spawn(name)

    def _spawn(self, agent: str) -> None:
        tally = self.agents[agent]
        index = len(tally.loops) + 1
        loop = FAMILIES[agent][1](agent, index, self.seed * 1000 + hash_agent(agent) + index, self.telemetry)
        tally.loops.append(loop)
        self.active.append(loop)

    def step_all(self) -> None:
        for loop in list(self.active):
            loop.step()
            if loop.done:
                self.active.remove(loop)
                self._spawn(loop.agent)


def hash_agent(name: str) -> int:
    """A small stable number per agent name (Python's hash() is salted per process)."""
    return sum(ord(c) * (i + 1) for i, c in enumerate(name)) % 997


def verdicts(fleet: Fleet, monitor_loops: list[dict[str, Any]]) -> dict[str, Any]:
    """Per agent: the loops the monitor flagged, and whether that matches the family's design."""
    by_id = {lp["loop_id"]: lp for lp in monitor_loops}
    out: dict[str, Any] = {}
    for agent, tally in fleet.agents.items():
        flagged = sorted(lp.loop_id for lp in tally.loops
                         if by_id.get(lp.loop_id, {}).get("flagged_cycle") is not None
                         or by_id.get(lp.loop_id, {}).get("state") == "contracting")
        finished = [lp.loop_id for lp in tally.loops if lp.tally.halted_at is not None or lp.done]
        if agent in CONTRACTING:
            expected_ok = set(tally.halted) <= set(flagged) and bool(flagged)
        elif agent in HEALTHY:
            expected_ok = not flagged
        else:
            refused = tally.violations.get(REFUSED_BY[agent], 0) > 0
            alarmed_as_designed = (set(tally.halted) <= set(flagged) if agent in CONVERGING_TOO
                                   else not tally.halted and not flagged)
            expected_ok = refused and alarmed_as_designed
        out[agent] = {
            "description": tally.description, "loops": len(tally.loops), "cycles": tally.cycles,
            "decisions": dict(tally.decisions), "violations": dict(tally.violations),
            "halted": tally.halted, "flagged": flagged, "finished": finished,
            "flagged_cycles": {lid: by_id[lid].get("flagged_cycle") for lid in flagged},
            "halted_cycles": {lp.loop_id: lp.tally.halted_at for lp in tally.loops if lp.tally.halted_at},
            "as_designed": expected_ok,
        }
    return out


def run_demo(options: DemoOptions) -> int:
    """Run the demo; the exit code is 0 when every family behaved as designed, 1 otherwise, 2 when the
    monitor cannot start, and 128 + the signal number when SIGINT or SIGTERM stopped it (after a partial
    summary, with the monitor stopped and the temp folder removed)."""
    view = FleetView()
    with StopSignals() as stop, ExitStack() as cleanup:
        try:
            try:
                return _run(options, view, cleanup)
            finally:
                with stop.ignored():
                    cleanup.callback(view.stop)  # first; a failing one (a closed terminal) skips no other
                    cleanup.close()  # then the pipeline's bounded shutdown, the monitor, the temp folder
        except MonitorUnavailable as exc:
            view.note(f"ctxwatch demo: {exc}")
            return 2
        except Interrupted as exc:  # a second signal while the partial summary was being gathered
            return exc.exit_code


def _destination(options: DemoOptions, cleanup: ExitStack) -> tuple[str, MonitorClient | None, bool]:
    """(the OTLP endpoint, a client of the monitor there or None, whether the demo started that monitor).
    A monitor the demo starts keeps its state in a temp folder; both are removed by `cleanup`."""
    if options.otlp is None:
        workdir = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="ctxwatch-demo-"))
        # the demo's guards send OTLP/HTTP; 4317 stays free for the user
        monitor = MonitorProcess(Path(workdir) / "monitor.sqlite", "--grpc-port", "off", port=options.port,
                                 startup_timeout_s=30.0, own_session=True)
        cleanup.callback(monitor.close)
        monitor.start()
        return monitor.url, monitor.client, True
    endpoint = options.otlp.rstrip("/")
    client = MonitorClient(endpoint)
    return endpoint, client if client.ready() else None, False  # a collector has no verdicts to read back


def _run(options: DemoOptions, view: FleetView, cleanup: ExitStack) -> int:
    from ..otlp import build  # the SDK comes with ctxwatch[otlp]

    endpoint, client, own_monitor = _destination(options, cleanup)
    pipeline = build(service_name="ctxwatch-demo", endpoint=endpoint, with_metrics=False, schedule_delay_s=0.5)
    cleanup.callback(pipeline.shutdown, SHUTDOWN_S)
    telemetry = MutationTelemetry(tracer_provider=pipeline.tracer_provider)
    fleet = Fleet(options.loops, options.seed, telemetry)
    started = time.monotonic()
    interrupted: Interrupted | None = None
    try:
        _drive(fleet, options.duration, started, view, client, endpoint)
    except Interrupted as exc:
        interrupted = exc
    pipeline.force_flush(FLUSH_S if interrupted is None else SHUTDOWN_S)
    time.sleep(0.5)
    loops = _safe(client.loops) if client else None
    result = verdicts(fleet, loops or [])
    view.stop()
    if interrupted is not None:
        view.note(f"interrupted by {interrupted.signal_name} after {time.monotonic() - started:.0f}s of "
                  f"{options.duration:.0f}s: partial summary of the cycles run so far")
    view.summary(result, endpoint, monitor_answered=loops is not None)
    if options.summary_json:
        options.summary_json.write_text(json.dumps({
            "monitor": endpoint, "interrupted_by": interrupted and interrupted.signal_name, "agents": result},
            indent=2))
    if interrupted is not None:
        return interrupted.exit_code
    if options.keep and own_monitor:
        view.note(f"the monitor keeps running at {endpoint} (live page: {endpoint}/) — Ctrl-C to stop")
        _wait_for_interrupt()
    if loops is None:
        return 0
    return 0 if all(v["as_designed"] for v in result.values()) else 1


def _drive(fleet: Fleet, duration: float, started: float, view: FleetView, client: MonitorClient | None,
           endpoint: str) -> None:
    """Run the fleet round by round, paced over `duration` seconds, refreshing the view."""
    view.start(endpoint, duration)
    rounds = 0
    while time.monotonic() - started < duration:
        fleet.step_all()
        rounds += 1
        alarms = _safe(client.alarms) if client else None
        view.update(fleet, time.monotonic() - started, alarms)
        wait = min(started + rounds * ROUND_S, started + duration) - time.monotonic()
        if wait > 0:
            time.sleep(wait)


def _safe(call):
    try:
        return call()
    except OSError:
        return None


def _wait_for_interrupt() -> None:
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (`Interrupted`): the monitor is stopped on the way out
        pass
