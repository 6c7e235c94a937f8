"""`MutationTelemetry`: one INTERNAL span and the contract's metrics for every mutation attempt.

The guard calls `start` before its checks and `MutationHandle.end` with the `Report` after them.
The span is created at `end`, with the start time noted by `start` and every attribute at once: a
sampler sees the decision and the findings, not only the loop and the kind, and the SDK validates
the attributes in one pass. The guard never makes the span current, so nothing could have been its
child meanwhile. Neither call ever raises: any error is absorbed by `failures.record_failure`. With
only the OpenTelemetry API installed (or a no-op tracer provider) no span and no attribute is built,
and the metric calls land on no-op instruments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from time import perf_counter, time_ns
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, Status, StatusCode

from .. import semconv
from ..report import MUTATION_KINDS, Report
from ..version import VERSION
from . import content, spans
from .failures import record_failure
from .metrics import Instruments, instruments_for
from .sequence import LoopSequences, Numbering, recorded_instance

_SPAN_NAMES = {kind: semconv.span_name(kind) for kind in (*MUTATION_KINDS, semconv.OVERFLOW)}
_NO_SPANS = (ProxyTracerProvider, NoOpTracerProvider)  # the API's providers before an SDK is installed


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
        self._tracer_provider = tracer_provider
        self._sequences = LoopSequences()
        self._tracer: trace.Tracer = trace.NoOpTracer()
        self._instruments: Instruments | None = None
        self._follows_global = meter_provider is None
        self._global_seen = metrics.get_meter_provider()
        try:
            self._tracer = trace.get_tracer(semconv.INSTRUMENTATION_NAME, VERSION, tracer_provider,
                                            schema_url=self.names.schema_url)
            self._instruments = instruments_for(meter_provider, VERSION, self.names.schema_url)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self._tracer_provider = NoOpTracerProvider()
            self.failure("start", exc)

    def start(self, *, loop_id: str | None, kind: str, pass_number: int = 0, pass_cap: int | None = None,
              agent: str | None = None, conversation_id: str | None = None,
              service: str | None = None, agent_version: str | None = None,
              at_ns: int | None = None) -> MutationHandle:
        """Note the start of a mutation attempt (its time and what the caller says of it); never raises.
        `at_ns` (unix nanoseconds) is when a recorded mutation happened: the span starts and ends then."""
        return MutationHandle(self, loop_id=loop_id, kind=kind, pass_number=pass_number, pass_cap=pass_cap,
                              agent=agent, conversation_id=conversation_id, service=service,
                              agent_version=agent_version, at_ns=at_ns)

    def failure(self, stage: str, error: BaseException | str) -> None:
        """Count and log a telemetry error (also on the ``ctxwatch.telemetry.errors`` counter)."""
        instruments = self._current_instruments()
        record_failure(stage, error, instruments.telemetry_errors if instruments else None)

    def _current_instruments(self) -> Instruments | None:
        """The instruments to record on. Following the global provider, they are looked up again once the
        application has installed another one, so the counts land on the set its SDK reports (one set
        per provider; see `metrics.instruments_for`)."""
        if self._follows_global and self._instruments is not None:
            current = metrics.get_meter_provider()
            if current is not self._global_seen:
                self._global_seen = current
                try:
                    self._instruments = instruments_for(None, VERSION, self.names.schema_url)
                except Exception as exc:  # noqa: BLE001 - telemetry fails open; keep the set we had
                    record_failure("end", exc, None)
        return self._instruments

    @property
    def tracer_provider(self) -> trace.TracerProvider:
        """The tracer provider spans go to: the one given, else the current global one."""
        return self._tracer_provider if self._tracer_provider is not None else trace.get_tracer_provider()

    @property
    def _traces(self) -> bool:
        """Whether a span could be recorded: an SDK (or another real) tracer provider is in place."""
        return not isinstance(self.tracer_provider, _NO_SPANS)

    def _start_span(self, handle: MutationHandle, attributes: dict[str, Any]) -> Any:
        """The attempt's span, started at the handle's start time with every attribute; None on error."""
        try:
            return self._tracer.start_span(_SPAN_NAMES[semconv.bounded_kind(handle.kind)], kind=SpanKind.INTERNAL,
                                           attributes=attributes, start_time=handle.start_time_ns)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("start", exc)
            return None

    def _end_span(self, span: Any, handle: MutationHandle) -> None:
        try:
            span.end(end_time=handle.end_time_ns)
        except Exception as exc:  # noqa: BLE001
            self.failure("end", exc)

    def new_run(self, loop_id: str) -> None:
        """A new guard reports `loop_id` from now on: its spans are numbered as a new run, under a new instance
        id (`sequence.LoopSequences.restart`); never raises."""
        try:
            self._sequences.restart(loop_id)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("start", exc)

    def renumber(self, loop_id: str, sequence: int = 0, cycles: int = 0, generation: int = 0) -> None:
        """Number the loop's reports from 1 again: a backfill reports its session's file (the session's
        `generation`-th, see `sequence`) from the top, as the same instance on every run
        (`sequence.recorded_instance`); or, resuming it after `sequence` spans and `cycles` detector cycles,
        from ``sequence + 1``."""
        self._sequences.renumber(loop_id, recorded_instance(loop_id, generation), sequence, cycles)

    def number_unsent(self, report: Report) -> None:
        """Number a report whose span an earlier run already sent (a resumed backfill skips it), so the
        loop's `ctxwatch.sequence` goes on where that run left it."""
        try:
            self._sequences.next(report.loop_id or "", report.episode, report.kind, report.decision,
                                 report.hash_distance, report.detector_run)
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("end", exc)

    def _finish(self, handle: MutationHandle, report: Report) -> None:
        try:
            violations, warnings = (report.violations, report.warnings) if report.findings else ([], [])
            # numbered even when no span is recorded (not sampled, no SDK yet): the gap is what a consumer sees
            numbering = self._sequences.next(report.loop_id or handle.loop_id or "", report.episode, report.kind,
                                             report.decision, report.hash_distance, report.detector_run)
        except Exception as exc:  # noqa: BLE001 - not a report: counted, nothing recorded
            self.failure("end", exc)
            return
        if self._traces:
            handle.span = self._record_span(handle, report, violations, warnings, numbering)
        instruments = self._current_instruments()
        if instruments is not None:
            try:
                instruments.record(report, violations, warnings, report.agent or handle.agent, handle.service,
                                   report.duration_s or perf_counter() - handle.started, handle.agent_version)
            except Exception as exc:  # noqa: BLE001
                self.failure("end", exc)

    def _record_span(self, handle: MutationHandle, report: Report, violations: list[str],
                     warnings: list[str], numbering: Numbering) -> Any:
        """Start the attempt's span with every attribute, set its status and content, end it."""
        try:
            error_type = spans.error_type(report)
            attrs = spans.report_attributes(handle.start_attributes(), self.names, report, violations, warnings,
                                            error_type)
            (attrs[semconv.SEQUENCE], attrs[semconv.CONTRACTION_CYCLE], attrs[semconv.GUARD_INSTANCE],
             attrs[semconv.CONTRACTION_RUN]) = numbering
            if self.capture_content:
                attrs.update(content.lost_literal_attributes(report))
        except Exception as exc:  # noqa: BLE001 - telemetry fails open
            self.failure("end", exc)
            return None
        span = self._start_span(handle, attrs)
        if span is None:
            return None
        if span.is_recording():
            try:
                if error_type is not None:
                    span.set_status(Status(StatusCode.ERROR, spans.status_description(report.decision, violations)))
                if self.capture_content:
                    content.add_finding_events(span, report)
            except Exception as exc:  # noqa: BLE001
                self.failure("end", exc)
        self._end_span(span, handle)
        return span

    def _fail(self, handle: MutationHandle, exc: BaseException) -> None:
        """An error span for an attempt that raised before its report: the caller's attributes without the
        kind (so consumers of mutation spans, the monitor among them, pass over it: there was no decision),
        `error.type`, and the exception event only with content capture on (its message may quote text)."""
        if not self._traces:
            return
        try:
            attrs = handle.start_attributes()
            del attrs[semconv.MUTATION_KIND]
            attrs[self.names.error_type] = type(exc).__qualname__
        except Exception as inner:  # noqa: BLE001
            self.failure("end", inner)
            return
        span = handle.span = self._start_span(handle, attrs)
        if span is None:
            return
        try:
            if self.capture_content:
                span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
        except Exception as inner:  # noqa: BLE001
            self.failure("end", inner)
        self._end_span(span, handle)


class MutationHandle:
    """One mutation attempt in progress; `end` it exactly once with the guard's report (or `fail` it).
    After that, `span` is the attempt's ended span (None when no span was recorded)."""

    __slots__ = ("_telemetry", "loop_id", "kind", "pass_number", "pass_cap", "agent", "conversation_id",
                 "service", "agent_version", "start_time_ns", "end_time_ns", "started", "span", "_ended")

    def __init__(self, telemetry: MutationTelemetry, *, loop_id: str | None, kind: str, pass_number: int,
                 pass_cap: int | None, agent: str | None, conversation_id: str | None, service: str | None,
                 agent_version: str | None = None, at_ns: int | None = None) -> None:
        self._telemetry = telemetry
        self.loop_id, self.kind, self.pass_number, self.pass_cap = loop_id, kind, pass_number, pass_cap
        self.agent, self.conversation_id, self.service = agent, conversation_id, service
        self.agent_version = agent_version
        self.start_time_ns = time_ns() if at_ns is None else at_ns
        self.end_time_ns = at_ns  # None: the span ends when it is recorded
        self.started = perf_counter()
        self.span: Any = None
        self._ended = False

    def start_attributes(self) -> dict[str, Any]:
        """The attributes known when the attempt started (what the caller said of it)."""
        return spans.start_attributes(self._telemetry.names, loop_id=self.loop_id,
                                      kind=semconv.bounded_kind(self.kind), pass_number=self.pass_number,
                                      pass_cap=self.pass_cap, agent=self.agent,
                                      conversation_id=self.conversation_id, service=self.service,
                                      agent_version=self.agent_version)

    def fail(self, exc: BaseException) -> None:
        """Record an attempt that raised before it produced a report (an error span); never raises."""
        if not self._ended:
            self._ended = True
            self._telemetry._fail(self, exc)

    def end(self, report: Report) -> None:
        """Record the span with every attribute of `report` and every metric; never raises.
        A second call does nothing."""
        if not self._ended:
            self._ended = True
            self._telemetry._finish(self, report)
