"""OTLP trace decoding (protobuf and JSON) into plain spans, and OTLP response bodies.

`decode` turns an `ExportTraceServiceRequest` into `RawSpan`s: for each span, the attributes the
monitor reads (span and resource level) as Python values, its end time and its position in the
request (for error messages). Every attribute key is read; values only for the keys asked for.
Values keep their OTLP type: str, bool, int, float, bytes, list (array) or dict (kvlist). A JSON
value that is not a valid AnyValue decodes to an `Invalid` marker: `INVALID`, `NOT_INT64` (an
intValue outside int64) or `NOT_UTF8` (a string with a lone surrogate, which no UTF-8 encoder,
SQLite or Prometheus included, can write); unknown fields inside a value are ignored, as the OTLP
JSON mapping says. A protobuf request that does not parse is walked span by span, so a span with
invalid UTF-8 (which the protobuf runtime refuses to parse) is rejected on its own (`RawSpan.problem`)
and the others are kept. A request that cannot be read at all raises `DecodeError` (HTTP 400,
never retried), naming the field.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection
from typing import Any, NamedTuple

from google.protobuf import any_pb2, json_format
from google.protobuf.message import DecodeError as _PbDecodeError
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from .wire import PROTOBUF

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class Invalid:
    """A decoded attribute value that cannot be used; `problem` says why (for the rejection message)."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem


INVALID = Invalid("is not a valid OTLP AnyValue")
NOT_INT64 = Invalid("is an integer outside int64")
NOT_UTF8 = Invalid("is not valid UTF-8")


class DecodeError(ValueError):
    """The request body is not a readable ExportTraceServiceRequest; the message says where, `field`
    names the offending field (for the 400's google.rpc.BadRequest details)."""

    def __init__(self, message: str, field: str = "body") -> None:
        super().__init__(message)
        self.field = field


class RawSpan(NamedTuple):
    """One span as read from the wire, before validation; `problem` when it could not be read at all."""

    attributes: dict[str, Any]
    resource: dict[str, Any]
    end_time_ns: int
    where: str
    problem: str | None = None


def decode(body: bytes, encoding: str, span_keys: Collection[str], resource_keys: Collection[str]) -> list[RawSpan]:
    """Decode a request body; keep the values of `span_keys` and `resource_keys` attributes."""
    try:
        if encoding == PROTOBUF:
            return _decode_protobuf(body, span_keys, resource_keys)
        return _decode_json(body, span_keys, resource_keys)
    except RecursionError:
        raise DecodeError("attribute values are nested too deeply") from None


# -- protobuf -------------------------------------------------------------------------------------

def _pb_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def _pb_attributes(attributes: Any, keys: Collection[str]) -> dict[str, Any]:
    out = {}
    for kv in attributes:
        key = kv.key
        if key in keys:
            out[key] = _pb_value(kv.value)
    return out


_PB_ERRORS = (_PbDecodeError, RuntimeError, ValueError)


def _decode_protobuf(body: bytes, span_keys: Collection[str], resource_keys: Collection[str]) -> list[RawSpan]:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except _PB_ERRORS:
        return _decode_protobuf_by_span(body, span_keys, resource_keys)
    spans: list[RawSpan] = []
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _pb_attributes(resource_spans.resource.attributes, resource_keys)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for p, span in enumerate(scope_spans.spans):
                attrs = _pb_attributes(span.attributes, span_keys)
                spans.append(RawSpan(attrs, resource, span.end_time_unix_nano,
                                     f"resourceSpans[{r}].scopeSpans[{s}].spans[{p}]"))
    return spans


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(buf) or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _len_fields(buf: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited fields of one serialized message as (field number, bytes); the other wire
    types are skipped (ValueError when the framing is broken)."""
    fields, at = [], 0
    while at < len(buf):
        tag, at = _varint(buf, at)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            _, at = _varint(buf, at)
        elif wire_type == 1 or wire_type == 5:
            at += 8 if wire_type == 1 else 4
        elif wire_type == 2:
            length, at = _varint(buf, at)
            if at + length > len(buf):
                raise ValueError("truncated length-delimited field")
            fields.append((number, buf[at:at + length]))
            at += length
        else:
            raise ValueError(f"unsupported wire type {wire_type}")
    if at != len(buf):
        raise ValueError("truncated field")
    return fields


def _decode_protobuf_by_span(body: bytes, span_keys: Collection[str],
                             resource_keys: Collection[str]) -> list[RawSpan]:
    """The slow path for a request the protobuf runtime refused: walk ResourceSpans (field 1), their
    Resource (1) and ScopeSpans (2), and their Spans (2), parsing each span on its own, so one span that
    does not parse (invalid UTF-8 in a string, most often) is rejected alone."""
    spans: list[RawSpan] = []
    where = "request"
    try:
        for r, (_, resource_bytes) in enumerate(f for f in _len_fields(body) if f[0] == 1):
            where = where_r = f"resourceSpans[{r}]"
            parts = _len_fields(resource_bytes)
            resource, resource_problem = {}, None
            try:
                # repeated occurrences of a message field merge, as their concatenation parses
                resource = _pb_attributes(Resource.FromString(b"".join(b for n, b in parts if n == 1)).attributes,
                                          resource_keys)
            except _PB_ERRORS as exc:
                resource_problem = f"its resource cannot be read ({exc})"
            for s, (_, scope_bytes) in enumerate(f for f in parts if f[0] == 2):
                where = where_s = f"{where_r}.scopeSpans[{s}]"
                for p, (_, span_bytes) in enumerate(f for f in _len_fields(scope_bytes) if f[0] == 2):
                    where = f"{where_s}.spans[{p}]"
                    problem = resource_problem
                    attrs, end_ns = {}, 0
                    if problem is None:
                        try:
                            span = Span.FromString(span_bytes)
                            attrs, end_ns = _pb_attributes(span.attributes, span_keys), span.end_time_unix_nano
                        except _PB_ERRORS as exc:
                            problem = f"the span cannot be read ({exc})"
                    spans.append(RawSpan(attrs, resource, end_ns, where, problem))
    except ValueError as exc:
        raise DecodeError(f"body is not a protobuf ExportTraceServiceRequest: {where}: {exc}", where) from None
    return spans


# -- JSON (the OTLP JSON mapping: lowerCamelCase keys, 64-bit integers as strings) ---------------

def _json_int(raw: Any) -> Any:
    """An int64 from a JSON number or a decimal string (the JSON mapping's form of 64-bit integers)."""
    if isinstance(raw, bool):
        return INVALID
    if isinstance(raw, str):
        digits = raw[1:] if raw[:1] == "-" else raw
        # int() would also take spaces, underscores and other Unicode digits
        if not (digits and digits.isascii() and digits.isdigit()):
            return INVALID
        if len(digits.lstrip("0")) > 19:  # past int64 whatever the digits (and never a costly int())
            return NOT_INT64
        raw = int(raw)
    elif not isinstance(raw, int):
        return INVALID
    return raw if INT64_MIN <= raw <= INT64_MAX else NOT_INT64


def _json_string(raw: Any) -> Any:
    if not isinstance(raw, str):
        return INVALID
    if raw.isascii():
        return raw
    try:
        raw.encode()
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON text)
        return NOT_UTF8
    return raw


_SPECIAL_DOUBLES = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _json_double(raw: Any) -> Any:
    if isinstance(raw, bool):
        return INVALID
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        return _SPECIAL_DOUBLES.get(raw, INVALID)
    return INVALID


def _json_bytes(raw: Any) -> Any:
    if not isinstance(raw, str):
        return INVALID
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError:
        return INVALID


def _json_array(raw: Any) -> Any:
    values = raw.get("values", []) if isinstance(raw, dict) else INVALID
    if not isinstance(values, list):
        return INVALID
    return [_json_value(v) for v in values]


def _json_kvlist(raw: Any) -> Any:
    values = raw.get("values", []) if isinstance(raw, dict) else INVALID
    if not isinstance(values, list) or not all(isinstance(kv, dict) for kv in values):
        return INVALID
    return {str(kv.get("key", "")): _json_value(kv.get("value")) for kv in values}


_JSON_VALUE_READERS = {
    "stringValue": _json_string,
    "boolValue": lambda raw: raw if isinstance(raw, bool) else INVALID,
    "intValue": _json_int,
    "doubleValue": _json_double,
    "bytesValue": _json_bytes,
    "arrayValue": _json_array,
    "kvlistValue": _json_kvlist,
}


def _json_value(raw: Any) -> Any:
    """One AnyValue; fields of it that are not AnyValue fields are ignored (unknown fields), two value
    fields at once are invalid (a oneof)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        return INVALID
    found = [name for name in raw if name in _JSON_VALUE_READERS]
    if not found:
        return None  # an empty AnyValue
    if len(found) > 1:
        return INVALID
    return _JSON_VALUE_READERS[found[0]](raw[found[0]])


def _json_list(container: dict[str, Any], key: str, where: str) -> list[Any]:
    value = container.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{where}.{key} must be an array, got {type(value).__name__}", f"{where}.{key}")
    return value


def _json_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"{where} must be an object, got {type(value).__name__}", where)
    return value


def _json_attributes(container: dict[str, Any], keys: Collection[str], where: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, kv in enumerate(_json_list(container, "attributes", where)):
        kv = _json_object(kv, f"{where}.attributes[{i}]")
        key = kv.get("key")
        if not isinstance(key, str):
            raise DecodeError(f"{where}.attributes[{i}].key must be a string", f"{where}.attributes[{i}].key")
        if key in keys:
            attrs[key] = _json_value(kv.get("value"))
    return attrs


def _decode_json(body: bytes, span_keys: Collection[str], resource_keys: Collection[str]) -> list[RawSpan]:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DecodeError(f"body is not valid JSON: {exc}") from None
    document = _json_object(document, "request")
    spans: list[RawSpan] = []
    for r, resource_spans in enumerate(_json_list(document, "resourceSpans", "request")):
        where_r = f"resourceSpans[{r}]"
        resource_spans = _json_object(resource_spans, where_r)
        resource_obj = _json_object(resource_spans.get("resource") or {}, f"{where_r}.resource")
        resource = _json_attributes(resource_obj, resource_keys, f"{where_r}.resource")
        for s, scope_spans in enumerate(_json_list(resource_spans, "scopeSpans", where_r)):
            where_s = f"{where_r}.scopeSpans[{s}]"
            scope_spans = _json_object(scope_spans, where_s)
            for p, span in enumerate(_json_list(scope_spans, "spans", where_s)):
                where = f"{where_s}.spans[{p}]"
                span = _json_object(span, where)
                end = _json_int(span.get("endTimeUnixNano", 0))
                end_ns = end if isinstance(end, int) and 0 <= end < 2**64 else 0
                spans.append(RawSpan(_json_attributes(span, span_keys, where), resource, end_ns, where))
    return spans


# -- responses ------------------------------------------------------------------------------------

# HTTP status -> google.rpc.Code, for the Status body of an error response
_RPC_CODES = {400: 3, 401: 16, 404: 5, 413: 8, 415: 3, 429: 8, 503: 14}


def success_body(encoding: str, rejected: int, message: str) -> bytes:
    """An ExportTraceServiceResponse; `partial_success` is filled only when spans were rejected."""
    if encoding == PROTOBUF:
        response = ExportTraceServiceResponse()
        if rejected:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message
        return response.SerializeToString()
    payload: dict[str, Any] = {}
    if rejected:
        payload["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
    return json.dumps(payload).encode()


def error_body(encoding: str, status: int, message: str, field: str | None = None) -> bytes:
    """A google.rpc.Status describing the problem, in the request's encoding (JSON if unknown); a 400
    carries a google.rpc.BadRequest detail naming the offending field (`field`, else the body)."""
    status_message = status_pb2.Status(code=_RPC_CODES.get(status, 2), message=message)
    if status == 400:
        detail = any_pb2.Any()
        detail.Pack(bad_request(field or "body", message))
        status_message.details.append(detail)
    if encoding == PROTOBUF:
        return status_message.SerializeToString()
    return json_format.MessageToJson(status_message, indent=None).encode()


def bad_request(field: str, description: str) -> error_details_pb2.BadRequest:
    """The google.rpc.BadRequest detail of a refused request: one field violation."""
    return error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field=field, description=description)])


def media_type(encoding: str) -> str:
    """The Content-Type of a response in this encoding."""
    return "application/x-protobuf" if encoding == PROTOBUF else "application/json"

