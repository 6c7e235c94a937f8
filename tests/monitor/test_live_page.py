"""The live page in real headless Chromium (issue 5, "Live page"), driven over the DevTools protocol.

Debian's `chromium` is started with `--remote-debugging-pipe` (CDP messages on fds 3 and 4, no
port, no extra package). The page is loaded from the monitor subprocess with the token in the URL
fragment; the test waits for the loops to be listed and the chart of the contracting loop to be
drawn with its onset marked, saves a screenshot, then sends new spans and sees the page update on
its own (no reload). Skipped, with the reason, only when no chromium binary is installed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess, Sender, contracting_cycles, healthy_cycles

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "page-token"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


class DevTools:
    """A minimal Chrome DevTools Protocol client over --remote-debugging-pipe."""

    def __init__(self, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
             f"--user-data-dir={profile}", "--window-size=1280,1100", "--remote-debugging-pipe", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=wire_fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None

    def call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.call("Page.enable")
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}; status: "
                             f"{self.evaluate('document.getElementById(`status`).textContent')}")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", session=False)
            self.proc.wait(timeout=20)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=20)
        os.close(self._to_browser)
        os.close(self._from_browser)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    tools = DevTools(tmp_path / "chromium-profile")
    try:
        yield tools
    finally:
        tools.close()


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
