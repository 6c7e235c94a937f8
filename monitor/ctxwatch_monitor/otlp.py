"""OTLP trace decoding (protobuf and JSON) into plain spans, and OTLP response bodies.

`decode` turns an `ExportTraceServiceRequest` into `RawSpan`s: for each span, the attributes the
monitor reads (span and resource level) as Python values, its end time and its position in the
request (for error messages). Every attribute key is read; values only for the keys asked for.
Values keep their OTLP type: str, bool, int, float, bytes, list (array) or dict (kvlist); a JSON
value that is not a valid AnyValue decodes to `INVALID`. A request that cannot be read at all
raises `DecodeError` (HTTP 400, never retried).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError as _PbDecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from .wire import PROTOBUF

INVALID = object()  # a JSON attribute value that is not a valid OTLP AnyValue


class DecodeError(ValueError):
    """The request body is not a readable ExportTraceServiceRequest; the message says where."""


class RawSpan(NamedTuple):
    """One span as read from the wire, before validation."""

    attributes: dict[str, Any]
    resource: dict[str, Any]
    end_time_ns: int
    where: str


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


def _decode_protobuf(body: bytes, span_keys: Collection[str], resource_keys: Collection[str]) -> list[RawSpan]:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (_PbDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError(f"body is not a protobuf ExportTraceServiceRequest: {exc}") from None
    spans: list[RawSpan] = []
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _pb_attributes(resource_spans.resource.attributes, resource_keys)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for p, span in enumerate(scope_spans.spans):
                attrs = _pb_attributes(span.attributes, span_keys)
                spans.append(RawSpan(attrs, resource, span.end_time_unix_nano,
                                     f"resourceSpans[{r}].scopeSpans[{s}].spans[{p}]"))
    return spans


# -- JSON (the OTLP JSON mapping: lowerCamelCase keys, 64-bit integers as strings) ---------------

def _json_int(raw: Any) -> Any:
    if isinstance(raw, bool):
        return INVALID
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw)
        except ValueError:
            return INVALID
    return INVALID


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
    "stringValue": lambda raw: raw if isinstance(raw, str) else INVALID,
    "boolValue": lambda raw: raw if isinstance(raw, bool) else INVALID,
    "intValue": _json_int,
    "doubleValue": _json_double,
    "bytesValue": _json_bytes,
    "arrayValue": _json_array,
    "kvlistValue": _json_kvlist,
}


def _json_value(raw: Any) -> Any:
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict) or len(raw) != 1:
        return INVALID
    ((name, inner),) = raw.items()
    reader = _JSON_VALUE_READERS.get(name)
    return INVALID if reader is None else reader(inner)


def _json_list(container: dict[str, Any], key: str, where: str) -> list[Any]:
    value = container.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{where}.{key} must be an array, got {type(value).__name__}")
    return value


def _json_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"{where} must be an object, got {type(value).__name__}")
    return value


def _json_attributes(container: dict[str, Any], keys: Collection[str], where: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for i, kv in enumerate(_json_list(container, "attributes", where)):
        kv = _json_object(kv, f"{where}.attributes[{i}]")
        key = kv.get("key")
        if not isinstance(key, str):
            raise DecodeError(f"{where}.attributes[{i}].key must be a string")
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


def error_body(encoding: str, status: int, message: str) -> bytes:
    """A google.rpc.Status describing the problem, in the request's encoding (JSON if unknown)."""
    code = _RPC_CODES.get(status, 2)
    if encoding == PROTOBUF:
        return status_pb2.Status(code=code, message=message).SerializeToString()
    return json.dumps({"code": code, "message": message}).encode()


def media_type(encoding: str) -> str:
    """The Content-Type of a response in this encoding."""
    return "application/x-protobuf" if encoding == PROTOBUF else "application/json"

