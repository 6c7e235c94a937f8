"""The live page in real headless Chromium (issue 5, "Live page"), driven over the DevTools protocol.

Debian's `chromium` is started with `--remote-debugging-pipe` (CDP messages on fds 3 and 4, no
port, no extra package). The page is loaded from the monitor subprocess with the token in the URL
fragment; the test waits for the loops to be listed and the chart of the contracting loop to be
drawn with its onset marked, saves a screenshot, then sends new spans and sees the page update on
its own (no reload). Skipped, with the reason, only when no chromium binary is installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import MonitorProcess, Sender, contracting_cycles, healthy_cycles
from devtools import CHROMIUM, DevTools

TOKEN = "page-token"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


def test_live_page_lists_loops_draws_the_chart_and_updates(tmp_path: Path, browser: DevTools) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--token", TOKEN).start()
    try:
        sender = Sender(monitor.url, service="page", token=TOKEN)
        for d, before, lost in contracting_cycles():
            sender.mutation("page-contracting", d=d, before=before, lost=lost, agent="absorber")
        for d, before, lost in healthy_cycles(4):
            sender.mutation("page-healthy", "prune", d=d, before=before, lost=lost, agent="planner")
        sender.flush()

        browser.open(f"{monitor.url}/?refresh=500#token={TOKEN}")
        browser.wait_for("document.querySelectorAll('#loops tbody tr[data-loop-id]').length === 2")
        listed = browser.evaluate("[...document.querySelectorAll('#loops tbody tr')].map(r => r.dataset.loopId)")
        assert sorted(listed) == ["page-contracting", "page-healthy"]
        onset = monitor.get("/api/loops/page-contracting", headers={"Authorization": f"Bearer {TOKEN}"}).json()["onset"]
        browser.wait_for("document.querySelector('#onset-marker') !== null")
        chart = browser.evaluate("""({loop: document.querySelector('#chart').dataset.loopId,
            d: document.querySelector('#d-line').dataset.points, r: document.querySelector('#r-line').dataset.points,
            onset: document.querySelector('#onset-marker').dataset.cycle,
            path: document.querySelector('#d-line').getAttribute('d')})""")
        assert chart["loop"] == "page-contracting"
        assert int(chart["d"]) == int(chart["r"]) == len(contracting_cycles())
        assert int(chart["onset"]) == onset
        assert chart["path"].startswith("M") and chart["path"].count("L") == len(contracting_cycles()) - 1
        fleet = browser.evaluate("""Object.fromEntries([...document.querySelectorAll('#fleet tbody tr')].map(r =>
            [r.dataset.agent, Object.fromEntries([...r.querySelectorAll('td[data-status]')].map(
                td => [td.dataset.status, Number(td.textContent)]))]))""")
        assert fleet["absorber"] == {"healthy": 0, "refusing": 0, "contracting": 1, "blocked": 0, "halted": 0,
                                     "idle": 0}, fleet
        assert fleet["planner"]["healthy"] == 1 and sum(fleet["planner"].values()) == 1, fleet
        shot = tmp_path / "live-page.png"
        browser.screenshot(shot)
        assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        sender.mutation("page-new", "rewrite", d=0.5, before=10, lost=0, agent="newcomer")
        sender.mutation("page-contracting", d=0.04, before=2, lost=1, agent="absorber")
        sender.flush()
        browser.wait_for("document.querySelector('#loops tbody tr[data-loop-id=\"page-new\"]') !== null")
        browser.wait_for(f"document.querySelector('#d-line').dataset.points === '{len(contracting_cycles()) + 1}'")
        assert browser.evaluate("Number(document.getElementById('status').dataset.refreshes)") >= 2
        browser.screenshot(tmp_path / "live-page-updated.png")

        # the deep links the Grafana boards use: ?agent= lists one agent's loops, ?loop= selects one
        browser.open(f"{monitor.url}/?refresh=500&agent=planner&loop=page-healthy#token={TOKEN}")
        browser.wait_for("document.querySelector('#chart').dataset.loopId === 'page-healthy'")
        listed = browser.evaluate("[...document.querySelectorAll('#loops tbody tr')].map(r => r.dataset.loopId)")
        assert listed == ["page-healthy"]
        sender.close()
    finally:
        monitor.stop()
