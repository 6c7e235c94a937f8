"""The agent version of a guard whose caller names none: ``gen_ai.agent.version`` of the process's resource
(the tracer provider's, else ``OTEL_RESOURCE_ATTRIBUTES``), so an integration whose guards the framework makes,
or a deployment, sets it without code. Real SDK providers, in-memory exporter and metric reader."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import ContextGuard
from ctxwatch.telemetry import MutationTelemetry

VERSION = "gen_ai.agent.version"


class Pipeline:
    def __init__(self, resource: dict | None = None) -> None:
        self.spans, self.metrics = InMemorySpanExporter(), InMemoryMetricReader()
        self.provider = TracerProvider(resource=Resource.create(resource or {}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.telemetry = MutationTelemetry(self.provider, MeterProvider(metric_readers=[self.metrics]), environ={})

    def run(self, guard: ContextGuard) -> None:
        messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q1"},
                    {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
        guard.observe(messages[:2])
        guard.observe(messages)
        guard.apply([messages[0], {"role": "user", "content": "Earlier: q1 a1"}, messages[3]], kind="compact")

    def span_versions(self) -> set:
        return {s.attributes.get(VERSION) for s in self.spans.get_finished_spans()}

    def counter_versions(self) -> set:
        return {point.attributes.get(VERSION) for rm in self.metrics.get_metrics_data().resource_metrics
                for sm in rm.scope_metrics for m in sm.metrics if m.name == "ctxwatch.mutations"
                for point in m.data.data_points}


def test_a_guard_naming_no_version_takes_the_resources(monkeypatch):
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    pipeline = Pipeline({VERSION: "3.1.0"})
    guard = ContextGuard("versioned", telemetry=pipeline.telemetry)
    pipeline.run(guard)
    assert guard.agent_version == "3.1.0"
    assert pipeline.span_versions() == {"3.1.0"} and pipeline.counter_versions() == {"3.1.0"}


def test_otel_resource_attributes_name_it_when_the_provider_does_not(monkeypatch):
    pipeline = Pipeline()
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=shop,gen_ai.agent.version=2.0.1%2Bbuild.7")
    guard = ContextGuard("versioned", telemetry=pipeline.telemetry)
    pipeline.run(guard)
    assert pipeline.span_versions() == {"2.0.1+build.7"} and pipeline.counter_versions() == {"2.0.1+build.7"}


@pytest.mark.parametrize("environ", ["", "gen_ai.agent.version=9.9.9"])
def test_the_callers_version_wins(monkeypatch, environ):
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", environ)
    pipeline = Pipeline({VERSION: "3.1.0"})
    pipeline.run(ContextGuard("versioned", agent_version="1.2.3", telemetry=pipeline.telemetry))
    assert pipeline.span_versions() == {"1.2.3"} and pipeline.counter_versions() == {"1.2.3"}


def test_no_resource_version_leaves_it_out(monkeypatch):
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    pipeline = Pipeline()
    guard = ContextGuard("unversioned", telemetry=pipeline.telemetry)
    pipeline.run(guard)
    assert guard.agent_version is None and pipeline.span_versions() == {None}
    assert pipeline.counter_versions() == {None}
