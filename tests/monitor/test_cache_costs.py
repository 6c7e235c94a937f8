"""What rewrites cost, through the real monitor (issue 16): real guards export over OTLP/HTTP (the SDK's
exporter) to a monitor subprocess, which sums the prompt-cache figures of their spans per loop
(`/api/loops`) and per agent and service (`ctxwatch_cache_*_total`, no loop id label), and keeps the
per-loop sums across a restart. Record 000: the same rewrite applied invalidates, deferred does not."""

from __future__ import annotations

import time
from pathlib import Path

from conftest import MonitorProcess, Sender, metric_value

from ctxwatch import ContextGuard, Message, ProviderCache, Report, TextPart
from ctxwatch.telemetry import MutationTelemetry

from conversations import record_000_session, user

COUNTERS = {"invalidated_chars": "ctxwatch_cache_invalidated_chars_total",
            "invalidated_tokens": "ctxwatch_cache_invalidated_tokens_total",
            "read_tokens": "ctxwatch_cache_read_tokens_total",
            "creation_tokens": "ctxwatch_cache_creation_tokens_total"}


def run_loop(telemetry: MutationTelemetry, loop_id: str, agent: str, turns: int, **options) -> list[Report]:
    """A support loop that compacts its consumed history every turn; the provider reports cache figures
    for every answer. Returns every report the guard made (appends included)."""
    reports: list[Report] = []
    guard = ContextGuard(loop_id, agent=agent, service="costs", telemetry=telemetry, **options)
    messages = record_000_session()
    guard.observe(messages)
    for t in range(turns):
        guard.note_provider_cache(ProviderCache(read_tokens=1000 + t, creation_tokens=10 * t))
        messages = list(guard.messages) + [user(f"Turn {t}: any news on order ORD-2093{t}?")]
        reports.append(guard.check(messages, kind="append"))
        guard.observe(messages)
        summary = Message("user", [TextPart(f"Summary {t}: customer 4411, 17 orders in March.")])
        report, _ = guard.resolve([messages[0], summary, *messages[7:]], kind="compact")
        reports.append(report)
        guard.observe(guard.messages)
    return reports


def totals(reports: list[Report]) -> dict[str, int]:
    return {"invalidated_chars": sum(r.invalidated_chars for r in reports),
            "invalidated_tokens": sum(r.invalidated_tokens for r in reports),
            "read_tokens": sum(r.cache_read_tokens or 0 for r in reports),
            "creation_tokens": sum(r.cache_creation_tokens or 0 for r in reports)}


def wait_for_loops(monitor: MonitorProcess, expected: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    deadline = time.monotonic() + 60
    while True:
        loops = {loop["loop_id"]: loop["cache"] for loop in monitor.get("/api/loops", params={"limit": 100}).json()
                 ["loops"]}
        if all(loops.get(k) == v for k, v in expected.items()) or time.monotonic() > deadline:
            return loops
        time.sleep(0.2)


def test_record_000_cache_costs_are_summed_per_loop_and_agent_and_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state).start()
    try:
        sender = Sender(monitor.url)
        telemetry = MutationTelemetry(sender.provider, environ={})
        applied = run_loop(telemetry, "cost-applied", "compactor", 3, enforce={"prefix_identity": "warn"})
        converted = run_loop(telemetry, "cost-pairs", "compactor", 3)
        deferred = run_loop(telemetry, "cost-deferred", "deferrer", 3, deferral="queue")
        sender.flush()
        sender.close()
        expected = {"cost-applied": totals(applied), "cost-pairs": totals(converted),
                    "cost-deferred": totals(deferred)}
        # the same compaction: applied it invalidates the consumed context, deferred nothing
        assert expected["cost-applied"]["invalidated_tokens"] > 0
        assert expected["cost-deferred"]["invalidated_tokens"] == 0
        assert {r.decision for r in deferred if r.kind == "compact"} == {"defer"}
        assert expected["cost-pairs"]["invalidated_chars"] > 0  # whole pairs: from the first unit it elides
        assert expected["cost-deferred"]["read_tokens"] == 1000 + 1001 + 1002
        assert wait_for_loops(monitor, expected) == expected

        metrics = monitor.get("/metrics").text
        for field, name in COUNTERS.items():
            compactor = expected["cost-applied"][field] + expected["cost-pairs"][field]
            assert metric_value(metrics, name, service="costs", agent="compactor") == compactor, name
            assert metric_value(metrics, name, service="costs", agent="deferrer") == expected["cost-deferred"][field]
            assert all("loop" not in line for line in metrics.splitlines() if line.startswith(name))
        # a series at 0, not no series: the panel has data for an agent whose every rewrite was deferred
        assert f"{COUNTERS['invalidated_tokens']}{{agent=\"deferrer\",service=\"costs\"}} 0.0" in metrics
    finally:
        monitor.stop()
    restarted = MonitorProcess(state).start()
    try:
        assert wait_for_loops(restarted, expected) == expected
        metrics = restarted.get("/metrics").text
        assert metric_value(metrics, COUNTERS["read_tokens"], agent="deferrer") == 3003
    finally:
        restarted.stop()
