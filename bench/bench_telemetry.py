"""Benchmark: telemetry cost per mutation (`MutationTelemetry.start` + `MutationHandle.end`).

Measured in one run, on the agent's thread, per call, for each kind of guard decision:
  - baseline: a bare SDK span with 15 attributes (start_span + end) on the same provider;
  - ctxwatch with the SDK (BatchSpanProcessor + healthy exporter, MeterProvider with a periodic reader):
    an append (the common case: every turn of an agent is one), an applied compaction (a rewrite cycle:
    the span plus four histogram records), a deferral, a refusal (abort), the cycle the contraction
    alarm halts, and the stream of mutations the replay of a real Claude Code session produces
    (../shared/corpus; its own mix of appends and rewrites);
  - ctxwatch with the SDK and a span exporter that hangs forever (the batch queue fills and drops);
  - an applied compaction as agents run it, inside their sampled invoke_agent span (the SDK's default
    exemplar filter then keeps an exemplar per histogram record), and the same with exemplars off,
    beside a bare span under that parent;
  - ctxwatch with the OpenTelemetry API alone (a subprocess where the SDK cannot be imported and no
    provider is set), beside a bare API span with 15 attributes.
Prints min / median / mean / max in microseconds, each median's ratio to its baseline's, and whether it
meets the issue's target: median <= 150 us and <= 3x the bare span with the SDK; <= 10 us with the API
alone; hanging exporter within 2x of healthy.

    /work/devvenv/bin/python bench/bench_telemetry.py [--n 20000]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.context import attach, detach

from ctxwatch.report import Finding, Report
from ctxwatch.telemetry import MutationTelemetry

CHUNK = 500


def figures(kind: str, decision: str, findings: list[Finding], **more: Any) -> Report:
    """A report as the guard makes it for a 40-message context (hash distance: only on a rewrite cycle)."""
    base = dict(loop_id="loop-bench", kind=kind, decision=decision, findings=findings, pass_number=3, pass_cap=8,
                messages_before=40, messages_after=22, agent="support-bot", size_before=52_000, size_after=21_000,
                literals_before=35, duration_s=0.0011)
    return Report(**{**base, **more})


LOSS = Finding("literal_loss", "2 literals lost", "warn")
REPORTS = {
    "append": figures("append", "patch", [], messages_after=41, size_after=52_400),
    "applied compaction": figures("compact", "patch", [], hash_distance=0.27),
    "deferral": figures("prune", "defer", [Finding("prefix_identity", "alters message 2", "defer")],
                        deferred_id=4),
    # record 000: the compaction would orphan a tool result, with a literal-loss warning
    "refusal": figures("compact", "abort", [Finding("tool_pairing", "drops the result of call_7f3a", "abort"), LOSS],
                       literals_lost=2, orphans_tool_result=1),
    "halt (alarm)": figures("compact", "halt", [Finding("contraction", "d < r for 3 cycles", "halt"), LOSS],
                            hash_distance=0.04, literals_lost=2, contraction_state="contracting"),
}
BARE_ATTRS = {f"bench.attr_{i}": (i if i % 2 else f"value-{i}") for i in range(15)}
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
BARE, BARE_API = "bare SDK span, 15 attributes", "bare API span, 15 attributes"
BARE_UNDER_PARENT = "bare SDK span, under a sampled agent span"
HEADLINE = "refusal"
HANGING, API_ONLY_CASE = f"SDK, {HEADLINE}, hanging exporter", f"API only, {HEADLINE}"


def mutation(telemetry: MutationTelemetry, report: Report = REPORTS["refusal"]) -> Callable[[], None]:
    def run() -> None:
        telemetry.start(loop_id="loop-bench", kind=report.kind, agent="support-bot", pass_number=3,
                        pass_cap=8).end(report)
    return run


class _Recorder:
    """Stands in for `MutationTelemetry` in the replay backfill: keeps what it would emit, in order."""

    def __init__(self) -> None:
        self.emitted: list[tuple[dict[str, Any], Report]] = []

    def start(self, **start: Any) -> _Recorder._Pending:
        return self._Pending(self.emitted, start)

    class _Pending:
        def __init__(self, emitted: list, start: dict[str, Any]) -> None:
            self.emitted, self.start = emitted, start

        def end(self, report: Report) -> None:
            self.emitted.append((self.start, report))


def recorded_session() -> tuple[str, list[tuple[dict[str, Any], Report]]] | None:
    """The mutations the replay of the corpus's Claude Code session emits, or None without the corpus."""
    from ctxwatch.literals import LiteralRegistry
    from ctxwatch.replay import audit_session
    from ctxwatch.replay.backfill import Backfill

    path = next(iter(sorted(CORPUS.glob("claude-code__marot-spotter__*.jsonl"))), None)
    if path is None:
        return None
    recorder, registry = _Recorder(), LiteralRegistry()
    audit_session(path, registry=registry, observer_for=lambda audit: Backfill(
        recorder, lambda: None, loop_id=audit.loop_id, agent="claude-code", service="bench",  # type: ignore[arg-type]
        registry=registry))
    kinds = [report.kind for _, report in recorder.emitted]
    appends = kinds.count("append")
    return f"recorded session ({appends} appends, {len(kinds) - appends} rewrites)", recorder.emitted


def under(parent: Any, fn: Callable[[], None]) -> Callable[[], None]:
    """`fn` run with `parent` as the current span."""
    context = trace.set_span_in_context(parent)

    def run() -> None:
        token = attach(context)
        try:
            fn()
        finally:
            detach(token)
    return run


def stream(telemetry: MutationTelemetry, emitted: list[tuple[dict[str, Any], Report]]) -> Callable[[], None]:
    todo = itertools.cycle(emitted)

    def run() -> None:
        start, report = next(todo)
        telemetry.start(**start).end(report)
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
    from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
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

    def providers(exporter: SpanExporter, **meter_options: Any) -> tuple[TracerProvider, MeterProvider]:
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
        reader = PeriodicExportingMetricReader(Metrics(), export_interval_millis=60_000)
        return tracer_provider, MeterProvider(metric_readers=[reader], shutdown_on_exit=False, **meter_options)

    healthy_tp, healthy_mp = providers(Healthy())
    hanging_tp, hanging_mp = providers(Hanging())
    quiet_tp, quiet_mp = providers(Healthy(), exemplar_filter=AlwaysOffExemplarFilter())
    healthy = MutationTelemetry(healthy_tp, healthy_mp, environ={})
    hanging = MutationTelemetry(hanging_tp, hanging_mp, environ={})
    cases = {BARE: bare_span(healthy_tp.get_tracer("bench"))}
    cases.update({f"SDK, {name}": mutation(healthy, report) for name, report in REPORTS.items()})
    session = recorded_session()
    if session is not None:
        cases[f"SDK, {session[0]}"] = stream(healthy, session[1])
    cases[HANGING] = mutation(hanging)
    # as agents run it: inside their sampled invoke_agent span, where the SDK's default (trace-based)
    # exemplar filter keeps an exemplar for every histogram record
    applied = REPORTS["applied compaction"]
    agent_span = healthy_tp.get_tracer("agent").start_span("invoke_agent support-bot")
    cases[BARE_UNDER_PARENT] = under(agent_span, bare_span(healthy_tp.get_tracer("bench")))
    cases["SDK, applied compaction, under it"] = under(agent_span, mutation(healthy, applied))
    cases["SDK, applied compaction, under it, exemplars off"] = under(
        quiet_tp.get_tracer("agent").start_span("invoke_agent support-bot"),
        mutation(MutationTelemetry(quiet_tp, quiet_mp, environ={}), applied))
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
cases = {{b.BARE_API: b.bare_span(trace.get_tracer("bench")),
          b.API_ONLY_CASE: b.mutation(b.MutationTelemetry(environ={{}}))}}
print(json.dumps({{k: b.summary(v) for k, v in b.measure(cases, {n}).items()}}))
"""


def api_only_cases(n: int) -> dict[str, dict[str, float]]:
    code = API_ONLY.format(bench_dir=str(Path(__file__).resolve().parent), n=n)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)  # the hanging case drops spans, as designed
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="calls per case")
    n = parser.parse_args().n
    results = {**sdk_cases(n), **api_only_cases(n)}
    print(f"telemetry cost per mutation (start + end), {n} calls per case, microseconds;")
    print("ratio: the median over its baseline's median (the bare span of the same setting, or the healthy "
          "exporter); target: the issue's")
    print(f"{'case':50} {'min':>7} {'median':>7} {'mean':>7} {'max':>8} {'ratio':>6}  target")
    med = {name: s["median"] for name, s in results.items()}
    for name, s in results.items():
        base, limit = baseline(name, med)
        ratio, verdict = "", ""
        if base:
            ratio = f"{s['median'] / base:5.2f}x"
            verdict = f"<= {limit:g}x: {'met' if s['median'] / base <= limit else 'MISSED'}"
        if name == API_ONLY_CASE:
            verdict = f"<= 10 us: {'met' if s['median'] <= 10 else 'MISSED'}"
        elif name.startswith("SDK") and s["median"] > 150:
            verdict += "; > 150 us: MISSED"
        print(f"{name:50} {s['min']:7.2f} {s['median']:7.2f} {s['mean']:7.2f} {s['max']:8.1f} {ratio:>6}  {verdict}")


def baseline(name: str, med: dict[str, float]) -> tuple[float | None, float]:
    """The median a case is compared with, and the issue's limit on the ratio."""
    if name in (BARE, BARE_API, BARE_UNDER_PARENT):
        return None, 0
    if name == HANGING:
        return med[f"SDK, {HEADLINE}"], 2
    if name == API_ONLY_CASE:
        return med[BARE_API], 0
    return med[BARE_UNDER_PARENT if "under it" in name else BARE], 3


if __name__ == "__main__":
    main()
