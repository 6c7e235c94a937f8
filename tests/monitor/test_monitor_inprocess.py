"""The monitor's validation, state engine and HTTP receiver in process (no subprocess, no port).

`records.validate` is called on decoded spans, `Engine.apply` on an in-memory engine, and the app itself
through FastAPI's `TestClient`, so a failure names the layer that broke. The same contracts run end to
end against a real uvicorn subprocess in test_end_to_end.py, test_bad_input.py and test_poison_spans.py.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import contracting_cycles, healthy_cycles, metric_value, samples
from fastapi.testclient import TestClient
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from test_bad_input import mutation, request
from test_otlp_decoding import otlp_json

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector
from ctxwatch_monitor.app import RequestMetrics, create_app
from ctxwatch_monitor.config import MEMORY_STATE, MonitorConfig
from ctxwatch_monitor.engine import Engine
from ctxwatch_monitor.instruments import Instruments
from ctxwatch_monitor.otlp_codec import RawSpan, decode
from ctxwatch_monitor.records import RESOURCE_KEYS, SPAN_KEYS, Rejected, validate
from ctxwatch_monitor.wire import JSON, PROTOBUF

WHERE = "resourceSpans[0].scopeSpans[0].spans[0]"


def raw(resource: dict[str, Any] | None = None, **attrs: Any) -> RawSpan:
    return RawSpan(attrs, resource or {}, 1, WHERE)


def spans_of(*span_attrs: dict[str, Any], encoding: str = PROTOBUF) -> list[RawSpan]:
    body = request(*span_attrs)
    return decode(body if encoding == PROTOBUF else otlp_json(body), encoding, SPAN_KEYS, RESOURCE_KEYS)


# --- validation -------------------------------------------------------------------------------------------

def test_a_valid_mutation_span_is_a_record_with_its_figures() -> None:
    (span,) = spans_of(mutation("valid", **{semconv.EPISODE: 2, semconv.SEQUENCE: 5}))
    record = validate(span)
    assert record is not None
    assert (record.loop_id, record.kind, record.decision, record.d) == ("valid", "compact", "patch", 0.3)
    assert (record.before, record.lost, record.loss_rate, record.episode, record.sequence) == (10, 1, 0.1, 2, 5)
    assert record.violations == ["literal_loss"] and record.service == "fuzz"  # from the resource


def test_a_span_without_a_mutation_kind_is_ignored() -> None:
    assert validate(raw(**{semconv.LOOP_ID: "llm-call", "gen_ai.operation.name": "chat"})) is None


def test_the_loop_id_falls_back_to_the_resource() -> None:
    span = raw({semconv.LOOP_ID: "from-resource"}, **{semconv.MUTATION_KIND: "append", semconv.DECISION: "patch"})
    record = validate(span)
    assert record is not None and record.loop_id == "from-resource"


@pytest.mark.parametrize("overrides,reason", [
    ({semconv.LITERALS_BEFORE: -1}, f"attribute {semconv.LITERALS_BEFORE} must be >= 0, got -1"),
    ({semconv.HASH_DISTANCE: float("nan")}, f"attribute {semconv.HASH_DISTANCE} must be in [0, 1], got nan"),
    ({semconv.HASH_DISTANCE: 1.5}, "must be in [0, 1], got 1.5"),
    ({semconv.EPISODE: "3"}, f"attribute {semconv.EPISODE} must be an int, got string"),
    ({semconv.DECISION: "maybe"}, f"attribute {semconv.DECISION} must be one of"),
    ({semconv.DECISION: None}, "got nothing"),
    ({semconv.LITERALS_LOST: 11}, f"{semconv.LITERALS_LOST} (11) exceeds {semconv.LITERALS_BEFORE} (10)"),
    ({semconv.SEQUENCE: 0}, f"attribute {semconv.SEQUENCE} must be >= 1, got 0"),
    ({semconv.LOOP_ID: None}, f"no {semconv.LOOP_ID} on the span or its resource"),
    ({semconv.LOOP_ID: "x" * 257}, "is 257 characters long (at most 256)"),
    ({semconv.GUARD_INSTANCE: "x" * 65}, f"attribute {semconv.GUARD_INSTANCE} is 65 characters long (at most 64)"),
    ({semconv.GUARD_INSTANCE: 7}, f"attribute {semconv.GUARD_INSTANCE} must be a string, got int"),
    ({semconv.VIOLATIONS: [1]}, "must be a string array, got array"),
    ({semconv.MUTATION_KIND: ""}, f"attribute {semconv.MUTATION_KIND} is empty"),
])
def test_an_invalid_mutation_span_is_rejected_naming_where_and_what(overrides: dict[str, Any], reason: str) -> None:
    attrs = {k: v for k, v in {**mutation("invalid"), **overrides}.items() if v is not None}
    with pytest.raises(Rejected) as caught:
        validate(raw({"service.name": "svc"}, **attrs))
    assert str(caught.value).startswith(WHERE + ": ") and reason in str(caught.value), str(caught.value)


def test_a_span_the_decoder_could_not_read_is_rejected_with_its_reason() -> None:
    with pytest.raises(Rejected, match=r"spans\[0\]: the span cannot be read \(x\)"):
        validate(RawSpan({}, {}, 0, WHERE, "the span cannot be read (x)"))


# --- the state engine ---------------------------------------------------------------------------------------

def _cycle(loop_id: str, d: float, before: int, lost: int, sequence: int, state: str = "healthy") -> dict[str, Any]:
    return mutation(loop_id, **{semconv.HASH_DISTANCE: d, semconv.LITERALS_BEFORE: before,
                                semconv.LITERALS_LOST: lost, semconv.SEQUENCE: sequence, semconv.VIOLATIONS: [],
                                semconv.CONTRACTION_STATE: state})


def test_apply_counts_accepted_rejected_and_ignored_spans(engine: Engine) -> None:
    spans = spans_of(mutation("counted"), mutation("counted", **{semconv.DECISION: "maybe"}),
                     {semconv.LOOP_ID: "counted", "gen_ai.operation.name": "chat"})
    result = engine.apply(spans)
    assert (result.accepted, result.rejected, result.ignored) == (1, 1, 1)
    assert result.message.startswith("1 span(s) rejected: resourceSpans[0].scopeSpans[0].spans[1]: ")
    loop = engine.store.get("counted")
    assert loop is not None and loop.cycles == 1


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
def test_the_engine_runs_the_guards_detector_and_agrees_with_it(engine: Engine, encoding: str) -> None:
    """A contracting loop's cycles, in one request per cycle: the monitor's detector enters contracting at the
    cycle the guard's own detector does, and a healthy loop beside it stays healthy."""
    guard = ContractionDetector()
    entered_at = None
    for i, (d, before, lost) in enumerate(contracting_cycles(), 1):
        verdict = guard.update(d, before, lost)
        entered_at = entered_at or (i if verdict.entered else None)
        result = engine.apply(spans_of(_cycle("absorbing", d, before, lost, i, verdict.state),
                                       _cycle("steady", *healthy_cycles(i)[-1], i), encoding=encoding))
        assert (result.accepted, result.rejected) == (2, 0), result.message
        if entered_at == i:
            break
    absorbing, steady = engine.store.get("absorbing"), engine.store.get("steady")
    assert entered_at is not None and absorbing is not None and steady is not None
    assert absorbing.state == "contracting" and absorbing.onset == guard.onset
    assert absorbing.cycles == entered_at
    assert steady.state == "healthy" and steady.cycles == entered_at


def test_spans_ahead_of_a_missing_one_wait_for_it(engine: Engine) -> None:
    engine.apply(spans_of(_cycle("ordered", 0.4, 30, 0, 1)))
    engine.apply(spans_of(_cycle("ordered", 0.4, 30, 0, 3)))
    loop = engine.store.get("ordered")
    assert loop is not None and loop.cycles == 1 and "ordered" in engine.waiting
    engine.apply(spans_of(_cycle("ordered", 0.4, 30, 0, 2)))
    assert loop.cycles == 3 and "ordered" not in engine.waiting


def test_a_guard_cycle_at_the_int64_limit_is_kept_saturated_not_a_crash(engine: Engine) -> None:
    """Regression: an int64-max ctxwatch.contraction.cycle once made the history entry unpackable (struct.error),
    so the held span was retried and failed at every gap expiry (found by test_poison_spans under load). The span
    is unsequenced, so its count is followed at once (a numbered span's count is followed only past a gap)."""
    top = 2**63 - 1
    result = engine.apply(spans_of(mutation("int64-cycle", **{semconv.CONTRACTION_CYCLE: top})))
    assert (result.accepted, result.rejected) == (1, 0)
    loop = engine.store.get("int64-cycle")
    assert loop is not None and loop.cycles == top and loop.cycles_in_order()[-1].cycle == 2**32 - 1


# --- the HTTP receiver (TestClient) ------------------------------------------------------------------------

@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(create_app(MonitorConfig(state=MEMORY_STATE))) as test_client:
        yield test_client


@pytest.mark.parametrize("encoding", [PROTOBUF, JSON])
def test_an_export_with_one_invalid_span_is_a_partial_success(client: TestClient, encoding: str) -> None:
    body = request(mutation("http-ok"), mutation("http-bad", **{semconv.HASH_DISTANCE: 2.0}))
    content_type = "application/x-protobuf" if encoding == PROTOBUF else "application/json"
    response = client.post("/v1/traces", content=body if encoding == PROTOBUF else otlp_json(body),
                           headers={"Content-Type": content_type})
    assert response.status_code == 200 and response.headers["content-type"] == content_type
    if encoding == PROTOBUF:
        partial = ExportTraceServiceResponse.FromString(response.content).partial_success
        rejected, message = partial.rejected_spans, partial.error_message
    else:
        partial_json = response.json()["partialSuccess"]
        rejected, message = int(partial_json["rejectedSpans"]), partial_json["errorMessage"]
    assert rejected == 1 and "spans[1]" in message and semconv.HASH_DISTANCE in message
    assert client.get("/api/loops/http-ok").status_code == 200
    assert client.get("/api/loops/http-bad").status_code == 404
    metrics = client.get("/metrics").text
    assert metric_value(metrics, "ctxwatch_monitor_spans_accepted_total") == 1
    assert metric_value(metrics, "ctxwatch_monitor_spans_rejected_total") == 1


def test_an_unreadable_request_is_a_400_naming_the_field_in_both_encodings(client: TestClient) -> None:
    response = client.post("/v1/traces", content=b'{"resourceSpans": [{"scopeSpans": 5}]}',
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "resourceSpans[0].scopeSpans must be an array" in response.json()["message"]
    assert response.json()["details"][0]["fieldViolations"][0]["field"] == "resourceSpans[0].scopeSpans"
    response = client.post("/v1/traces", content=b"\x0a\x05\x12\x03\x12\x09\x00",
                           headers={"Content-Type": "application/x-protobuf"})
    assert response.status_code == 400
    status = status_pb2.Status.FromString(response.content)
    violation = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(violation) and violation.field_violations[0].field.startswith("resourceSpans[0]")
    metrics = client.get("/metrics").text
    assert metric_value(metrics, "ctxwatch_monitor_decode_errors_total", encoding="json") == 1
    assert metric_value(metrics, "ctxwatch_monitor_decode_errors_total", encoding="protobuf") == 1


def test_the_request_counters_code_label_is_a_closed_set(client: TestClient) -> None:
    """Statuses the monitor answers are their own code; any other status is one overflow value."""
    assert client.get("/api/loops/nobody").status_code == 404
    assert client.delete("/v1/traces").status_code == 405
    metrics = client.get("/metrics").text
    assert metric_value(metrics, "ctxwatch_monitor_requests_total", handler="api", code="404") == 1
    assert metric_value(metrics, "ctxwatch_monitor_requests_total", handler="traces", code="405") == 1
    instruments = Instruments(8)

    async def answer(scope: Any, receive: Any, send: Any) -> None:  # whatever status the path names
        await send({"type": "http.response.start", "status": int(scope["path"][1:]), "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def ignore(message: Any) -> None:
        return None

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    middleware = RequestMetrics(answer, instruments)
    for status in (200, 418, 299, 599, 1000):
        asyncio.run(middleware({"type": "http", "path": f"/{status}"}, receive, ignore))
    text = instruments.metric_set.render(None)[0].decode()
    counted = {s.labels["code"]: s.value for s in samples(text) if s.name == "ctxwatch_monitor_requests_total"}
    assert counted == {"200": 1, semconv.OVERFLOW: 4}


def test_an_unsupported_media_type_is_a_415(client: TestClient) -> None:
    response = client.post("/v1/traces", content=json.dumps({}), headers={"Content-Type": "text/plain"})
    assert response.status_code == 415
