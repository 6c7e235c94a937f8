"""The spans ``replay --otlp`` makes of a session file, caught in memory by the real OpenTelemetry SDK."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch.literals import LiteralRegistry
from ctxwatch.replay.audit import SessionAudit, audit_session
from ctxwatch.replay.backfill import Backfill
from ctxwatch.telemetry import MutationTelemetry


def backfilled(path: Path, agent: str, version: str | None = None) -> tuple[SessionAudit, Sequence[ReadableSpan]]:
    """The audit of `path` and the spans its backfill emitted (agent name `agent`, agent version `version`)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = MutationTelemetry(provider, capture_content=False)
    registry = LiteralRegistry()
    audit = audit_session(path, registry=registry, observer_for=lambda a: Backfill(
        telemetry, lambda: None, loop_id=a.loop_id, agent=agent, service="s", registry=registry,
        agent_version=version))
    return audit, exporter.get_finished_spans()
