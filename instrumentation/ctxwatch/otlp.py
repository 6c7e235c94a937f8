"""``ctxwatch[otlp]``: one call that wires the OpenTelemetry SDK to export ctxwatch telemetry over
OTLP/HTTP, for applications that have no OpenTelemetry setup of their own.

`install()` builds an SDK TracerProvider (BatchSpanProcessor, OTLP/HTTP span exporter) and a
MeterProvider (PeriodicExportingMetricReader, OTLP/HTTP metric exporter) from the standard
``OTEL_*`` variables and makes them global — each only if the application has not set its own:
a provider the application already installed is never replaced. `build()` does the same without
touching the globals (pass its providers to `MutationTelemetry`).

Fail open: the exporters are wrapped so a failed or raising export is counted
(``ctxwatch.telemetry.errors``, `ctxwatch.telemetry.error_count`) and logged at debug level;
exporting runs on the SDK's background threads with a bounded queue (spans past it are dropped,
never waited for) and per-request timeouts.

Bounded shutdown: the SDK does not bound it (a BatchSpanProcessor waits up to 30 s for its worker,
whose last export retries a connection error with backoff until the exporter's timeout), so
`OtlpPipeline.shutdown` and `force_flush` run it on daemon threads and return within `timeout_s` in
total, whatever the endpoint does; a shutdown that runs out of time then stops the exporters, which
ends the SDK's retry wait. The exporter's own timeout (``OTEL_EXPORTER_OTLP_TIMEOUT`` or
`timeout_s`) is left as configured: ctxwatch never sets or replaces it.

Refusals are named: the OTLP/HTTP exporters `build` makes send through a session that notes whether the last
answer was other than 2xx (`OtlpPipeline.refused`, e.g. 401 Unauthorized), so a tool can say why its exports
failed instead of guessing that nothing listens.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import requests
from opentelemetry import metrics, trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from . import semconv
from .loop_ids import set_process_loop_id
from .telemetry.failures import record_failure
from .telemetry.metrics import instruments_for
from .version import VERSION

ENV_SDK_DISABLED = "OTEL_SDK_DISABLED"
ENV_TRACES_EXPORTER = "OTEL_TRACES_EXPORTER"
ENV_METRICS_EXPORTER = "OTEL_METRICS_EXPORTER"
DEFAULT_SHUTDOWN_TIMEOUT_S = 3.0  # docs/telemetry.md, "Fail-open behaviour": the exit bound
# The SDK's variables naming a credential provider: the exporter then loads a session of its own.
ENV_CREDENTIAL_PROVIDERS = ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                            "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
                            "OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER")

OnFailure = Callable[[BaseException | str], None]


def _counted(on_failure: OnFailure, call: Callable[[], Any], success: Any, failure: Any) -> Any:
    """`call()`, with a raised exception or a result other than `success` counted (never raised)."""
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - fail open
        on_failure(exc)
        return failure
    if result is not success:
        on_failure("ExportFailed")
    return result


def _quietly(on_failure: OnFailure, call: Callable[[], Any], fallback: Any = None) -> Any:
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - fail open
        on_failure(exc)
        return fallback


class _StopsOnce:
    """An exporter wrapper shut down at most once: the pipeline may stop it (to end the SDK's retries
    when a shutdown runs out of time) before or after the SDK's own shutdown call reaches it."""

    _stopped = False

    def _stop_once(self, on_failure: OnFailure, call: Callable[[], Any]) -> None:
        if not self._stopped:
            self._stopped = True
            _quietly(on_failure, call)


class CountingSpanExporter(_StopsOnce, SpanExporter):
    """Wraps a span exporter: failures and exceptions are counted, never propagated."""

    def __init__(self, inner: SpanExporter, on_failure: OnFailure) -> None:
        self.inner = inner
        self._on_failure = on_failure

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return _counted(self._on_failure, lambda: self.inner.export(spans), SpanExportResult.SUCCESS,
                        SpanExportResult.FAILURE)

    def shutdown(self) -> None:
        self._stop_once(self._on_failure, self.inner.shutdown)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return _quietly(self._on_failure, lambda: self.inner.force_flush(timeout_millis), False)


class CountingMetricExporter(_StopsOnce, MetricExporter):
    """Wraps a metric exporter (keeping its temporality and aggregation preferences) the same way."""

    def __init__(self, inner: MetricExporter, on_failure: OnFailure) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self.inner = inner
        self._on_failure = on_failure

    def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        return _counted(self._on_failure,
                        lambda: self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs),
                        MetricExportResult.SUCCESS, MetricExportResult.FAILURE)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return _quietly(self._on_failure, lambda: self.inner.force_flush(timeout_millis=timeout_millis),
                        False)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._stop_once(self._on_failure, lambda: self.inner.shutdown(timeout_millis=timeout_millis, **kwargs))


def _bounded(calls: Sequence[Callable[[], Any]], timeout_s: float) -> bool:
    """Run `calls` on daemon threads; True if all finished within `timeout_s` in total (never blocks longer)."""
    deadline = time.monotonic() + timeout_s
    threads = []
    for call in calls:
        def run(call: Callable[[], Any] = call) -> None:
            try:
                call()
            except Exception as exc:  # noqa: BLE001 - fail open
                record_failure("end", exc)
        thread = threading.Thread(target=run, name="ctxwatch-otlp-flush", daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return not any(t.is_alive() for t in threads)


class Refusal(NamedTuple):
    """An HTTP answer other than 2xx that an OTLP/HTTP endpoint gave an export."""

    status: int
    reason: str

    def __str__(self) -> str:
        return f"HTTP {self.status} {self.reason}".rstrip()


@dataclass
class OtlpPipeline:
    """The providers `build` / `install` made (None for a signal left to the application or off), and
    the wrapped exporters they send through."""

    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    installed_traces: bool = False
    installed_metrics: bool = False
    exporters: list[CountingSpanExporter | CountingMetricExporter] = field(default_factory=list)
    stopping: bool = False  # failures while shutting down are counted without the (closing) meter provider
    refused: Refusal | None = None  # the endpoint's last answer, if it was not 2xx

    def force_flush(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> bool:
        """Export what is buffered; returns within `timeout_s` (False if an exporter is still busy)."""
        return _bounded([p.force_flush for p in self._providers()], timeout_s)

    def shutdown(self, timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S) -> bool:
        """Flush and stop both providers; returns within `timeout_s` even with a hanging exporter. An
        export still retrying then is told to stop (what it had not sent is dropped); False then."""
        self.stopping = True
        finished = _bounded([p.shutdown for p in self._providers()], timeout_s)
        if not finished:  # without waiting: a replaced exporter's own shutdown might hang too
            _bounded([exporter.shutdown for exporter in self.exporters], 0.0)
        return finished

    def _providers(self) -> list[Any]:
        return [p for p in (self.tracer_provider, self.meter_provider) if p is not None]


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "true"


def _exporter_off(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() == "none"


def _session_noting_refusals(pipeline: OtlpPipeline) -> requests.Session | None:
    """A session for the OTLP/HTTP exporters that keeps `pipeline.refused` at the last answer if it was not 2xx
    (None after a success); None (the exporter's own) when a credential provider is configured."""
    if any(os.environ.get(name) for name in ENV_CREDENTIAL_PROVIDERS):
        return None

    def note(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        ok = 200 <= response.status_code < 300
        pipeline.refused = None if ok else Refusal(response.status_code, response.reason or "")

    session = requests.Session()
    session.hooks["response"].append(note)
    return session


_SIGNAL_PATHS = ("/v1/traces", "/v1/metrics")


def _signal_url(endpoint: str | None, path: str) -> str | None:
    """The signal's URL under the base URL `endpoint`; a signal's own URL given as the base (a user
    passing ``.../v1/traces``) stands for its base."""
    if endpoint is None:
        return None
    base = endpoint.rstrip("/")
    for signal in _SIGNAL_PATHS:
        base = base.removesuffix(signal)
    return base + path


def _resource(service_name: str | None, loop_id: str | None,
              attributes: Mapping[str, Any] | None) -> Resource:
    attrs: dict[str, Any] = dict(attributes or {})
    if service_name:
        attrs["service.name"] = service_name
    if loop_id:
        attrs[semconv.LOOP_ID] = loop_id
    return Resource.create(attrs)  # merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (ours win)


def build(*, service_name: str | None = None, loop_id: str | None = None,
          resource_attributes: Mapping[str, Any] | None = None, endpoint: str | None = None,
          headers: Mapping[str, str] | None = None, timeout_s: float | None = None,
          with_traces: bool = True, with_metrics: bool = True,
          span_exporter: SpanExporter | None = None, metric_exporter: MetricExporter | None = None,
          max_queue_size: int | None = None, max_export_batch_size: int | None = None,
          schedule_delay_s: float | None = None, export_interval_s: float | None = None) -> OtlpPipeline:
    """Build (without installing) SDK providers exporting over OTLP/HTTP.

    Unset arguments come from the standard variables: ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
    ``..._TRACES_ENDPOINT`` / ``..._METRICS_ENDPOINT``, ``..._HEADERS``, ``..._TIMEOUT``,
    ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_BSP_*``, ``OTEL_METRIC_EXPORT_*``.
    `endpoint` is the base URL (``/v1/traces`` and ``/v1/metrics`` are appended). `loop_id` puts
    ``ctxwatch.loop.id`` on the resource (one loop per process). Nothing is built for a signal
    whose ``OTEL_<SIGNAL>_EXPORTER`` is ``none``, nor at all when ``OTEL_SDK_DISABLED=true``.
    `span_exporter` / `metric_exporter` replace the OTLP exporters (they are wrapped all the same).
    """
    pipeline = OtlpPipeline()
    if _env_true(ENV_SDK_DISABLED):
        return pipeline
    resource = _resource(service_name, loop_id, resource_attributes)
    if with_metrics and not _exporter_off(ENV_METRICS_EXPORTER):
        inner = metric_exporter or OTLPMetricExporter(endpoint=_signal_url(endpoint, "/v1/metrics"),
                                                      headers=headers, timeout=timeout_s,
                                                      session=_session_noting_refusals(pipeline))
        wrapped = CountingMetricExporter(inner, _counting("export_metrics", pipeline))
        pipeline.exporters.append(wrapped)
        reader = PeriodicExportingMetricReader(
            wrapped, export_interval_millis=None if export_interval_s is None else export_interval_s * 1000)
        pipeline.meter_provider = MeterProvider(metric_readers=[reader], resource=resource,
                                                shutdown_on_exit=False)
    if with_traces and not _exporter_off(ENV_TRACES_EXPORTER):
        inner_spans = span_exporter or OTLPSpanExporter(endpoint=_signal_url(endpoint, "/v1/traces"),
                                                        headers=headers, timeout=timeout_s,
                                                        session=_session_noting_refusals(pipeline))
        provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        wrapped_spans = CountingSpanExporter(inner_spans, _counting("export_traces", pipeline))
        pipeline.exporters.append(wrapped_spans)
        provider.add_span_processor(BatchSpanProcessor(
            wrapped_spans, max_queue_size=max_queue_size, max_export_batch_size=max_export_batch_size,
            schedule_delay_millis=None if schedule_delay_s is None else schedule_delay_s * 1000))
        pipeline.tracer_provider = provider
    return pipeline


def _counting(stage: str, pipeline: OtlpPipeline) -> OnFailure:
    """A failure callback counting on the error counter of the pipeline's meter provider (the
    global one when the pipeline has none), looked up when a failure happens."""
    schema_url = semconv.genai_names().schema_url

    def on_failure(error: BaseException | str) -> None:
        counter = None  # the count in `failures` holds without it
        if not pipeline.stopping:
            try:
                counter = instruments_for(pipeline.meter_provider, VERSION, schema_url).telemetry_errors
            except Exception:  # noqa: BLE001
                counter = None
        record_failure(stage, error, counter)
    return on_failure


def _is_default_tracer_provider() -> bool:
    return isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _is_default_meter_provider() -> bool:
    """Whether no meter provider was set (the API's public types only: an SDK provider or the no-op one
    means the application set one; a provider of another API implementation that the application set is
    found by `_adopt`, which then keeps it)."""
    return not isinstance(metrics.get_meter_provider(), MeterProvider | metrics.NoOpMeterProvider)


def _adopt(provider: Any, set_global: Callable[[Any], None], get_global: Callable[[], Any],
           timeout_s: float) -> bool:
    """Make `provider` global; if another one won the race, shut ours down and report False."""
    set_global(provider)
    if get_global() is provider:
        return True
    _bounded([provider.shutdown], timeout_s)
    return False


def install(*, shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S, **options: Any) -> OtlpPipeline:
    """Build the OTLP pipeline for each signal the application has no provider for, and make it global.

    Providers the application already set are never replaced (that signal is then not built); a
    `loop_id` is then still the one guards that name none report (`ctxwatch.loop_ids`).
    The pipeline is shut down at interpreter exit within `shutdown_timeout_s`. Takes `build`'s
    keyword options.
    """
    set_process_loop_id(options.get("loop_id"))  # guards naming no loop id use it, whoever set the provider
    with_traces = options.pop("with_traces", True) and _is_default_tracer_provider()
    with_metrics = options.pop("with_metrics", True) and _is_default_meter_provider()
    pipeline = build(with_traces=with_traces, with_metrics=with_metrics, **options)
    if pipeline.meter_provider is not None:
        pipeline.installed_metrics = _adopt(pipeline.meter_provider, metrics.set_meter_provider,
                                            metrics.get_meter_provider, shutdown_timeout_s)
        if not pipeline.installed_metrics:
            pipeline.meter_provider = None
    if pipeline.tracer_provider is not None:
        pipeline.installed_traces = _adopt(pipeline.tracer_provider, trace.set_tracer_provider,
                                           trace.get_tracer_provider, shutdown_timeout_s)
        if not pipeline.installed_traces:
            pipeline.tracer_provider = None
    atexit.register(pipeline.shutdown, shutdown_timeout_s)
    return pipeline
