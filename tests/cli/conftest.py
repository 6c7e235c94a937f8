"""Fixtures of the command-line tests: a real monitor subprocess (``python -m ctxwatch_monitor --port 0
--state :memory:``, uvicorn on 127.0.0.1) for the commands that export to one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ctxwatch.demo.monitor_process import MonitorClient, MonitorProcess


@pytest.fixture
def monitor() -> Iterator[MonitorClient]:
    process = MonitorProcess(":memory:", "--grpc-port", "off").start()
    try:
        yield process.client
    finally:
        process.close()
