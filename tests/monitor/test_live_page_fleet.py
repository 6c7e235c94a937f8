"""The demo fleet on the live page, in real headless Chromium (issue 16, "Must show").

The demo's own fleet (`ctxwatch.demo.run.Fleet`: real guards, the real OTLP/HTTP exporter) runs
against a monitor subprocess with short `idle_after` and `alarm_retention`. The page must show each
designed failure in its own status with its last refusal — the scratchpad halted by the contraction
alarm, the orphaning compactor and the policy editor refused and going on, the plan breaker refused
(blocked or halted) — the healthy families healthy; the selected loop on top with its chart's marks
and legend; the deep-link filters; and, once the fleet stops, its alarms marked stopped and then gone.
Screenshots go to the test's tmp dir (printed with `-s`), never into the repository.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess
from devtools import CHROMIUM, DevTools

from ctxwatch.demo.run import REFUSED_BY, Fleet
from ctxwatch.otlp import build
from ctxwatch.telemetry import MutationTelemetry

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
IDLE_AFTER, RETENTION = 25.0, 4.0  # long enough that the fleet stays live while the page is checked under load
ROUNDS = 14
# the designed failures: agent -> (the invariant its guard refuses, the statuses its refused loops may show)
STATUSES = {"ops-compactor": {"refusing"}, "ledger-keeper": {"refusing"},
            "config-fixer": {"refusing", "blocked", "halted"}}
FAILURES = {agent: (invariant, STATUSES[agent]) for agent, invariant in REFUSED_BY.items()}
HEALTHY = ("support-summarizer", "research-ranker")

ALARM_ROWS = """[...document.querySelectorAll('#alarms li[data-loop-id]')].map(li => ({
    loop: li.dataset.loopId, status: li.dataset.status, alarm: li.dataset.alarm,
    refusal: li.querySelector('.refusal').textContent}))"""
LOOP_ROWS = """Object.fromEntries([...document.querySelectorAll('#loops tbody tr')].map(tr =>
    [tr.dataset.loopId, {status: tr.dataset.status, refusal: tr.querySelector('.refusal-cell').textContent}]))"""

CACHE_CELLS = """Object.fromEntries([...document.querySelectorAll('#loops tbody tr')].map(tr => {
    const cell = tr.querySelector('.cache-cell');
    return [tr.dataset.loopId, {invalidated: cell.dataset.invalidated, read: cell.dataset.read,
                                text: cell.textContent}]; }))"""


def _run_fleet(url: str) -> Fleet:
    pipeline = build(service_name="ctxwatch-demo", endpoint=url, with_metrics=False, schedule_delay_s=0.2)
    try:
        fleet = Fleet(1, 7, MutationTelemetry(tracer_provider=pipeline.tracer_provider))
        for _ in range(ROUNDS):
            fleet.step_all()
        assert pipeline.force_flush(30)
    finally:
        pipeline.shutdown(5)
    return fleet


def _loops(monitor: MonitorProcess) -> dict[str, dict[str, Any]]:
    page = monitor.get("/api/loops", params={"limit": 1000}).json()
    return {lp["loop_id"]: lp for lp in page["loops"]}


def _wait(browser: DevTools, expression: str, timeout: float = 30.0) -> Any:
    return browser.wait_for(expression, timeout)


def test_the_demo_fleet_shows_each_failure_in_its_own_state(tmp_path: Path, browser: DevTools) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--idle-after", str(IDLE_AFTER),
                             "--alarm-retention", str(RETENTION)).start()
    try:
        fleet = _run_fleet(monitor.url)
        loops = _loops(monitor)
        by_agent: dict[str, list[dict[str, Any]]] = {}
        for lp in loops.values():
            by_agent.setdefault(lp["agent"], []).append(lp)

        # the API: each family in the status it is built to reach
        halted = fleet.agents["scratchpad-writer"].halted
        assert halted and {loops[i]["status"] for i in halted} == {"halted"}
        assert all(loops[i]["last_refusal"]["invariants"] == ["contraction"] for i in halted)
        for agent in HEALTHY:
            assert {lp["status"] for lp in by_agent[agent]} == {"healthy"}, agent
            assert all(lp["last_refusal"] is None for lp in by_agent[agent])
        refused = {}
        for agent, (invariant, statuses) in FAILURES.items():
            named = [lp for lp in by_agent[agent] if lp["last_refusal"]
                     and invariant in json.dumps(monitor.get(f"/api/loops/{lp['loop_id']}").json()["counts"])]
            assert named, agent
            # a refused loop shows its designed status until `refusing_for` applied rewrites follow the
            # refusal, then healthy again (docs/monitor.md); at least one of the family still shows it
            shown = [lp["status"] for lp in named]
            assert set(shown) <= statuses | {"healthy"} and set(shown) & statuses, (agent, shown)
            refused[agent] = [lp for lp in named if lp["status"] in statuses]

        # the page shows the same: in the loop table, and on the alarm list with the last refusal
        browser.open(f"{monitor.url}/?refresh=500")
        _wait(browser, f"document.querySelectorAll('#loops tbody tr[data-loop-id]').length === {len(loops)}")
        rows = browser.evaluate(LOOP_ROWS)
        assert {i: r["status"] for i, r in rows.items()} == {i: lp["status"] for i, lp in loops.items()}
        alarms = {a["loop"]: a for a in browser.evaluate(ALARM_ROWS)}
        for loop_id in halted:
            assert alarms[loop_id]["status"] == "halted" and "halt by contraction" in alarms[loop_id]["refusal"]
        for named in refused.values():
            for lp in named:
                row = alarms[lp["loop_id"]]
                assert row["status"] == lp["status"] and row["alarm"] == "active"
                assert row["refusal"].startswith("last refusal: " + lp["last_refusal"]["decision"] + " by ")
                assert all(inv in row["refusal"] for inv in lp["last_refusal"]["invariants"]), row
        assert not any(lp["loop_id"] in alarms for agent in HEALTHY for lp in by_agent[agent])
        # what rewrites cost (issue 16): the prompt-cache column shows each loop's sums as the API has them;
        # every loop's simulated provider served its prefix from the cache, and the compactor's whole-pair
        # compactions of the consumed prefix invalidated some of it
        cells = browser.evaluate(CACHE_CELLS)
        assert cells == {i: {"invalidated": str(lp["cache"]["invalidated_tokens"]),
                             "read": str(lp["cache"]["read_tokens"]),
                             "text": f"{lp['cache']['invalidated_tokens']:,} / {lp['cache']['read_tokens']:,}"}
                         for i, lp in loops.items()}
        assert all(lp["cache"]["read_tokens"] > 0 for lp in loops.values())
        assert any(lp["cache"]["invalidated_tokens"] > 0 for lp in by_agent["ops-compactor"])
        browser.screenshot(tmp_path / "fleet-alarms.png")

        # a deep link to a halted loop: on top, its chart marks flag and halt, with the legend
        target = halted[0]
        browser.open(f"{monitor.url}/?refresh=500&loop={target}")
        _wait(browser, f"document.querySelector('#chart').dataset.loopId === '{target}'")
        chart = browser.evaluate("""({first: document.querySelector('main section').id,
            top: document.querySelector('#alarms li').dataset.loopId,
            status: document.querySelector('#chart').dataset.status,
            flag: document.querySelector('#flag-marker')?.dataset.cycle,
            halt: document.querySelector('#halt-marker')?.dataset.cycle,
            legend: document.querySelector('#chart-legend').textContent})""")
        detail = monitor.get(f"/api/loops/{target}").json()
        assert chart["first"] == "loop-section" and chart["top"] == target and chart["status"] == "halted"
        assert int(chart["flag"]) == detail["flagged_cycle"] == fleet_halt(fleet, target)
        assert int(chart["halt"]) == detail["flagged_cycle"]
        assert "d < r" in chart["legend"] and "not an alarm by itself" in chart["legend"]
        browser.screenshot(tmp_path / "halted-loop.png")

        # filters from the URL: one agent, one status
        browser.open(f"{monitor.url}/?refresh=500&agent=ledger-keeper&state=refusing")
        expected = sorted(lp["loop_id"] for lp in by_agent["ledger-keeper"] if lp["status"] == "refusing")
        _wait(browser, f"document.querySelectorAll('#loops tbody tr[data-loop-id]').length === {len(expected)}")
        assert sorted(browser.evaluate(LOOP_ROWS)) == expected
        assert sorted(a["loop"] for a in browser.evaluate(ALARM_ROWS)) == expected
        assert browser.evaluate("document.getElementById('filter-state').value") == "refusing"

        # the fleet stopped: its alarms turn to stopped, then leave the list (alarm_retention)
        browser.open(f"{monitor.url}/?refresh=500")
        _wait(browser, """(() => { const rows = [...document.querySelectorAll('#alarms li[data-loop-id]')];
            return rows.length > 0 && rows.every(li => li.dataset.alarm === 'stopped'); })()""",
              timeout=IDLE_AFTER + 30)
        stopped = browser.evaluate(ALARM_ROWS)
        assert stopped and {a["alarm"] for a in stopped} == {"stopped"} and {a["status"] for a in stopped} == {"idle"}
        browser.screenshot(tmp_path / "stopped.png")
        _wait(browser, "document.querySelector('#alarms li.none') !== null", timeout=RETENTION + 30)
        assert set(browser.evaluate(LOOP_ROWS)) == set(loops)  # still tracked, off the alarm list
        browser.screenshot(tmp_path / "aged-out.png")
        for name in ("fleet-alarms", "halted-loop", "stopped", "aged-out"):
            shot = tmp_path / f"{name}.png"
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        print(f"screenshots: {tmp_path}")
    finally:
        monitor.stop()


def fleet_halt(fleet: Fleet, loop_id: str) -> int | None:
    """The detector cycle at which the loop's own guard halted it."""
    return next(lp.tally.halted_at for t in fleet.agents.values() for lp in t.loops if lp.loop_id == loop_id)
