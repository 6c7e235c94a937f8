"""A loop the monitor's contraction detector entered falsely leaves the regime when its kept literals are back at
their level (issue 14): the monitor runs the shared detector (`ctxwatch.contraction`), so its loop status and alarm
follow, from contracting to healthy and from an active alarm to a resolved one. Real monitor subprocess, real OTel
SDK sender."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess, Sender

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector, DetectorConfig

# no count's chance spread and entry runs that need not compound: a detector like the one before review F2, which
# enters a quiet-tool loop falsely
FORCED = {"contract_noise": 0.0, "step_noise": 0.0, "confirm_noise": 0.0}
# (d, literals before, lost, |Q_t|) of a tool loop whose tools do not echo their input (review F2's shape): a fresh
# handful of literals kept each cycle (10, 12, 5, 5, 16, 5, ...), d near 0.5 below r on every cycle
QUIET_LOOP = [(0.45, 22, 12, 680), (0.49, 34, 22, 820), (0.47, 23, 18, 510), (0.50, 27, 22, 730),
              (0.46, 40, 24, 960), (0.54, 31, 26, 570), (0.55, 36, 21, 830), (0.45, 36, 20, 850),
              (0.49, 33, 21, 790), (0.49, 50, 35, 1180)]


@pytest.fixture
def forced_monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    config = tmp_path / "monitor.toml"
    config.write_text("[contraction]\n" + "".join(f"{k} = {v}\n" for k, v in FORCED.items()))
    proc = MonitorProcess(tmp_path / "state.sqlite3", "--config", str(config)).start()
    try:
        yield proc
    finally:
        proc.stop()


def _loop(monitor: MonitorProcess, loop_id: str) -> dict[str, Any]:
    response = monitor.get(f"/api/loops/{loop_id}")
    assert response.status_code == 200, response.text
    return response.json()


def _alarm(monitor: MonitorProcess, loop_id: str) -> str | None:
    response = monitor.get("/api/alarms")
    assert response.status_code == 200, response.text
    return next((a["alarm"] for a in response.json()["alarms"] if a["loop_id"] == loop_id), None)


def _send(sender: Sender, figures: list[tuple[float, int, int, int]]) -> None:
    for d, before, lost, size in figures:
        sender.mutation("quiet-tools", d=d, before=before, lost=lost, **{semconv.SIZE_AFTER: size})
    sender.flush()


def test_a_falsely_entered_loop_resolves_when_its_kept_literals_are_back(forced_monitor: MonitorProcess) -> None:
    detector = ContractionDetector(DetectorConfig(**FORCED))  # what the guard's own detector says, cycle by cycle
    states = [detector.update(*f).state for f in QUIET_LOOP]
    assert states[5:8] == ["contracting", "contracting", "healthy"] and states[-1] == "healthy"
    assert all(d < lost / before for d, before, lost, _ in QUIET_LOOP)  # the old clear cycle never comes
    sender = Sender(forced_monitor.url)
    try:
        _send(sender, QUIET_LOOP[:6])
        got = _loop(forced_monitor, "quiet-tools")
        assert (got["state"], got["status"], got["onset"]) == ("contracting", "contracting", 3)
        assert _alarm(forced_monitor, "quiet-tools") == "active"
        _send(sender, QUIET_LOOP[6:7])
        assert _loop(forced_monitor, "quiet-tools")["state"] == "contracting"  # one cycle back is not enough
        _send(sender, QUIET_LOOP[7:])
        got = _loop(forced_monitor, "quiet-tools")
        assert (got["state"], got["status"]) == ("healthy", "healthy")
        assert got["detector"]["level"] is None and got["detector"]["cycle"] == len(QUIET_LOOP)
        assert _alarm(forced_monitor, "quiet-tools") == "resolved"
    finally:
        sender.close()
