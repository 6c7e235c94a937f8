"""One span nested deeper than anything reads it never costs the other spans of its request (review F6).

A real monitor (a subprocess: uvicorn on 127.0.0.1) is sent, in one request, a valid span from each of two
services and, between them, a span of a third whose attribute value is a kvlist nested 400 deep (1,600 levels
of JSON: more than `json.loads` reads): the answer is 200 with that one span rejected in `partial_success`,
naming it and its attribute, and the two valid spans are stored and counted. The same in protobuf, and for a
value that `json.loads` reads but json_format chokes on quoting (it was a 500). The limit is the same in both
encodings (protobuf's: 100 messages below the span). Reading such a body again is charged to the sender's
budget of slow reads. Hypothesis then sends nested and garbled JSON: never a 5xx.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MonitorProcess, metric_value
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from test_bad_input import mutation
from test_bad_input import request as protobuf_request
from test_poison_spans import JSON, PROTOBUF, _json_value, rejected

DEEP = 400  # kvlists nested in the hostile value: 1,600 levels of JSON
PLACEHOLDER = "DEEP-VALUE-GOES-HERE"
HOSTILE_KEY = "payload.nested"
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(tmp_path_factory.mktemp("deep") / "state.sqlite3").start()
    try:
        yield proc
    finally:
        proc.stop()
        assert "Traceback" not in proc.stderr()


_WRAPPERS = {"kvlist": ('{"kvlistValue":{"values":[{"key":"k","value":', "}]}}"),
             "array": ('{"arrayValue":{"values":[', "]}}")}


def _nested(kind: str, depth: int, leaf: str = '{"stringValue":"leaf"}') -> str:
    """An OTLP/JSON AnyValue: kvlists or arrays nested `depth` deep around `leaf` (written by hand: json.dumps
    recurses too)."""
    opening, closing = _WRAPPERS[kind]
    return opening * depth + leaf + closing * depth


def _json_resource_spans(service: str, *spans: dict[str, Any]) -> dict[str, Any]:
    return {"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
            "scopeSpans": [{"spans": [
                {"name": "ctxwatch compact", "traceId": "01" * 16, "spanId": f"{i + 1:016x}",
                 "endTimeUnixNano": str(1_700_000_000_000_000_000 + i),
                 "attributes": [{"key": k, "value": v if isinstance(v, dict) else _json_value(v)}
                                for k, v in attrs.items()]} for i, attrs in enumerate(spans)]}]}


def json_body(prefix: str, hostile_value: str) -> bytes:
    """Two valid spans of two services, and between them a span of a third whose HOSTILE_KEY attribute is
    `hostile_value` (OTLP/JSON text)."""
    document = {"resourceSpans": [
        _json_resource_spans("svc-a", mutation(f"{prefix}-a")),
        _json_resource_spans("svc-hostile", mutation(f"{prefix}-bad", **{HOSTILE_KEY: {"stringValue": PLACEHOLDER}})),
        _json_resource_spans("svc-b", mutation(f"{prefix}-b")),
    ]}
    return json.dumps(document).replace(json.dumps({"stringValue": PLACEHOLDER}), hostile_value).encode()


def protobuf_body(prefix: str, kind: str, depth: int) -> bytes:
    """`json_body` in protobuf, the hostile value kvlists or arrays nested `depth` deep (serialized messages
    concatenated are one message: their resourceSpans in order)."""
    request = ExportTraceServiceRequest.FromString(b"".join(
        protobuf_request(mutation(f"{prefix}-{suffix}", **extra), resource={"service.name": service})
        for suffix, service, extra in (("a", "svc-a", {}), ("bad", "svc-hostile", {HOSTILE_KEY: "shallow"}),
                                       ("b", "svc-b", {}))))
    (value,) = [kv.value for kv in request.resource_spans[1].scope_spans[0].spans[0].attributes
                if kv.key == HOSTILE_KEY]
    _deepen(value, kind, depth)
    return request.SerializeToString()


def _deepen(value: AnyValue, kind: str, depth: int) -> None:
    """Make `value` kvlists or arrays nested `depth` deep around a string."""
    value.Clear()
    for _ in range(depth):
        value = value.kvlist_value.values.add(key="k").value if kind == "kvlist" else value.array_value.values.add()
    value.string_value = "leaf"


def _counts(server: MonitorProcess) -> tuple[float, float]:
    text = server.get("/metrics").text
    return (metric_value(text, "ctxwatch_monitor_spans_accepted_total"),
            metric_value(text, "ctxwatch_monitor_spans_rejected_total"))


def _sent(server: MonitorProcess, body: bytes, headers: dict[str, str], prefix: str) -> str:
    """Post `body`: 200, the hostile span alone rejected (its message returned), both valid ones stored and
    counted, the hostile one not."""
    accepted, rejected_before = _counts(server)
    count, message = rejected(server.post("/v1/traces", content=body, headers=headers))
    assert count == 1, message
    assert "resourceSpans[1].scopeSpans[0].spans[0]" in message and HOSTILE_KEY in message
    for suffix, service in (("a", "svc-a"), ("b", "svc-b")):
        loop = server.get(f"/api/loops/{prefix}-{suffix}")
        assert loop.status_code == 200, loop.text
        assert loop.json()["service"] == service
    assert server.get(f"/api/loops/{prefix}-bad").status_code == 404
    assert _counts(server) == (accepted + 2, rejected_before + 1)
    return message


def test_a_json_span_nested_deeper_than_json_loads_reads_is_rejected_alone(server: MonitorProcess) -> None:
    message = _sent(server, json_body("deep-json", _nested("kvlist", DEEP)), JSON, "deep-json")
    assert "nested more than 100 messages deep" in message


def test_a_protobuf_span_nested_deeper_than_the_limit_is_rejected_alone(server: MonitorProcess) -> None:
    message = _sent(server, protobuf_body("deep-pb", "kvlist", DEEP), PROTOBUF, "deep-pb")
    assert "nested more than 100 messages deep" in message


@pytest.mark.parametrize("kind, readable", [("kvlist", 32), ("array", 49)])
def test_json_and_protobuf_share_the_limit(server: MonitorProcess, kind: str, readable: int) -> None:
    """32 kvlists in an attribute value are 99 messages below the span, 49 arrays 100: read in both encodings;
    one more is not, in either (json_format stopped one message short of protobuf)."""
    for depth, refused in ((readable, 0), (readable + 1, 1)):
        prefix = f"edge-{kind}-{depth}"
        for body, headers in ((json_body(prefix + "-j", _nested(kind, depth)), JSON),
                              (protobuf_body(prefix + "-p", kind, depth), PROTOBUF)):
            count, message = rejected(server.post("/v1/traces", content=body, headers=headers))
            assert count == refused, (headers, depth, message)


def _with_part(prefix: str, hostile_value: str, part: str, index: int) -> bytes:
    """`json_body`'s request with the hostile value moved from the span's attributes into the attributes of the
    span's event or link `index` (the ones before it, and its span, valid)."""
    placeholder = json.dumps({"stringValue": PLACEHOLDER})
    document = json.loads(json_body(prefix, placeholder))
    span = document["resourceSpans"][1]["scopeSpans"][0]["spans"][0]
    (hostile,) = [kv for kv in span["attributes"] if kv["key"] == HOSTILE_KEY]
    span["attributes"].remove(hostile)
    items = [{"name": f"step-{i}", "timeUnixNano": "1"} if part == "events" else
             {"traceId": "01" * 16, "spanId": f"{i + 9:016x}"} for i in range(index + 1)]
    items[index]["attributes"] = [{"key": "fine", "value": {"intValue": "1"}}, hostile]
    span[part] = items
    return json.dumps(document).replace(placeholder, hostile_value).encode()


def _protobuf_with_part(prefix: str, kind: str, depth: int, part: str, index: int) -> bytes:
    """`protobuf_body`'s request with the hostile attribute in the span's event or link `index` instead."""
    request = ExportTraceServiceRequest.FromString(protobuf_body(prefix, kind, 0))
    span = request.resource_spans[1].scope_spans[0].spans[0]
    (hostile,) = [kv for kv in span.attributes if kv.key == HOSTILE_KEY]
    span.attributes.remove(hostile)
    items = getattr(span, part)
    for i in range(index + 1):
        item = items.add(name=f"step-{i}") if part == "events" else items.add(trace_id=b"\1" * 16, span_id=bytes(8))
    item.attributes.add(key="fine").value.int_value = 1
    _deepen(item.attributes.add(key=HOSTILE_KEY).value, kind, depth)
    return request.SerializeToString()


@pytest.mark.parametrize("part, named", [("events", 'events[1] "step-1" attribute '), ("links", "links[1] attribute ")])
def test_a_value_nested_too_deep_in_an_event_or_link_is_named_with_it(server: MonitorProcess, part: str,
                                                                       named: str) -> None:
    """The event or link and the attribute key are named, in either encoding, past what json.loads reads too."""
    prefix = f"deep-{part}"
    for body, headers, where in (
            (_with_part(f"{prefix}-j", _nested("kvlist", DEEP), part, 1), JSON, "-j"),
            (_with_part(f"{prefix}-e", _nested("array", 50), part, 1), JSON, "-e"),
            (_protobuf_with_part(f"{prefix}-p", "kvlist", DEEP, part, 1), PROTOBUF, "-p"),
            (_protobuf_with_part(f"{prefix}-f", "array", 50, part, 1), PROTOBUF, "-f")):
        message = _sent(server, body, headers, prefix + where)
        assert f"{named}{HOSTILE_KEY} is nested more than 100 messages deep" in message, message


def test_a_value_json_format_cannot_quote_rejects_its_span_alone(server: MonitorProcess) -> None:
    """A wrong-typed value, hundreds of lists deep, below 40 arrays: json.loads reads it (up to some depth) and
    json_format, quoting it in its error, recursed past the limit (RecursionError: a 500); deeper, json.loads
    gave up (a 400 for the whole request). Every depth across that edge: only the span is rejected."""
    for lists in range(760, 960, 10):
        inner = '{"kvlistValue": ' + "[" * lists + "]" * lists + "}"
        _sent(server, json_body(f"quoted-{lists}", _nested("array", 40, inner)), JSON, f"quoted-{lists}")


def test_reading_a_deep_body_again_is_charged_to_the_sender(tmp_path: Path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--slow-path-rate", "1", "--slow-path-burst", "64").start()
    try:
        body = json_body("charged", _nested("kvlist", DEEP))
        count, _ = rejected(monitor.post("/v1/traces", content=body, headers=JSON))
        reads = metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_slow_path_reads_total", encoding="json")
        assert count == 1 and 1 + DEEP * 5 // 256 <= reads < 64  # one a fallback, one per 256 values read again
        huge = json_body("too-costly", _nested("kvlist", 20 * DEEP))
        response = monitor.post("/v1/traces", content=huge, headers=JSON)
        assert response.status_code == 413 and "slow decoding path" in response.json()["message"]
        assert monitor.get("/api/loops/too-costly-a").status_code == 404
    finally:
        monitor.stop()
        assert "Traceback" not in monitor.stderr()


_OPEN = {"list": ("[", "]"), "object": ('{"k":', "}"), **_WRAPPERS}
_LEAVES = ['{"stringValue":"leaf"}', "1", '"s"', "null", "[]", "{}", "true", '"\\ud800"', "1e400"]


@FUZZ
@given(shape=st.lists(st.sampled_from(sorted(_OPEN)), min_size=1, max_size=6),
       repeats=st.lists(st.integers(min_value=1, max_value=700), min_size=6, max_size=6),
       leaf=st.sampled_from(_LEAVES), cut=st.one_of(st.none(), st.integers(min_value=0)),
       flip=st.one_of(st.none(), st.tuples(st.integers(min_value=0), st.sampled_from(list(b'[]{}",:x ')))))
def test_nested_and_garbled_json_never_gives_a_5xx(server: MonitorProcess, shape: list[str], repeats: list[int],
                                                   leaf: str, cut: int | None, flip: tuple[int, int] | None) -> None:
    value = leaf
    for kind, times in zip(reversed(shape), repeats, strict=False):
        opening, closing = _OPEN[kind]
        value = opening * times + value + closing * times
    body = json_body("fuzz", value)
    if cut is not None:
        body = body[: cut % len(body)]
    if flip is not None and body:
        at = flip[0] % len(body)
        body = body[:at] + bytes([flip[1]]) + body[at + 1:]
    response = server.post("/v1/traces", content=body, headers=JSON)
    assert response.status_code in (200, 400), response.text[:500]
    assert "Traceback" not in response.text
    if cut is None and flip is None:  # well-formed: the valid spans are kept whatever the hostile one holds
        count, message = rejected(response)
        assert count <= 1 and (count == 0 or HOSTILE_KEY in message), message
        assert server.get("/api/loops/fuzz-a").status_code == 200
    assert server.get("/healthz").status_code == 200
