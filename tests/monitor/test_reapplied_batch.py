"""A request applied again after another one of its group commit failed part-way is charged once.

When applying a request fails part-way (a bug; `faulty_monitor.py` plants one for loops named `fault-*`), the
monitor reloads its last committed state and applies again the requests that shared the batch
(docs/monitor.md, "A request that fails part-way"): they are answered as if nothing had happened. That
includes what they cost their client: a request read by the slow decoding path (OTLP/JSON with base64 ids)
is charged to its client's slow-path budget once, not once per application, so the client's next request,
within its budget, is accepted (it was refused with 429 when the batch charged it twice).

A real monitor process on 127.0.0.1 (`--slow-path-rate 0.001 --slow-path-burst 40`: the bucket does not refill
within the test), the poisoned request exported by the OpenTelemetry SDK's OTLP/HTTP exporter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import MonitorProcess, Sender
from test_slow_path import HOSTILE, JSON, as_json, client, spans

HERE = Path(__file__).resolve().parent


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(tmp_path / "state.sqlite3", "--slow-path-rate", "0.001", "--slow-path-burst", "40")
    proc.cmd[1:3] = [str(HERE / "faulty_monitor.py")]  # the same options, with the fault and the test routes
    proc.start()
    try:
        yield proc
    finally:
        proc.close(grace_s=30.0)


def until(monitor: MonitorProcess, pumping: int, queued: int) -> None:
    """Wait until the group commit has a batch under way (`pumping`) and `queued` requests behind it."""
    deadline = time.monotonic() + 60
    while monitor.get("/test/queued").json() != {"pumping": pumping, "queued": queued}:
        assert time.monotonic() < deadline, monitor.get("/test/queued").json()
        time.sleep(0.02)


def in_background(send: Callable[[], Any], answers: dict[str, Any], name: str) -> threading.Thread:
    thread = threading.Thread(target=lambda: answers.__setitem__(name, send()), daemon=True)
    thread.start()
    return thread


def test_a_request_applied_again_after_a_batch_reset_is_charged_to_its_budget_once(faulty: MonitorProcess) -> None:
    answers: dict[str, Any] = {}
    filler, poisoned = Sender(faulty.url, service="filler"), Sender(faulty.url, service="poisoned")
    slow = client(faulty, HOSTILE)
    try:
        assert faulty.post("/test/hold").status_code == 200
        filler.mutation("filler")  # the batch under way, waiting for the state thread
        threads = [in_background(filler.flush, answers, "filler")]
        until(faulty, pumping=1, queued=0)
        # 30 slow reads of the 40 the client saves up, then the poisoned request, queued in one batch behind it
        threads.append(in_background(lambda: slow.post("/v1/traces", content=as_json(spans("slow", 1, 30),
                                                                                     hex_ids=False), headers=JSON),
                                     answers, "slow"))
        until(faulty, pumping=1, queued=1)
        poisoned.mutation("fault-1")
        threads.append(in_background(poisoned.flush, answers, "poisoned"))
        until(faulty, pumping=1, queued=2)
        assert faulty.post("/test/release").status_code == 200
        for thread in threads:
            thread.join(120)

        assert answers["slow"].status_code == 200, answers["slow"].text  # applied again, committed, answered
        assert faulty.get("/api/loops/slow").json()["sequence"] == 30
        assert faulty.get("/api/loops/fault-1").status_code == 404  # nothing of the failed request was kept
        # 10 slow reads left: the next request, of 5, is within the client's budget
        more = slow.post("/v1/traces", content=as_json(spans("slow", 31, 5), hex_ids=False), headers=JSON)
        assert more.status_code == 200, more.text
        assert faulty.get("/api/loops/slow").json()["sequence"] == 35
    finally:
        slow.close()
        filler.close()
        poisoned.close()
        httpx.post(faulty.url + "/test/release", timeout=30)

