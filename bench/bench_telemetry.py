"""Benchmark: telemetry cost per mutation (`MutationTelemetry.start` + `MutationHandle.end`).

Measured in one run, on the agent's thread, per call:
  - baseline: a bare SDK span with 15 attributes (start_span + end) on the same provider;
  - ctxwatch with the SDK: BatchSpanProcessor + healthy exporter, MeterProvider with a periodic reader;
  - ctxwatch with the SDK and a span exporter that hangs forever (the batch queue fills and drops);
  - ctxwatch with the OpenTelemetry API alone (a subprocess where the SDK cannot be imported and no
    provider is set), beside a bare API span with 15 attributes.
Prints min / median / mean / max in microseconds and the ratios. Targets (issue 4): median <= 150 us with
the SDK and <= 3x the bare span; <= 10 us with the API alone; hanging exporter within 2x of healthy.

    /work/devvenv/bin/python bench/bench_telemetry.py [--n 20000]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from ctxwatch.report import Finding, Report
from ctxwatch.telemetry import MutationTelemetry

CHUNK = 500

# a refusal: the compaction would orphan a tool result (record 000), with a literal-loss warning
REPORT = Report(loop_id="loop-bench", kind="compact", decision="abort", pass_number=3, pass_cap=8,
                findings=[Finding("tool_pairing", "drops the result of call_7f3a", "abort"),
                          Finding("literal_loss", "2 literals lost", "warn")],
                messages_before=40, messages_after=22, agent="support-bot", size_before=52_000,
                size_after=21_000, hash_distance=0.27, literals_before=35, literals_lost=2,
                orphans_tool_result=1, duration_s=0.0011)
# the common case: an applied compaction, no findings
APPLIED = Report(loop_id="loop-bench", kind="compact", decision="patch", pass_number=3, pass_cap=8,
                 findings=[], messages_before=40, messages_after=22, agent="support-bot", size_before=52_000,
                 size_after=21_000, hash_distance=0.27, literals_before=35, duration_s=0.0011)
BARE_ATTRS = {f"bench.attr_{i}": (i if i % 2 else f"value-{i}") for i in range(15)}


def mutation(telemetry: MutationTelemetry, report: Report = REPORT) -> Callable[[], None]:
    def run() -> None:
        telemetry.start(loop_id="loop-bench", kind="compact", agent="support-bot", pass_number=3,
                        pass_cap=8).end(report)
    return run


def bare_span(tracer) -> Callable[[], None]:
    def run() -> None:
        tracer.start_span("bare", attributes=BARE_ATTRS).end()
    return run


def measure(cases: dict[str, Callable[[], None]], n: int) -> dict[str, list[float]]:
    """Per-call microseconds; cases are interleaved in chunks so they share the machine's noise."""
    out: dict[str, list[float]] = {name: [] for name in cases}
    clock = time.perf_counter_ns
    for fn in cases.values():  # warm up
        for _ in range(CHUNK):
            fn()
    for _ in range(max(1, n // CHUNK)):
        for name, fn in cases.items():
            samples = out[name]
            for _ in range(CHUNK):
                t0 = clock()
                fn()
                samples.append((clock() - t0) / 1000)
        gc.collect()
    return out


def summary(samples: list[float]) -> dict[str, float]:
    return {"min": min(samples), "median": statistics.median(samples), "mean": statistics.fmean(samples),
            "max": max(samples)}


def sdk_cases(n: int) -> dict[str, dict[str, float]]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Healthy(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    class Hanging(SpanExporter):
        release = threading.Event()

        def export(self, spans):
            self.release.wait()
            return SpanExportResult.FAILURE

    class Metrics(MetricExporter):
        def export(self, metrics_data, timeout_millis=10_000, **kwargs):
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis=10_000):
            return True

        def shutdown(self, timeout_millis=30_000, **kwargs):
            pass

    def providers(exporter: SpanExporter) -> tuple[TracerProvider, MeterProvider]:
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        reader = PeriodicExportingMetricReader(Metrics(), export_interval_millis=60_000)
        return tracer_provider, MeterProvider(metric_readers=[reader], shutdown_on_exit=False)

    healthy_tp, healthy_mp = providers(Healthy())
    hanging_tp, hanging_mp = providers(Hanging())
    healthy = MutationTelemetry(healthy_tp, healthy_mp, environ={})
    hanging = MutationTelemetry(hanging_tp, hanging_mp, environ={})
    cases = {
        "bare SDK span, 15 attributes": bare_span(healthy_tp.get_tracer("bench")),
        "ctxwatch, SDK, refusal": mutation(healthy),
        "ctxwatch, SDK, applied compaction": mutation(healthy, APPLIED),
        "ctxwatch, SDK, refusal, hanging exp.": mutation(hanging),
    }
    try:
        return {name: summary(s) for name, s in measure(cases, n).items()}
    finally:
        Hanging.release.set()


API_ONLY = """
import importlib.abc, json, sys
class NoSdk(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry.sdk" or name.startswith("opentelemetry.sdk."):
            raise ImportError("API only")
sys.meta_path.insert(0, NoSdk())
sys.path.insert(0, {bench_dir!r})
import bench_telemetry as b
from opentelemetry import trace
cases = {{"bare API span, 15 attributes": b.bare_span(trace.get_tracer("bench")),
          "ctxwatch, API only": b.mutation(b.MutationTelemetry(environ={{}}))}}
print(json.dumps({{k: b.summary(v) for k, v in b.measure(cases, {n}).items()}}))
"""


def api_only_cases(n: int) -> dict[str, dict[str, float]]:
    from pathlib import Path
    code = API_ONLY.format(bench_dir=str(Path(__file__).resolve().parent), n=n)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="calls per case")
    n = parser.parse_args().n
    results = {**sdk_cases(n), **api_only_cases(n)}
    print(f"telemetry cost per mutation (start + end), {n} calls per case, microseconds")
    print(f"{'case':38} {'min':>8} {'median':>8} {'mean':>8} {'max':>9}")
    for name, s in results.items():
        print(f"{name:38} {s['min']:8.2f} {s['median']:8.2f} {s['mean']:8.2f} {s['max']:9.1f}")
    med = {name: s["median"] for name, s in results.items()}
    bare, refusal = med["bare SDK span, 15 attributes"], med["ctxwatch, SDK, refusal"]
    print("medians; targets: <= 150 us and <= 3x the bare span with the SDK, <= 10 us with the API alone")
    print(f"ratio SDK refusal / bare SDK span:            {refusal / bare:5.2f}x")
    applied = med["ctxwatch, SDK, applied compaction"]
    print(f"ratio SDK applied compaction / bare SDK span: {applied / bare:5.2f}x")
    print(f"ratio hanging / healthy exporter (refusal):   "
          f"{med['ctxwatch, SDK, refusal, hanging exp.'] / refusal:5.2f}x   (target <= 2x)")
    print(f"ratio API only / bare API span:               "
          f"{med['ctxwatch, API only'] / med['bare API span, 15 attributes']:5.2f}x")


if __name__ == "__main__":
    main()
