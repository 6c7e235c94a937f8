"""Record 003 over the wire, opaque provider compactions (review F1): the real guard (OpenAI Responses
items, the real OpenTelemetry SDK and OTLP/HTTP exporter) sends its spans to the monitor running as a
subprocess. A compaction into OpenAI's opaque ``compaction`` item carries ``ctxwatch.literals.hidden``
and neither a lost count nor a hash distance: the monitor feeds its detector no cycle for it (as the
guard's own detector), shows its r as unknown (null), and ends with the guard's very detector state; a
readable rewrite between them is a cycle on both sides, with its r."""

from __future__ import annotations

from conftest import MonitorProcess
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from responses_orders import compaction, turns, user

from ctxwatch import ContextGuard
from ctxwatch.telemetry.mutation import MutationTelemetry


def test_opaque_compactions_reach_the_monitor_as_no_cycle_with_r_unknown(monitor: MonitorProcess) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "opaque"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
    guard = ContextGuard("oa-opaque", agent="orders", format="openai_responses",
                         telemetry=MutationTelemetry(tracer_provider=provider))
    items: list[dict] = []
    for r in range(5):
        items = items + turns(range(8 * r, 8 * r + 8))
        guard.observe(items)
        if r == 2:  # the agent's own readable summary: a cycle, its loss in the clear
            proposal = [user(f"Summary: orders up to ORD-{1000 + 8 * r + 7} looked up.")]
        else:
            proposal = [i for i in items if i.get("role") == "user"] + [compaction(r)]
        report, items = guard.resolve(proposal, kind="compact")
        assert report.decision == "patch", report.explain()
    provider.force_flush()
    assert guard.detector.cycle == 1
    detail = monitor.get(f"/api/loops/{guard.loop_id}").json()
    assert detail["detector"] == guard.detector.to_dict()
    assert detail["cycles"] == 1 and detail["state"] == "healthy"
    compacts = [e for e in detail["history"] if e["kind"] == "compact"]
    assert len(compacts) == 5
    opaque = [e for e in compacts if e["cycle"] is None]
    assert len(opaque) == 4 and all(e["r"] is None and e["d"] is None and e["literals_lost"] == 0 for e in opaque)
    (readable,) = [e for e in compacts if e["cycle"] is not None]
    assert readable["d"] is not None and readable["r"] > 0
    provider.shutdown()
