"""The fast OTLP/JSON reader (`ctxwatch_monitor.otlp_json`) against its reference, `google.protobuf.json_format`.

`decode` reads each span and resource with the fast reader, falling back to json_format for what it cannot vouch
for; `decode_json_reference` reads every one with json_format. On generated bodies — every Span field under its
lowerCamelCase or its original name, 64-bit integers as strings or numbers, enums as numbers or names, every
AnyValue variant, unknown fields, and the values json_format refuses or reads in its own way (out-of-range
integers, lone surrogates, two variants, quoted bools, floats where integers go, base64 ids, bracketed keys,
nulls) — both give the same spans, the same values of the same types, and the same rejections. The forms
exporters send are read by the fast reader itself, not by the fallback.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_poison_spans import HUGE, SURROGATE

from ctxwatch_monitor.otlp_codec import decode, decode_json_reference
from ctxwatch_monitor.otlp_json import Unvouched, read_resource, read_span
from ctxwatch_monitor.wire import JSON

KEYS = frozenset({"a", "b", "kept"})  # attribute keys whose values are kept; others are read and dropped


def both(document: Any) -> tuple[str, str]:
    """What `decode` and the json_format reference make of one body (repr: NaN equals NaN, 1 differs from 1.0)."""
    body = json.dumps(document).encode()
    return repr(decode(body, JSON, KEYS, KEYS)), repr(decode_json_reference(body, KEYS, KEYS))


def snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


# values json_format refuses, or reads in a way of its own: the fast reader must leave them to it
ODD = st.sampled_from([
    None, True, False, 0, -1, 1.0, 1.5, -0.0, 2**31, 2**32, -(2**31) - 1, 2**63, -(2**63) - 1, 2**64, 10**400,
    float("nan"), float("inf"), "", " 1", "\t5", "+5", "1_0", "1e3", "1.0", "-", "0x10", "\u0661\u0662", "NaN",
    "Infinity", "-Infinity", "nan", "true", "false", HUGE, SURROGATE, "\udc00", "0a" * 8, "AQID", "AQ==", "zz",
    "abc", "SPAN_KIND_SERVER", "STATUS_CODE_ERROR", "BOGUS", [], [None], [1], {}, {"x": 1},
])
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
UINT32 = st.integers(0, 2**32 - 1)


def as_int(numbers: st.SearchStrategy[int]) -> st.SearchStrategy[Any]:
    """An integer field as an exporter may send it: a number, or a decimal string (the mapping's 64-bit form)."""
    return numbers | numbers.map(str)


def original_names(obj: dict[str, Any]) -> dict[str, Any]:
    return {snake(key): value for key, value in obj.items()}


def any_value(depth: int = 2) -> st.SearchStrategy[Any]:
    scalars = SCALARS
    if depth == 0:
        return scalars
    inner = any_value(depth - 1)
    nested = (scalars
              | st.builds(lambda v: {"arrayValue": {"values": v}}, st.lists(inner, max_size=3))
              | st.builds(lambda v: {"kvlistValue": {"values": v}}, st.lists(key_value(inner), max_size=3)))
    return nested | nested.map(original_names)


SCALARS = (st.builds(lambda v: {"stringValue": v}, st.text(max_size=6))
               | st.builds(lambda v: {"boolValue": v}, st.booleans())
               | st.builds(lambda v: {"intValue": v}, as_int(INT64))
               | st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False, allow_infinity=False)
                           | st.integers(-(2**60), 2**60))
               | st.builds(lambda v: {"bytesValue": base64.b64encode(v).decode()}, st.binary(max_size=6))
           | st.just({}))


def key_value(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda k, v: {"key": k, "value": v}, st.sampled_from(["a", "b", "kept", "other", ""]), values)


@st.composite
def message(draw: st.DrawFn, fields: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """Some of `fields` (lowerCamelCase name -> value), each under that name or its original one, sometimes one
    odd value or an unknown field besides."""
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, max_size=len(fields)))
    obj = {name if draw(st.booleans()) else snake(name): draw(fields[name]) for name in chosen}
    if chosen and draw(st.integers(0, 5)) == 0:  # one field under both names, the later a value or null
        name = draw(st.sampled_from(chosen))
        obj[snake(name) if name in obj else name] = draw(fields[name] | st.none())
    if draw(st.integers(0, 5)) == 0:
        obj[draw(st.sampled_from(sorted(fields)))] = draw(ODD)
    if draw(st.integers(0, 5)) == 0:
        obj[draw(st.sampled_from(["futureField", "[ext]", "x\ud800", "stringValue", "value"]))] = draw(ODD)
    return obj


# odd values for each AnyValue variant in particular
ODD_VARIANTS = {
    "stringValue": [SURROGATE, "\udfff", 5, True, [], {}],
    "boolValue": ["true", 1, 0, None],
    "intValue": ["1.0", 1.0, 2.5, "+5", "\t5", "1e3", "1_0", 2**63, -(2**63) - 1, HUGE, True, "", "-"],
    "doubleValue": [float("nan"), float("inf"), float("-inf"), "NaN", "Infinity", "1.5", " 2", 10**400, 2**60, True],
    "arrayValue": [[], 3, {"values": 3}, {"values": [None]}, {"values": [3]}, {"values": None}],
    "kvlistValue": [{"values": [1]}, {"values": [{"key": 5}]}, {"values": [{"key": SURROGATE}]}, {"values": None}],
    "bytesValue": ["AQID", "AQ", "zz", "a-_b", 5, ""],
}
VARIANTS = list(ODD_VARIANTS)


def with_odd_attribute(values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[Any]]:
    """Attributes, sometimes with an odd value in one variant, two variants, or a variant given twice."""
    odd = (st.sampled_from([{name: value} for name, values in ODD_VARIANTS.items() for value in values])
           | st.builds(lambda name, value: {name: value}, st.sampled_from(VARIANTS + [snake(v) for v in VARIANTS]), ODD)
           | st.builds(lambda a, b: {**a, **b}, SCALARS, SCALARS | SCALARS.map(original_names) | st.builds(
               lambda name: {name: None}, st.sampled_from(VARIANTS))))
    return st.lists(key_value(values) | key_value(odd), max_size=4)


HEX_ID = st.binary(min_size=8, max_size=16).map(bytes.hex) | st.just("") | ODD
ATTRIBUTES = with_odd_attribute(any_value())
EVENT = message({"timeUnixNano": as_int(UINT64), "name": st.text(max_size=4), "attributes": ATTRIBUTES,
                 "droppedAttributesCount": as_int(UINT32)})
LINK = message({"traceId": HEX_ID, "spanId": HEX_ID, "traceState": st.text(max_size=4), "attributes": ATTRIBUTES,
                "droppedAttributesCount": as_int(UINT32), "flags": as_int(UINT32)})
STATUS = message({"message": st.text(max_size=4), "code": st.integers(-1, 3) | st.sampled_from(
    ["STATUS_CODE_OK", "STATUS_CODE_ERROR", "STATUS_CODE_UNSET"])})
SPAN = message({
    "traceId": HEX_ID, "spanId": HEX_ID, "parentSpanId": HEX_ID, "traceState": st.text(max_size=4),
    "flags": as_int(UINT32), "name": st.text(max_size=6), "kind": st.integers(-1, 6) | st.sampled_from(
        ["SPAN_KIND_SERVER", "SPAN_KIND_CLIENT", "SPAN_KIND_INTERNAL"]),
    "startTimeUnixNano": as_int(UINT64), "endTimeUnixNano": as_int(UINT64), "attributes": ATTRIBUTES,
    "droppedAttributesCount": as_int(UINT32), "events": st.lists(EVENT, max_size=2),
    "droppedEventsCount": as_int(UINT32), "links": st.lists(LINK, max_size=2), "droppedLinksCount": as_int(UINT32),
    "status": STATUS})
RESOURCE = message({"attributes": ATTRIBUTES, "droppedAttributesCount": as_int(UINT32)})


def request(resource: Any, spans: list[Any], names: tuple[str, str] = ("resourceSpans", "scopeSpans")) -> Any:
    resource_spans, scope_spans = names
    return {resource_spans: [{"resource": resource, scope_spans: [{"spans": spans}]}]}


@settings(max_examples=400, deadline=None)
@given(resource=RESOURCE, spans=st.lists(SPAN, min_size=1, max_size=3), snake_case=st.booleans())
@example(resource={}, spans=[{"attributes": [{"key": "a", "value": {"doubleValue": 10**400}}]}], snake_case=False)
@example(resource={}, spans=[{"attributes": [{"key": "a", "value": {"stringValue": "x", "intValue": None}}]}],
         snake_case=False)
@example(resource={}, spans=[{"traceId": "0a" * 16, "trace_id": "AQID"}], snake_case=True)
def test_the_fast_reader_and_json_format_agree(resource: Any, spans: list[Any], snake_case: bool) -> None:
    names = ("resource_spans", "scope_spans") if snake_case else ("resourceSpans", "scopeSpans")
    fast, reference = both(request(resource, spans, names))
    assert fast == reference


@settings(max_examples=200, deadline=None)
@given(span=SPAN)
def test_the_fast_reader_accepts_only_what_json_format_accepts(span: Any) -> None:
    """Wherever the fast reader vouches for a span, json_format reads the same attributes and end time."""
    try:
        attributes, end_time_ns = read_span(json.loads(json.dumps(span)), KEYS)
    except Unvouched:
        return
    (reference,) = decode_json_reference(json.dumps(request({}, [span])).encode(), KEYS, KEYS)
    assert reference.problem is None, reference.problem
    assert repr((attributes, end_time_ns)) == repr((reference.attributes, reference.end_time_ns))


EXPORTER_SPAN = {  # as the JavaScript SDK's OTLP/JSON exporter writes a span (hex ids, strings for 64-bit)
    "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "parentSpanId": "",
    "name": "ctxwatch compact", "kind": 1, "startTimeUnixNano": "1700000000000000000",
    "endTimeUnixNano": "1700000000000001000", "droppedAttributesCount": 0, "events": [], "droppedEventsCount": 0,
    "status": {"code": 0}, "links": [], "droppedLinksCount": 0, "flags": 257,
    "attributes": [{"key": "kept", "value": {"stringValue": "loop-1"}}, {"key": "a", "value": {"intValue": 7}},
                   {"key": "b", "value": {"arrayValue": {"values": [{"doubleValue": 0.5}, {"boolValue": True}]}}},
                   {"key": "other", "value": {"kvlistValue": {"values": [{"key": "x", "value": {}}]}}}],
}


@pytest.mark.parametrize("variant", [
    {}, {"kind": "SPAN_KIND_INTERNAL", "status": {"code": "STATUS_CODE_OK"}},
    {"start_time_unix_nano": 1, "end_time_unix_nano": 1700000000000001000, "dropped_links_count": "0"},
    {"futureField": {"anything": [1, None]}, "name": None},
    {"kind": "SPAN_KIND_FROM_THE_FUTURE", "status": {"code": "STATUS_CODE_FROM_THE_FUTURE"}},
], ids=["exporter", "enum-names", "original-names-and-numbers", "unknown-and-null", "unknown-enum-names"])
def test_what_exporters_send_is_read_by_the_fast_reader(variant: dict[str, Any]) -> None:
    renamed = {key.split("_")[0] + "".join(part.title() for part in key.split("_")[1:]) for key in variant}
    span = {**{k: v for k, v in EXPORTER_SPAN.items() if k not in renamed}, **variant}
    attributes, end_time_ns = read_span(json.loads(json.dumps(span)), KEYS)
    assert attributes == {"kept": "loop-1", "a": 7, "b": [0.5, True]} and end_time_ns == 1700000000000001000
    assert read_resource({"attributes": [{"key": "kept", "value": {"stringValue": "svc"}}]}, KEYS) == {"kept": "svc"}
    assert both(request({}, [span]))[0] == both(request({}, [span]))[1]


@pytest.mark.parametrize("value", [{"intValue": HUGE}, {"intValue": 2**63}, {"stringValue": SURROGATE},
                                   {"intValue": "1", "stringValue": "1"}, {"boolValue": "true"}, {"stringValue": 5},
                                   {"doubleValue": 10**400}, {"bytesValue": "AQID"}, {"intValue": 1.0}])
def test_what_json_format_refuses_or_reads_its_own_way_is_left_to_it(value: dict[str, Any]) -> None:
    with pytest.raises(Unvouched):
        read_span({"attributes": [{"key": "a", "value": value}]}, KEYS)


def test_a_double_too_large_for_float_rejects_its_span_alone() -> None:
    """Regression: json_format's float() raised OverflowError out of the decoder (a 500 for the whole batch)."""
    document = request({}, [{"attributes": [{"key": "kept", "value": {"stringValue": "ok"}}]},
                            {"attributes": [{"key": "a", "value": {"doubleValue": 10**400}}]}])
    good, bad = decode(json.dumps(document).encode(), JSON, KEYS, KEYS)
    assert good.problem is None and good.attributes == {"kept": "ok"}
    assert bad.problem == "attribute a doubleValue (double): the number is too large for a double"


def test_the_request_structure_is_read_under_its_original_names_too() -> None:
    span = {"attributes": [{"key": "kept", "value": {"stringValue": "snake"}}]}
    (read,) = decode(json.dumps(request({}, [span], ("resource_spans", "scope_spans"))).encode(), JSON, KEYS, KEYS)
    assert read.problem is None and read.attributes == {"kept": "snake"} and read.where.startswith("resourceSpans[0]")
    # both spellings: the later one counts, as json_format reads a field given twice
    document = {"resource_spans": [{"scopeSpans": [{"spans": [span]}]}], "resourceSpans": None}
    assert decode(json.dumps(document).encode(), JSON, KEYS, KEYS) == []
