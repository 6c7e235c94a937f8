"""`MutationTelemetry`: one INTERNAL span and the contract's metrics for every mutation attempt.

The guard calls `start` before its checks and `MutationHandle.end` with the `Report` after them.
Neither ever raises: any error is absorbed by `failures.record_failure`. With only the
OpenTelemetry API installed the span is a non-recording one, no span attribute is built (we
check `is_recording()` first) and the metric calls land on no-op instruments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import metadata
from time import perf_counter
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import INVALID_SPAN, SpanKind, Status, StatusCode

from .. import semconv
from ..report import MUTATION_KINDS, Report
from . import content, spans
from .failures import record_failure
from .metrics import Instruments, instruments_for


def _package_version() -> str:
    try:
        return metadata.version("ctxwatch")
    except metadata.PackageNotFoundError:
        return "0+unknown"


VERSION = _package_version()
_SPAN_NAMES = {kind: semconv.span_name(kind) for kind in (*MUTATION_KINDS, semconv.OVERFLOW)}


class MutationTelemetry:
    """Emits the telemetry of guard decisions; one per guard, or shared by several.

    `tracer_provider` / `meter_provider`: None uses the global providers (and follows them if the
    application installs its SDK later). `capture_content`: None follows
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``. `environ` is read once, here.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None, *,
                 capture_content: bool | None = None, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.names = semconv.genai_names(env)
        self.capture_content = (semconv.capture_content_enabled(env) if capture_content is None
                                else capture_content)
        self._tracer: trace.Tracer = trace.NoOpTracer()
        self._instruments: Instruments | None = None
        try:
            self._tracer = trace.get_tracer(semconv.INSTRUMENTATION_NAME, VERSION, tracer_provider,
                                            schema_url=self.names.schema_url)
            self._instruments = instruments_for(meter_provider, VERSION, self.names.schema_url)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("start", exc)

    def start(self, *, loop_id: str | None, kind: str, pass_number: int = 0, pass_cap: int | None = None,
              agent: str | None = None, conversation_id: str | None = None,
              service: str | None = None) -> MutationHandle:
        """Start the mutation span as a child of the current context; never raises."""
        try:
            bounded = semconv.bounded_kind(kind)
            attrs = spans.start_attributes(self.names, loop_id=loop_id, kind=bounded, pass_number=pass_number,
                                           pass_cap=pass_cap, agent=agent, conversation_id=conversation_id,
                                           service=service)
            span = self._tracer.start_span(_SPAN_NAMES[bounded], kind=SpanKind.INTERNAL, attributes=attrs)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("start", exc)
            span, attrs = INVALID_SPAN, {}
        return MutationHandle(self, span, attrs, agent, service)

    def failure(self, stage: str, error: BaseException | str) -> None:
        """Count and log a telemetry error (also on the ``ctxwatch.telemetry.errors`` counter)."""
        record_failure(stage, error, self._instruments.telemetry_errors if self._instruments else None)

    def _finish(self, handle: MutationHandle, report: Report) -> None:
        span = handle.span
        try:
            if span.is_recording():
                error_type = spans.error_type(report)
                attrs = spans.end_attributes(self.names, report, error_type, handle.started_attributes)
                span.set_attributes(attrs)
                if error_type is not None:
                    description = spans.status_description(report.decision, attrs[semconv.VIOLATIONS])
                    span.set_status(Status(StatusCode.ERROR, description))
                if self.capture_content:
                    span.set_attributes(content.lost_literal_attributes(report))
                    content.add_finding_events(span, report)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("end", exc)
        try:
            span.end()
        except Exception as exc:  # noqa: BLE001
            self.failure("end", exc)
        if self._instruments is not None:
            try:
                self._instruments.record(report, report.agent or handle.agent, handle.service,
                                         report.duration_s or perf_counter() - handle.started)
            except Exception as exc:  # noqa: BLE001
                self.failure("end", exc)


class MutationHandle:
    """The open span of one mutation attempt; `end` it exactly once with the guard's report."""

    __slots__ = ("_telemetry", "span", "started_attributes", "agent", "service", "started", "_ended")

    def __init__(self, telemetry: MutationTelemetry, span: Any, started_attributes: dict[str, Any],
                 agent: str | None, service: str | None) -> None:
        self._telemetry = telemetry
        self.span = span  # the OpenTelemetry span (non-recording without an SDK)
        self.started_attributes = started_attributes
        self.agent = agent
        self.service = service
        self.started = perf_counter()
        self._ended = False

    def fail(self, exc: BaseException) -> None:
        """End the span of an attempt that raised before it produced a report; never raises."""
        if self._ended:
            return
        self._ended = True
        try:
            self.span.record_exception(exc)
            self.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            self.span.set_attribute("error.type", type(exc).__qualname__)
            self.span.end()
        except Exception as inner:  # noqa: BLE001
            self._telemetry.failure("end", inner)

    def end(self, report: Report) -> None:
        """Set every attribute from `report`, record every metric, end the span; never raises.
        A second call does nothing."""
        if self._ended:
            return
        self._ended = True
        self._telemetry._finish(self, report)
