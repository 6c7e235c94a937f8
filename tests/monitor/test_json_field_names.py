"""OTLP/JSON with the original (snake_case) field names and enum names is read as the Collector reads it.

The OTLP specification tells senders to write lowerCamelCase keys and enum numbers; the OpenTelemetry
Collector's OTLP receiver reads both names of every field and enums by number or name (docs/monitor.md,
"The OTLP receiver"), and so does the monitor, by its fast reader: the same spans written either way give
the same loops, and an unknown enum name is read as 0, as the Collector reads it (json_format leaves it
unset): none of them by the slow path (`ctxwatch_monitor_slow_path_reads_total` stays 0), none refused.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from conftest import MonitorProcess, metric_value
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_bad_input import mutation, request

from ctxwatch import semconv

JSON = {"Content-Type": "application/json"}
VOLATILE = ("first_seen", "last_seen", "loop_id", "history")


def written(loop_id: str, *, original_names: bool) -> bytes:
    """Five numbered spans of a loop (kind INTERNAL, status ERROR on the refusal) in OTLP/JSON: as the OTLP
    specification writes it, or with the original field names and enum names (protobuf's JSON mapping)."""
    message = ExportTraceServiceRequest.FromString(request(*[
        mutation(loop_id, **{semconv.SEQUENCE: s, semconv.DECISION: "abort" if s == 3 else "patch"})
        for s in range(1, 6)]))
    for sequence, span in enumerate(message.resource_spans[0].scope_spans[0].spans, 1):
        span.kind = span.SPAN_KIND_INTERNAL
        span.status.code = span.status.STATUS_CODE_ERROR if sequence == 3 else span.status.STATUS_CODE_UNSET
    document: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=original_names,
                                                         use_integers_for_enums=not original_names)
    resource_spans = document["resource_spans" if original_names else "resourceSpans"]
    for span in resource_spans[0]["scope_spans" if original_names else "scopeSpans"][0]["spans"]:
        for key in ("trace_id", "span_id") if original_names else ("traceId", "spanId"):
            span[key] = base64.b64decode(span[key]).hex()  # ids in hex, as OTLP/JSON writes them
    return json.dumps(document).encode()


def test_snake_case_names_and_enum_names_are_read_like_the_specs_spelling_by_the_fast_reader(
        tmp_path: Path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3").start()
    try:
        spec, original = written("camel", original_names=False), written("snake", original_names=True)
        assert b'"resource_spans"' in original and b'"SPAN_KIND_INTERNAL"' in original
        assert b'"resourceSpans"' in spec and b'"SPAN_KIND' not in spec
        for body in (spec, original):
            answer = monitor.post("/v1/traces", content=body, headers=JSON)
            assert answer.status_code == 200 and answer.json() == {}, answer.text
        camel, snake = (monitor.get(f"/api/loops/{loop}").json() for loop in ("camel", "snake"))
        assert camel["sequence"] == 5 and camel["last_refusal"]["sequence"] == 3
        assert {k: v for k, v in camel.items() if k not in VOLATILE} == \
            {k: v for k, v in snake.items() if k not in VOLATILE}

        unknown = json.loads(original)
        unknown["resource_spans"][0]["scope_spans"][0]["spans"][0]["kind"] = "SPAN_KIND_FROM_THE_FUTURE"
        answer = monitor.post("/v1/traces", content=json.dumps(unknown).encode(), headers=JSON)
        assert answer.status_code == 200 and answer.json() == {}  # a duplicate now, but read, not refused
        text = monitor.get("/metrics").text
        assert metric_value(text, "ctxwatch_monitor_spans_rejected_total") == 0
        assert metric_value(text, "ctxwatch_monitor_slow_path_reads_total", encoding="json") == 0
    finally:
        monitor.close(grace_s=30.0)
