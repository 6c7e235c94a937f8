"""Shared by the framework-integration tests: a real OpenTelemetry SDK pipeline with an in-memory
exporter, so a test can count the guard's spans exactly."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import semconv
from ctxwatch.telemetry import MutationTelemetry


class SpanCapture:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.telemetry = MutationTelemetry(self.provider, environ={})

    def spans(self) -> list:
        """The guard's mutation spans, appends left out (every observed turn has one; see `appends`)."""
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(semconv.SPAN_NAME_PREFIX)
                and s.attributes.get(semconv.MUTATION_KIND) != "append"]

    def appends(self) -> list:
        """The append spans of observed turns."""
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(semconv.SPAN_NAME_PREFIX)
                and s.attributes.get(semconv.MUTATION_KIND) == "append"]

    def summary(self) -> list[tuple[str, str]]:
        """(span name, decision) of every guard span, in order."""
        return [(s.name, s.attributes[semconv.DECISION]) for s in self.spans()]


@pytest.fixture
def capture() -> SpanCapture:
    return SpanCapture()
