"""An agent that points its whole OTLP pipeline (spans and metrics) at the monitor: the metric
export is accepted and dropped (200), not answered 404 on every interval."""

from __future__ import annotations

from conftest import MonitorProcess
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult

from ctxwatch import ContextGuard, Message, MutationTelemetry


def test_the_guards_metrics_exported_to_the_monitor_are_accepted(monitor: MonitorProcess) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    guard = ContextGuard("metrics-to-monitor", telemetry=MutationTelemetry(meter_provider=provider))
    guard.check([Message("system", "s"), Message("user", "hi")], kind="append")
    data = reader.get_metrics_data()
    exporter = OTLPMetricExporter(endpoint=monitor.url + "/v1/metrics", timeout=10)
    assert data.resource_metrics and exporter.export(data) == MetricExportResult.SUCCESS
    assert monitor.post("/v1/metrics", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    assert monitor.get("/api/loops").json()["total"] == 0  # nothing was stored from it
