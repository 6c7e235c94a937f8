"""Telemetry fails open (DESIGN.md "Checks fail closed ... telemetry fails open"): an SDK that raises,
a broken provider, a bad report — nothing reaches the agent, every error is counted; and with the
OpenTelemetry API alone (no SDK importable) the guard's telemetry runs silently."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from ctxwatch import semconv
from ctxwatch.report import Finding, Report
from ctxwatch.telemetry import MutationTelemetry, error_count


class Exploding(SpanProcessor):
    def __init__(self, on: str) -> None:
        self.on = on

    def on_start(self, span, parent_context=None) -> None:
        if self.on == "start":
            raise RuntimeError("processor down")

    def on_end(self, span) -> None:
        if self.on == "end":
            raise RuntimeError("processor down")


class BrokenProvider:
    def get_tracer(self, *args, **kwargs):
        raise RuntimeError("no tracer")

    def get_meter(self, *args, **kwargs):
        raise RuntimeError("no meter")


def a_report() -> Report:
    return Report(loop_id="loop-1", kind="compact", decision="abort",
                  findings=[Finding("tool_pairing", "drops call_7f3a's result", "abort")],
                  messages_before=9, messages_after=5, pass_number=1, pass_cap=4, orphans_tool_use=1)


def error_points(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    return {dict(p.attributes)[semconv.TELEMETRY_STAGE]: p.value
            for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == semconv.TELEMETRY_ERRORS.name for p in m.data.data_points}


def telemetry_with(processor: SpanProcessor) -> tuple[MutationTelemetry, InMemoryMetricReader]:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    reader = InMemoryMetricReader()
    return MutationTelemetry(provider, MeterProvider(metric_readers=[reader]), environ={}), reader


def test_a_span_processor_raising_at_end_is_counted_and_metrics_still_recorded():
    telemetry, reader = telemetry_with(Exploding("end"))
    before = error_count("end")
    telemetry.start(loop_id="loop-1", kind="compact").end(a_report())
    assert error_count("end") == before + 1
    assert error_points(reader) == {"end": 1}
    names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert "ctxwatch.mutations" in names


def test_a_span_processor_raising_at_start_is_counted_and_metrics_still_recorded():
    telemetry, reader = telemetry_with(Exploding("start"))
    before = error_count("start")
    handle = telemetry.start(loop_id="loop-1", kind="prune")
    handle.end(a_report())
    assert handle.span is None  # no span came out of the broken processor; the agent saw nothing
    assert error_count("start") == before + 1 and error_points(reader) == {"start": 1}
    names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert "ctxwatch.mutations" in names


def test_broken_providers_never_reach_the_agent():
    before = error_count()
    telemetry = MutationTelemetry(BrokenProvider(), BrokenProvider(), environ={})
    telemetry.start(loop_id="l", kind="compact").end(a_report())
    assert error_count() == before + 1  # counted once, at construction; then a no-op tracer


def test_a_bad_report_is_counted_and_a_second_end_does_nothing():
    telemetry, reader = telemetry_with(Exploding("none"))
    before = error_count("end")
    handle = telemetry.start(loop_id="l", kind="compact")
    handle.end(None)  # type: ignore[arg-type]
    assert handle.span is None
    assert error_count("end") > before
    handle.end(a_report())  # a second end does nothing
    assert handle.span is None
    assert error_points(reader)["end"] == error_count("end") - before


API_ONLY = textwrap.dedent("""
    import importlib.abc, json, sys

    class NoSdk(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry.sdk" or name.startswith("opentelemetry.sdk."):
                raise ImportError("the base install has no OpenTelemetry SDK")
            return None

    sys.meta_path.insert(0, NoSdk())
    from ctxwatch.report import Finding, Report
    from ctxwatch.telemetry import MutationTelemetry, error_count

    telemetry = MutationTelemetry()
    recording = []
    for i in range(200):
        handle = telemetry.start(loop_id="loop-1", kind="compact", agent="bot", pass_number=i)
        handle.end(Report(loop_id="loop-1", kind="compact", decision="abort", pass_number=i,
                          pass_cap=None, findings=[Finding("order", "reordered", "abort")],
                          messages_before=3, messages_after=2))
        recording.append(handle.span is not None)  # no span is even built without an SDK
    print(json.dumps({"errors": error_count(), "recording": any(recording),
                      "sdk_loaded": any(m.startswith("opentelemetry.sdk") for m in sys.modules)}))
""")


def test_with_the_api_alone_spans_do_not_record_and_nothing_fails():
    out = subprocess.run([sys.executable, "-c", API_ONLY], capture_output=True, text=True, timeout=60,
                         check=True)
    assert json.loads(out.stdout) == {"errors": 0, "recording": False, "sdk_loaded": False}
