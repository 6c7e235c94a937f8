"""Fixtures for the monitor tests: the real service as a subprocess, and real OTel SDK senders.

`MonitorProcess` is the one helper that starts `python -m ctxwatch_monitor --port 0` (uvicorn on
127.0.0.1, a free port chosen by the kernel, and OTLP/gRPC on another free one), reads the bound URL
from its first output line and the gRPC address from the second, and waits for /readyz.
`Sender` exports spans through the OpenTelemetry SDK's OTLP/HTTP exporter, as an agent would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from devtools import DevTools
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import ctxwatch.demo.monitor_process
from ctxwatch import semconv
from ctxwatch_monitor.config import MEMORY_STATE, MonitorConfig
from ctxwatch_monitor.engine import Engine
from ctxwatch_monitor.instruments import Instruments

AGENT = semconv.GENAI_V1_41.agent_name


class MonitorProcess(ctxwatch.demo.monitor_process.MonitorProcess):
    """The monitor's one subprocess helper (`ctxwatch.demo.monitor_process`), with httpx calls."""

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.post(self.url + path, timeout=60, **kwargs)


def running_monitor(tmp_path: Path, *args: str) -> Iterator[MonitorProcess]:
    """A monitor started with `args` on a state file in `tmp_path`, for a fixture to yield; closed after."""
    proc = MonitorProcess(tmp_path / "state.sqlite3", *args).start()
    try:
        yield proc
    finally:
        proc.close(grace_s=30.0)


@pytest.fixture
def monitor(tmp_path: Path) -> Iterator[MonitorProcess]:
    yield from running_monitor(tmp_path)


@pytest.fixture
def engine() -> Iterator[Engine]:
    """The monitor's state engine in process, on an in-memory state (no subprocess, no port)."""
    config = MonitorConfig(state=MEMORY_STATE)
    engine = Engine(config, Instruments(config.label_cap), None)
    engine.restore()
    try:
        yield engine
    finally:
        engine.shutdown()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    """Headless Chromium driven over the DevTools protocol (the tests using it skip without chromium)."""
    tools = DevTools(tmp_path / "chromium-profile")
    try:
        yield tools
    finally:
        tools.close()


class Sender:
    """An OTel SDK TracerProvider exporting over OTLP/HTTP protobuf to the monitor."""

    def __init__(self, url: str, service: str = "svc", token: str | None = None,
                 resource: Mapping[str, Any] | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self.exporter = OTLPSpanExporter(endpoint=url + "/v1/traces", headers=headers, timeout=30)
        self.provider = TracerProvider(resource=Resource.create({"service.name": service, **(resource or {})}))
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter, max_export_batch_size=512))
        self.tracer = self.provider.get_tracer("tests.monitor")

    def mutation(self, loop_id: str | None, kind: str = "compact", decision: str = "patch", *,
                 d: float | None = None, before: int = 0, lost: int = 0, agent: str = "agent-a",
                 violations: tuple[str, ...] = (), end_ns: int | None = None, **extra: Any) -> None:
        """One mutation span with the wire contract's attributes (ending now, or at `end_ns`)."""
        attrs: dict[str, Any] = {semconv.MUTATION_KIND: kind, semconv.DECISION: decision, AGENT: agent,
                                 semconv.LITERALS_BEFORE: before, semconv.LITERALS_LOST: lost,
                                 semconv.ORPHANS_TOOL_USE: 0, semconv.ORPHANS_TOOL_RESULT: 0,
                                 semconv.VIOLATIONS: list(violations), semconv.PASS_NUMBER: 1}
        if loop_id is not None:
            attrs[semconv.LOOP_ID] = loop_id
        if d is not None:
            attrs[semconv.HASH_DISTANCE] = d
        attrs.update(extra)
        if end_ns is not None:
            self.tracer.start_span(semconv.span_name(kind), attributes=attrs, start_time=end_ns - 1000).end(end_ns)
            return
        with self.tracer.start_as_current_span(semconv.span_name(kind), attributes=attrs):
            pass

    def flush(self) -> None:
        assert self.provider.force_flush(30_000)

    def close(self) -> None:
        self.provider.shutdown()


def contracting_cycles() -> list[tuple[float, int, int]]:
    """(d, literals before, lost) of an instruction-absorption loop (record 003): the buffer changes
    less each cycle while it loses a growing share of its literals."""
    return [(0.60, 40, 0), (0.55, 40, 1), (0.50, 39, 2), (0.30, 37, 14), (0.20, 23, 12), (0.10, 11, 7),
            (0.05, 4, 3)]


def healthy_cycles(n: int) -> list[tuple[float, int, int]]:
    """Rewrites that change the buffer a lot and keep their literals."""
    return [(0.4 + 0.02 * (i % 5), 30, 0) for i in range(n)]


def samples(text: str) -> list[Sample]:
    """Every sample of a Prometheus text exposition, as prometheus_client's parser reads it."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def metric_value(text: str, name: str, **labels: str) -> float:
    """Sum of the samples named `name` (`_total`, `_count` included) whose labels include `labels`."""
    return sum(s.value for s in samples(text) if s.name == name and labels.items() <= s.labels.items())
