"""The contract between the guard's own metrics and the monitor's: the same mutations, run through the
real `ContextGuard` with the real OpenTelemetry SDK, give the same figures and labels whether they are
read from the guard's metric instruments or from the monitor rebuilding them from the spans.

Both record by one rule (`ctxwatch.telemetry.fleet`); this test ties them together end to end: the
spans go over OTLP/HTTP to the monitor running as a subprocess, the guard's metrics are read by the
SDK's in-memory reader, and every counter series, and every histogram series' count, sum and buckets,
of every fleet instrument must be equal on both sides (no series on one side only). Besides two guarded
loops (one with a configured agent version, one without), a real Claude Code session of the corpus is
backfilled as ``replay --otlp`` does it: its version label and its tokens before each compaction
(``preTokens``) must come out the same on both sides too. An empty label value is no label (Prometheus).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from absorbing import run_absorbing_loop
from conftest import MonitorProcess
from corpus_files import claude_code_pre_tokens, claude_code_with_pre_tokens, jsonl
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from prometheus_client.parser import text_string_to_metric_families

from ctxwatch import semconv
from ctxwatch.contraction import DetectorConfig
from ctxwatch.guard import ContextGuard
from ctxwatch.literals import LiteralRegistry
from ctxwatch.replay.audit import audit_session
from ctxwatch.replay.backfill import session_backfill
from ctxwatch.telemetry import fleet
from ctxwatch.telemetry.mutation import MutationTelemetry

from conversations import assistant, call, result, system, user

SERVICE = "contract"
ABSORBER_VERSION = "1.4.2"
Series = dict[tuple[tuple[str, str], ...], float]


def _contracting_loop(telemetry: MutationTelemetry) -> None:
    """Applied compactions with hash distances and literal loss, until the alarm halts the loop."""
    guard = ContextGuard("loop-absorbing", agent="absorber", service=SERVICE, agent_version=ABSORBER_VERSION,
                         pass_cap=None,
                         enforce={"directive_colocation": "warn"},
                         detector=DetectorConfig(min_literals=1, enter_cycles=2), telemetry=telemetry)
    if run_absorbing_loop(guard, 7, lambda report: report.decision == "halt") is None:
        raise AssertionError("the absorbing loop never halted: the scenario no longer contracts")


def _refusing_loop(telemetry: MutationTelemetry) -> None:
    """Appends, an abort that orphans a tool pair, a deferral of a consumed-prefix rewrite, an undeclared
    prune and an undeclared reorder (named and order-checked by the guard)."""
    guard = ContextGuard("loop-refusing", agent="planner", service=SERVICE, telemetry=telemetry)
    history = [system(), user("list /srv"), assistant("", call("c1", "ls", path="/srv")),
               result("c1", "config.yaml run.sh"), assistant("two files"), user("read config.yaml")]
    guard.observe(history[:2], boundary=0)
    guard.apply(history[:4])  # an append
    guard.observe(history, boundary=0)
    guard.check(history[:3] + history[4:], kind="compact")  # drops the result of c1: abort, an orphan
    guard.observe(history, boundary=len(history))  # everything consumed
    guard.check([history[0], user("the files: config.yaml and run.sh"), *history[4:]], kind="compact")  # defer
    guard.check(history[:1] + history[4:])  # undeclared: the guard names it
    guard.check([history[0], history[1], history[5], history[4], *history[2:4]])  # an undeclared reorder


def _session_with_pre_tokens(corpus: Path) -> Path:
    """The shortest Claude Code session of the corpus with two compactions that record their tokens before."""
    files = claude_code_with_pre_tokens(corpus, compactions=2)
    assert files, "no Claude Code session with compactMetadata.preTokens in the corpus"
    return files[0]


def _recorded_version(path: Path) -> str:
    """The Claude Code version the session's records carry (read from the raw records)."""
    versions = {record["version"] for _, record in jsonl(path) if isinstance(record.get("version"), str)}
    assert len(versions) == 1, f"{path.name}: versions {versions}"
    return versions.pop()


def _backfilled_session(path: Path, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
    """`path` backfilled as ``replay --otlp`` does it (the file's version, its preTokens on the compactions),
    recording on the guard's instruments of `meter_provider` too."""
    telemetry = MutationTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider,
                                  capture_content=False)
    registry = LiteralRegistry()
    audit = audit_session(path, registry=registry, observer_for=lambda a: session_backfill(
        a, telemetry, tracer_provider.force_flush, agent="claude-code", service=SERVICE, registry=registry))
    assert audit.readable and audit.mutations, audit.error


def _guard_series(reader: InMemoryMetricReader) -> dict[str, Series]:
    """Every data point of the fleet instruments, as Prometheus samples: name -> labels -> value."""
    out: dict[str, Series] = {}
    wanted = {spec.name: spec for spec in fleet.COUNTERS + fleet.HISTOGRAMS}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                spec = wanted.get(metric.name)
                if spec is None:
                    continue
                name = semconv.prometheus_name(spec)
                for point in metric.data.data_points:
                    labels = {semconv.PROMETHEUS_LABELS[k]: str(v) for k, v in point.attributes.items()}
                    for sample, extra, value in _guard_samples(name, spec, point):
                        key = tuple(sorted({**labels, **extra}.items()))
                        out.setdefault(sample, {})[key] = value
    return out


def _guard_samples(name: str, spec: semconv.MetricSpec, point: object
                   ) -> Iterator[tuple[str, dict[str, str], float]]:
    if spec.instrument == "counter":
        yield name, {}, float(point.value)  # type: ignore[attr-defined]
        return
    yield name + "_count", {}, float(point.count)  # type: ignore[attr-defined]
    yield name + "_sum", {}, float(point.sum)  # type: ignore[attr-defined]
    running = 0
    for bound, count in zip([*point.explicit_bounds, math.inf], point.bucket_counts, strict=True):  # type: ignore[attr-defined]
        running += count
        yield name + "_bucket", {"le": _le(bound)}, float(running)


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def _monitor_series(text: str) -> dict[str, Series]:
    """The monitor's samples of the fleet families for this test's service (zero-valued ones left out)."""
    names = {semconv.prometheus_name(spec) for spec in fleet.COUNTERS + fleet.HISTOGRAMS}
    out: dict[str, Series] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            base = sample.name.removesuffix("_bucket").removesuffix("_count").removesuffix("_sum")
            if (sample.name not in names and base not in names) or sample.labels.get("service") != SERVICE:
                continue
            labels = {name: value for name, value in sample.labels.items() if value}
            if "le" in labels:
                labels["le"] = _le(float(labels["le"]))
            out.setdefault(sample.name, {})[tuple(sorted(labels.items()))] = float(sample.value)
    return out


def _nonzero_histograms(series: dict[str, Series]) -> dict[str, Series]:
    """`series` without the histogram series whose count is 0 (the guard never reports those)."""
    empty = {key for name, points in series.items() if name.endswith("_count") for key, v in points.items() if not v}
    return {name: {key: v for key, v in points.items()
                   if tuple(kv for kv in key if kv[0] != "le") not in empty} for name, points in series.items()}


def test_the_guard_and_the_monitor_produce_the_same_figures_and_labels(tmp_path: Path, corpus: Path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--grpc-port", "off").start()
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
    replay_provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    replay_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    session = _session_with_pre_tokens(corpus)
    try:
        telemetry = MutationTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
        _contracting_loop(telemetry)
        _refusing_loop(telemetry)
        _backfilled_session(session, replay_provider, meter_provider)
        tracer_provider.force_flush()
        assert replay_provider.force_flush()
        guard = _nonzero_histograms(_guard_series(reader))
        seen = _nonzero_histograms(_monitor_series(monitor.get("/metrics").text))
        seen = {name: points for name, points in seen.items() if any(points.values())}
        guard = {name: points for name, points in guard.items() if any(points.values())}
        counters = {semconv.prometheus_name(spec) for spec in fleet.COUNTERS}
        for figures in (guard, seen):  # counters: the monitor's zero series are not events
            for name in counters & set(figures):
                figures[name] = {key: v for key, v in figures[name].items() if v}
        # every figure the scenario should produce is there (so the comparison below compares something)
        assert {"ctxwatch_mutations_total", "ctxwatch_lost_literals_total", "ctxwatch_orphaned_tool_parts_total",
                "ctxwatch_deferrals_total", "ctxwatch_invariant_violations_total", "ctxwatch_invariant_warnings_total",
                "ctxwatch_rewrite_hash_distance_count", "ctxwatch_rewrite_literal_loss_rate_sum",
                "ctxwatch_rewrite_pass_number_bucket", "ctxwatch_rewrite_tokens_before_bucket"} <= set(guard)
        decisions = {dict(key)["decision"] for key in guard["ctxwatch_mutations_total"]}
        assert decisions == {"patch", "abort", "defer", "halt"}
        versions = {dict(key).get("agent_version") for key in guard["ctxwatch_mutations_total"]}
        assert versions == {ABSORBER_VERSION, _recorded_version(session), None}
        tokens = guard["ctxwatch_rewrite_tokens_before_sum"]
        pre_tokens = claude_code_pre_tokens(session)
        compacted = {key: v for key, v in tokens.items() if dict(key)["kind"] == "compact"}
        assert list(compacted.values()) == [sum(pre_tokens)] and dict(next(iter(compacted)))["agent"] == "claude-code"
        assert set(seen) == set(guard)
        for name, points in guard.items():
            assert set(seen[name]) == set(points), name
            for key, value in points.items():
                assert math.isclose(seen[name][key], value, rel_tol=1e-9, abs_tol=1e-12), (name, key)
    finally:
        tracer_provider.shutdown()
        replay_provider.shutdown()
        meter_provider.shutdown()
        monitor.close()
