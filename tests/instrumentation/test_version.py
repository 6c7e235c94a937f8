"""One version, from one source: pyproject.toml's, as the installed package's metadata reports it, is
what `ctxwatch`, `ctxwatch_monitor`, the monitor's OpenAPI schema and the telemetry's instrumentation
scope all say."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ctxwatch
from ctxwatch import ContextGuard, MutationTelemetry

ROOT = Path(__file__).resolve().parents[2]


def test_every_part_reports_the_version_of_pyproject() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert metadata.version("ctxwatch") == declared
    assert ctxwatch.__version__ == declared
    monitor = pytest.importorskip("ctxwatch_monitor")
    assert monitor.__version__ == declared


def test_the_spans_instrumentation_scope_carries_it() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = ContextGuard("loop-version", telemetry=MutationTelemetry(tracer_provider=provider))
    guard.observe([ctxwatch.Message("user", "hello")], boundary=0)
    guard.check([ctxwatch.Message("user", "hi")], kind="rewrite")
    spans = exporter.get_finished_spans()
    assert spans
    assert {span.instrumentation_scope.version for span in spans} == {ctxwatch.__version__}
