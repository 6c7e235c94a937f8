"""The OTLP decoder in process (`ctxwatch_monitor.otlp_codec`): a failure here names the function, not a subprocess.

Both encodings decode one request to the same spans; OTLP/JSON ids are hex (the OTLP JSON mapping) and
protobuf's base64 is still read; every way a span can be unreadable rejects that span alone with a reason
naming the attribute, its type and what was wrong; a broken request structure is a `DecodeError` naming the
field. The end-to-end versions of these cases (a real monitor subprocess) are test_poison_spans.py and
test_bad_input.py.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from conftest import AGENT
from google.protobuf import json_format
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_bad_input import mutation, request
from test_poison_spans import HUGE, SURROGATE, json_request

from ctxwatch import semconv
from ctxwatch_monitor.otlp_codec import DecodeError, RawSpan, decode, decode_json_reference, span_from_json
from ctxwatch_monitor.records import RESOURCE_KEYS, SPAN_KEYS
from ctxwatch_monitor.wire import JSON, PROTOBUF

MANY_TYPES = {"not.read": "kept out", semconv.EPISODE: 7, semconv.HASH_DISTANCE: 0.125, semconv.WARNINGS: ["a", "b"],
              semconv.CONTRACTION_STATE: "healthy", "flag": True}


def read(body: bytes, encoding: str = JSON) -> list[RawSpan]:
    return decode(body, encoding, SPAN_KEYS, RESOURCE_KEYS)


def otlp_json(protobuf_body: bytes) -> bytes:
    """A protobuf request in OTLP/JSON: protobuf's JSON mapping with every trace and span id in hex."""
    def hex_ids(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hex_ids(v)
                    for k, v in node.items()}
        return [hex_ids(v) for v in node] if isinstance(node, list) else node
    message = ExportTraceServiceRequest.FromString(protobuf_body)
    return json.dumps(hex_ids(json_format.MessageToDict(message))).encode()


def test_json_and_protobuf_decode_to_the_same_spans() -> None:
    body = request(mutation("same-a", **MANY_TYPES), mutation("same-b"), resource={"service.name": "svc",
                                                                                   semconv.LOOP_ID: "res-loop"})
    from_protobuf = read(body, PROTOBUF)
    assert from_protobuf == read(otlp_json(body))
    first = from_protobuf[0]
    assert first.problem is None and first.where == "resourceSpans[0].scopeSpans[0].spans[0]"
    assert first.attributes[semconv.WARNINGS] == ["a", "b"] and first.attributes[semconv.EPISODE] == 7
    assert "not.read" not in first.attributes and first.resource == {"service.name": "svc", semconv.LOOP_ID: "res-loop"}
    assert first.end_time_ns == 1_700_000_000_000_000_000


def test_hex_ids_are_read_as_the_bytes_they_spell() -> None:
    span = span_from_json({"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "00f067aa0ba902b7",
                           "parentSpanId": "", "links": [{"traceId": "0af7651916cd43dd8448eb211c80319c",
                                                          "spanId": "B7AD6B7169203331"}]})
    assert span.trace_id == bytes.fromhex("5b8efff798038103d269b633813fc60c")
    assert span.span_id == bytes.fromhex("00f067aa0ba902b7") and span.parent_span_id == b""
    assert span.links[0].trace_id.hex() == "0af7651916cd43dd8448eb211c80319c"
    assert span.links[0].span_id.hex() == "b7ad6b7169203331"


def test_base64_ids_of_protobufs_own_json_mapping_are_still_read() -> None:
    span = span_from_json({"traceId": base64.b64encode(b"\x01" * 16).decode(), "spanId": "AQIDBAUGBwg="})
    assert span.trace_id == b"\x01" * 16 and span.span_id == bytes(range(1, 9))


@pytest.mark.parametrize("value,reason", [
    ({"intValue": HUGE}, "(int64): Value out of range"),
    ({"intValue": 2**63}, "(int64): Value out of range: 9223372036854775808"),
    ({"stringValue": SURROGATE}, "Unpaired surrogate"),
    ({"intValue": "1", "stringValue": "1"}, 'multiple "value" oneof fields'),
    ({"boolValue": "true"}, "Expected true or false"),
    ({"stringValue": 5}, "stringValue (string): expected string"),
    ({"arrayValue": {"values": 3}}, "values: repeated field values must be in []"),
], ids=["huge-int", "int64-edge", "surrogate", "two-values", "quoted-bool", "number-as-string", "values-not-list"])
def test_an_unreadable_json_value_rejects_its_span_alone(value: dict[str, Any], reason: str) -> None:
    good, bad = read(json_request(mutation("ok"), mutation("bad", **{semconv.EPISODE: value})))
    assert good.problem is None and good.attributes[semconv.LOOP_ID] == "ok"
    assert bad.where.endswith("spans[1]") and bad.attributes == {}
    assert bad.problem is not None and bad.problem.startswith(f"attribute {semconv.EPISODE} ")
    assert reason in bad.problem, bad.problem
    assert HUGE not in bad.problem and len(bad.problem) <= 300


def test_an_unreadable_attribute_the_monitor_does_not_read_rejects_the_span_as_protobuf_does() -> None:
    (span,) = read(json_request(mutation("other-key", **{"vendor.x": {"intValue": "x"}})))
    assert span.problem is not None and span.problem.startswith("attribute vendor.x intValue (int64)")


def test_an_unreadable_field_outside_the_attributes_is_named() -> None:
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [{"endTimeUnixNano": "-1"}, {"name": 5}, {"status": 3}]}]}]}
    end, name, status = read(json.dumps(body).encode())
    assert end.problem == "endTimeUnixNano (fixed64): Value out of range: -1"
    assert name.problem is not None and name.problem.startswith("name (string)")
    assert status.problem is not None and status.problem.startswith("status")


def test_an_unreadable_resource_rejects_its_spans_and_no_others() -> None:
    bad = json.loads(json_request(mutation("r1"), mutation("r2"), resource={"service.name": SURROGATE}))
    good = json.loads(json_request(mutation("r3")))
    bad["resourceSpans"] += good["resourceSpans"]
    first, second, third = read(json.dumps(bad).encode())
    assert first.problem == second.problem
    assert first.problem is not None and first.problem.startswith("its resource cannot be read: attribute service.name")
    assert third.problem is None and third.where == "resourceSpans[1].scopeSpans[0].spans[0]"


def test_unknown_fields_are_ignored_at_every_level() -> None:
    document = json.loads(json_request(mutation("future", **{semconv.EPISODE: {"intValue": "4", "newField": 1}})))
    document["resourceSpans"][0]["futureField"] = {"x": 1}
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["flagsV2"] = "z"
    (span,) = read(json.dumps(document).encode())
    assert span.problem is None and span.attributes[semconv.EPISODE] == 4


@pytest.mark.parametrize("body,field", [
    (b"[]", "request"),
    (b'{"resourceSpans": 3}', "request.resourceSpans"),
    (b'{"resourceSpans": [7]}', "resourceSpans[0]"),
    (b'{"resourceSpans": [{"resource": 2}]}', "resourceSpans[0].resource"),
    (b'{"resourceSpans": [{"scopeSpans": 5}]}', "resourceSpans[0].scopeSpans"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": {}}]}]}', "resourceSpans[0].scopeSpans[0].spans"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [7]}]}]}', "resourceSpans[0].scopeSpans[0].spans[0]"),
    (b"{not json", "body"),
    (b"\xff\xfe", "body"),
])
def test_a_broken_json_structure_is_a_decode_error_naming_the_field(body: bytes, field: str) -> None:
    with pytest.raises(DecodeError) as caught:
        read(body)
    assert caught.value.field == field
    assert field in str(caught.value) or "JSON" in str(caught.value)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


def test_deep_nesting_rejects_the_span_or_the_request_never_raises_recursion() -> None:
    good, deep = read(json_request(mutation("shallow"), mutation("deep", nest=_nested(200))))
    assert good.problem is None and deep.problem is not None
    assert deep.problem.startswith("attribute nest is nested more than 100 messages deep")
    # deeper than json.loads reads, where a span goes: read anyway, and refused for what it is
    too_deep_for_json = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(DecodeError, match=r"resourceSpans\[0\] must be an object"):
        read(too_deep_for_json)
    with pytest.raises(DecodeError, match="not valid JSON"):
        read(too_deep_for_json[:-2] + b"}")
    message = ExportTraceServiceRequest.FromString(request(mutation("pb-deep")))
    kv = message.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="nest")
    value = kv.value
    for _ in range(200):
        value = value.array_value.values.add()
    (span,) = read(message.SerializeToString(), PROTOBUF)
    assert span.problem is not None and span.problem.startswith("the span cannot be read: attribute nest is nested")


def test_protobuf_invalid_utf8_rejects_its_span_alone() -> None:
    body = request(mutation("pb-ok"), mutation("pb-bad", **{AGENT: "PLACEHOLDER"}))
    first, second = read(body.replace(b"PLACEHOLDER", b"PLACE\xff\xfeLDER"), PROTOBUF)
    assert first.problem is None and second.problem is not None and "UTF-8" in second.problem


def test_a_broken_framing_inside_one_protobuf_span_rejects_it_alone() -> None:
    # resourceSpans { scopeSpans { spans { attributes { key: 9 bytes announced, 2 given } } } }
    broken = b"\x0a\x0a\x12\x08\x12\x06\x4a\x04\x0a\x09ab"
    first, second = read(request(mutation("pb-ok")) + broken, PROTOBUF)
    assert first.problem is None and second.problem is not None
    assert second.where == "resourceSpans[1].scopeSpans[0].spans[0]"


def test_a_broken_protobuf_framing_is_a_decode_error_naming_where() -> None:
    with pytest.raises(DecodeError) as caught:
        read(b"\x0a\x05\x12\x03\x12\x09\x00", PROTOBUF)
    assert caught.value.field.startswith("resourceSpans[0]")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from(["", "NaN", "-Infinity", "1e3", "0a" * 8, "AQID", SURROGATE, HUGE]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["key", "value", "stringValue", "intValue", "doubleValue", "boolValue", "bytesValue",
                         "arrayValue", "kvlistValue", "values", "attributes", "traceId", "spanId", "links",
                         "endTimeUnixNano", "name", "kind", "status", "x"]), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(span=JSON_VALUES, attribute=JSON_VALUES, resource=JSON_VALUES)
@example(span={}, attribute=SURROGATE, resource=None)  # upb's SystemError out of json_format (found by this test)
@example(span={}, attribute=None, resource={"attributes": [True]})  # json_format's TypeError at the top level
def test_any_json_in_a_span_or_resource_is_a_span_rejection_or_a_decode_error(span: Any, attribute: Any,
                                                                               resource: Any) -> None:
    """Whatever JSON sits where a span, an attribute or a resource goes: spans or a `DecodeError`, nothing else;
    and the same as json_format makes of it (`decode_json_reference`)."""
    if isinstance(span, dict):
        span = {**span, "attributes": [attribute, {"key": semconv.EPISODE, "value": attribute}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]},
                              {"scopeSpans": [{"spans": [{"attributes": [{"key": semconv.LOOP_ID,
                                                                          "value": {"stringValue": "kept"}}]}]}]}]}
    encoded = json.dumps(body).encode()
    try:
        spans = read(encoded)
    except DecodeError as exc:
        assert exc.field.startswith(("resourceSpans[0]", "body")), exc.field
        with pytest.raises(DecodeError):
            decode_json_reference(encoded, SPAN_KEYS, RESOURCE_KEYS)
        return
    assert repr(spans) == repr(decode_json_reference(encoded, SPAN_KEYS, RESOURCE_KEYS))
    assert spans[-1].problem is None and spans[-1].attributes == {semconv.LOOP_ID: "kept"}
    assert all(s.problem is None or len(s.problem) <= 300 for s in spans)
