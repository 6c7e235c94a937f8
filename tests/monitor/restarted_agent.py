"""One run of an agent process for test_restart.py, as a user runs it: the OpenTelemetry SDK with its
OTLP/HTTP exporter installed as the global tracer provider, the README's `ContextGuard` with a stable loop
id and its default telemetry, some work, and exit (the next run of this script is the restart).

usage: python restarted_agent.py MONITOR_URL LOOP_ID {chat,refuse,single,contract}
Prints one JSON line: the decision of the run's last checked mutation (null for chat) and the guard's
detector state and cycles.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))

from absorbing import run_absorbing_loop  # noqa: E402 - tests/support is on the path now

from ctxwatch import ContextGuard, Report  # noqa: E402
from ctxwatch.contraction import DetectorConfig  # noqa: E402

from conversations import assistant, call, result, system, user  # noqa: E402


def chat(guard: ContextGuard, turns: int) -> None:
    """`turns` user/assistant turns, each observed before the model call (one append span each)."""
    history = [*guard.messages] or [system()]
    for turn in range(turns):
        history += [user(f"question {turn}"), assistant(f"answer {turn}")]
        guard.observe(history, boundary=len(history))


def refuse(guard: ContextGuard) -> Report:
    """A few turns, a tool round, then a prune that drops the call and keeps its result: aborted."""
    chat(guard, 3)
    history = [*guard.messages, assistant("", call("c9", "lookup", key=9)), result("c9", "found")]
    guard.observe(history, boundary=len(history))
    return guard.check(history[:-2] + history[-1:], kind="prune")


def single(guard: ContextGuard) -> Report:
    """The process's one mutation, then nothing: a prune of a resumed history that drops a tool call and keeps
    its result (aborted), before any turn was observed."""
    history = [system(), user("question"), assistant("", call("c9", "lookup", key=9)), result("c9", "found"),
               user("next question"), assistant("next answer")]
    return guard.check(history[:2] + history[3:], kind="prune")


def main(url: str, loop_id: str, phase: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "restarts"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url + "/v1/traces", timeout=30)))
    trace.set_tracer_provider(provider)
    guard = ContextGuard(loop_id, agent="support-bot", pass_cap=None, enforce={"directive_colocation": "warn"},
                         detector=DetectorConfig(min_literals=1, enter_cycles=2))
    report: Report | None = None
    if phase == "chat":
        chat(guard, 40)
    elif phase == "refuse":
        report = refuse(guard)
    elif phase == "single":
        report = single(guard)
    else:
        halted = run_absorbing_loop(guard, 7, lambda r: r.decision == "halt")
        assert halted is not None, "the absorbing loop never halted: the scenario no longer contracts"
        report = halted
    provider.shutdown()  # exports what is left; the monitor has committed it once this returns
    print(json.dumps({"decision": report.decision if report else None,
                      "violations": report.violations if report else [],
                      "state": guard.detector.state, "cycles": guard.detector.cycle}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
