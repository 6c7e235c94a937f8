"""OTLP trace decoding (protobuf and JSON) into plain spans, and OTLP response bodies.

`decode` turns an `ExportTraceServiceRequest` into `RawSpan`s: for each span, the attributes the
monitor reads (span and resource level) as Python values, its end time and its position in the
request (for error messages). Every attribute key is read; values only for the keys asked for.
Values keep their OTLP type: str, bool, int, float, bytes, list (array) or dict (kvlist).

A span that does not parse is rejected on its own (`RawSpan.problem`, naming the attribute) and the others
are kept. Protobuf: the request is read by the protobuf runtime; one it refuses (invalid UTF-8 in one span,
most often) is walked span by span. JSON: the structure down to each span is walked here (keys in
lowerCamelCase or as the original field names), and each resource and span is read by the fast reader
(`otlp_json`); one it cannot vouch for is parsed by `google.protobuf.json_format` into a `Resource` or `Span`
message, the reference for what OTLP/JSON means here (an integer outside int64, a lone surrogate, two values in
one AnyValue are its refusals; unknown fields are ignored, trace and span ids are read as hex, as the OTLP JSON
mapping says). `decode_json_reference` reads every object with json_format (the oracle of the tests, the
baseline of the benchmark). A JSON body nested deeper than `json.loads` reads is read again by `bounded_json`
(charged to `slow`), so a span or resource nested deeper than `MAX_NESTING` messages (protobuf's limit, kept
for JSON too) is rejected alone in either encoding. A request that cannot be read at all raises `DecodeError`
(HTTP 400, never retried), naming the field. Every read by a slow path (json_format, protobuf span by span) is
announced to the caller's `slow` first, which may stop the decoding (the per-client budget: `slow_path`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Callable, Collection
from typing import Any, NamedTuple

from google.protobuf import any_pb2, json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError as _PbDecodeError
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from . import bounded_json
from .otlp_json import Unvouched, read_resource, read_span
from .wire import PROTOBUF

MAX_KEY_SHOWN = 256  # characters of an attribute key quoted in a rejection
# Messages a span or resource may hold nested below it (AnyValue, ArrayValue, KeyValueList, KeyValue: 32 kvlists
# or 49 arrays inside an attribute value): the protobuf runtime's limit (upb reads a message and 100 below it),
# kept for OTLP/JSON too. A span or resource nested deeper is rejected alone, naming the attribute (and the span's
# event or link holding it).
MAX_NESTING = 100
TOO_DEEP = (f"is nested more than {MAX_NESTING} messages deep (arrays, kvlists and their values, counted from the "
            f"span or resource: protobuf's limit)")


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


SlowRead = Callable[[], None]  # called before each read by a slow path; raises to stop decoding (`slow_path`)


def _unlimited() -> None:
    return None


def decode(body: bytes, encoding: str, span_keys: Collection[str], resource_keys: Collection[str],
           slow: SlowRead = _unlimited) -> list[RawSpan]:
    """Decode a request body; keep the values of `span_keys` and `resource_keys` attributes. `slow()` is called
    before each span or resource read by a slow path (json_format; protobuf span by span), and whatever it
    raises stops the decoding (`slow_path.SlowPathSpent`)."""
    if encoding == PROTOBUF:
        return _decode_protobuf(body, span_keys, resource_keys, slow)
    return _decode_json(body, span_keys, resource_keys, slow)


def decode_json_reference(body: bytes, span_keys: Collection[str], resource_keys: Collection[str]) -> list[RawSpan]:
    """Decode an OTLP/JSON body as `decode` does, but every resource and span by `json_format`: the reference
    the fast reader is checked against (tests) and measured against (bench/bench_monitor.py)."""
    return _decode_json(body, span_keys, resource_keys, None)


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


def _decode_protobuf(body: bytes, span_keys: Collection[str], resource_keys: Collection[str],
                     slow: SlowRead) -> list[RawSpan]:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except _PB_ERRORS:
        return _decode_protobuf_by_span(body, span_keys, resource_keys, slow)
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


def _length_delimited(number: int, payload: bytes) -> bytes:
    """One length-delimited field, serialized."""
    length, size = bytearray(), len(payload)
    while size > 0x7F:
        length.append(size & 0x7F | 0x80)
        size >>= 7
    length.append(size)
    return bytes([number << 3 | 2]) + bytes(length) + payload


_ATTRIBUTES_FIELD = {Span: 9, Resource: 1}  # the field number of `attributes`
# a Span's parts with attributes of their own: the field number, the JSON name, their `attributes`' field number
_PARTS = ((11, "events", 3), (13, "links", 4))
_EVENT_NAME = 2  # the field number of an event's `name`


def _pb_problem(message: type[Span] | type[Resource], serialized: bytes, exc: Exception) -> str:
    """Why a span or resource the protobuf runtime refused does not parse: the first attribute that does not
    (read alone in the same message, so at the same depth), by its key, and for a span's event or link's, by the
    event or link too; else the runtime's reason."""
    try:
        if found := _pb_attribute(message, serialized, _ATTRIBUTES_FIELD[message], None, ""):
            return found
        for number, part, attributes in _PARTS if message is Span else ():
            for i, (_, payload) in enumerate(f for f in _len_fields(serialized) if f[0] == number):
                name = next((_shown(b) for n, b in _len_fields(payload) if n == _EVENT_NAME), None) \
                    if number == _PARTS[0][0] else None
                if found := _pb_attribute(message, payload, attributes, number, _part(part, i, name)):
                    return found
    except ValueError:  # its framing is broken: the runtime's reason says so
        pass
    return _pb_reason(exc)


def _pb_attribute(message: type[Span] | type[Resource], serialized: bytes, number: int, outer: int | None,
                  where: str) -> str | None:
    """The first attribute (field `number` of `serialized`, a span or resource, or the part of a span that is its
    field `outer`) that does not parse alone at the same depth, named by its key after `where`."""
    for field, attribute in _len_fields(serialized):
        if field != number:
            continue
        alone = _length_delimited(number, attribute)
        try:
            message.FromString(alone if outer is None else _length_delimited(outer, alone))
        except _PB_ERRORS as attribute_exc:
            key = next((b for n, b in _len_fields(attribute) if n == 1), b"")
            return f"{where}attribute {_shown(key)} {_pb_reason(attribute_exc)}"
    return None


def _shown(text: bytes) -> str:
    """A key or name read from protobuf, as a rejection quotes it."""
    return text.decode(errors="backslashreplace")[:MAX_KEY_SHOWN]


def _part(part: str, index: int, name: str | None) -> str:
    """How a rejection names a span's event or link (`events[2] "exception"`), before its attribute."""
    return f"{part}[{index}]{f' {json.dumps(name)}' if name is not None else ''} "


def _pb_reason(exc: Exception) -> str:
    return TOO_DEEP if "MaxDepth" in str(exc) else f"({exc})"


def _decode_protobuf_by_span(body: bytes, span_keys: Collection[str],
                             resource_keys: Collection[str], slow: SlowRead) -> list[RawSpan]:
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
            # repeated occurrences of a message field merge, as their concatenation parses
            resource_bytes = b"".join(b for n, b in parts if n == 1)
            try:
                resource = _pb_attributes(Resource.FromString(resource_bytes).attributes, resource_keys)
            except _PB_ERRORS as exc:
                resource_problem = f"its resource cannot be read: {_pb_problem(Resource, resource_bytes, exc)}"
            for s, (_, scope_bytes) in enumerate(f for f in parts if f[0] == 2):
                where = where_s = f"{where_r}.scopeSpans[{s}]"
                for p, (_, span_bytes) in enumerate(f for f in _len_fields(scope_bytes) if f[0] == 2):
                    where = f"{where_s}.spans[{p}]"
                    problem = resource_problem
                    attrs, end_ns = {}, 0
                    if problem is None:
                        slow()
                        try:
                            span = Span.FromString(span_bytes)
                            attrs, end_ns = _pb_attributes(span.attributes, span_keys), span.end_time_unix_nano
                        except _PB_ERRORS as exc:
                            problem = f"the span cannot be read: {_pb_problem(Span, span_bytes, exc)}"
                    spans.append(RawSpan(attrs, resource, end_ns, where, problem))
    except ValueError as exc:
        raise DecodeError(f"body is not a protobuf ExportTraceServiceRequest: {where}: {exc}", where) from None
    return spans


# -- JSON (the OTLP JSON mapping: protobuf's JSON mapping, ids in hex) ------------------------------

_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _hex_ids_as_base64(message: dict[str, Any]) -> None:
    """Rewrite the trace and span ids of a Span or Link object from OTLP's hex to protobuf's base64, in
    place, so `json_format` reads them as the bytes the sender meant. An id that is not hex is left as it
    is, for `json_format` to read as base64 (what an exporter using protobuf's own JSON mapping sends)."""
    for key in _ID_KEYS:
        value = message.get(key)
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):  # not hex: json_format reads it as base64
                message[key] = base64.b64encode(base64.b16decode(value, casefold=True)).decode()


def span_from_json(obj: dict[str, Any]) -> Span:
    """One OTLP/JSON span object as a `Span` message (`json_format.ParseError`, rarely `SystemError`, when
    it is not one);
    unknown fields are ignored, as the OTLP JSON mapping says. `obj`'s ids are rewritten in place."""
    _hex_ids_as_base64(obj)
    links = obj.get("links")
    if isinstance(links, list):
        for link in links:
            if isinstance(link, dict):
                _hex_ids_as_base64(link)
    return json_format.ParseDict(obj, Span(), ignore_unknown_fields=True, max_recursion_depth=MAX_NESTING + 1)


# what json_format raises on input it cannot read: ParseError, except for a lone surrogate where it looks
# up a field name (a string given where an object goes), which escapes from upb as a SystemError, an
# integer too large for a double where a double goes (float() raises OverflowError), and RecursionError
# when it quotes a value nested about a thousand levels deep in its message (json.loads reads that deep)
_NOT_READ = (json_format.ParseError, SystemError, OverflowError, RecursionError)
_TOO_DEEP_PARSE = re.compile(r"Message too deep\. Max recursion depth is \d+")
_PARSE_STEP = re.compile(r"Failed to parse (\w+) field: ")
_MAX_REASON = 200
_LONG_WORD = re.compile(r"\S{32,}")  # a value quoted in the error (400 digits, say), cut short


def _parse_reason(exc: Exception, message: type[Message]) -> str:
    """A `json_format.ParseError` as one short line: the field it failed on and its protobuf type, then
    what was wrong (a long value quoted in it cut short)."""
    if isinstance(exc, OverflowError):
        return "doubleValue (double): the number is too large for a double"
    if isinstance(exc, RecursionError) or _TOO_DEEP_PARSE.search(str(exc)) is not None:
        return TOO_DEEP
    if not isinstance(exc, json_format.ParseError):
        return "a field name is not valid UTF-8 (a lone surrogate)"
    text, descriptor, name, type_name = str(exc), message.DESCRIPTOR, "", ""
    while (step := _PARSE_STEP.match(text)) is not None:  # "Failed to parse value field: Failed to parse ..."
        text, name = text[step.end():], step[1]
        field = descriptor.fields_by_camelcase_name.get(name) if descriptor is not None else None
        descriptor = field.message_type if field is not None else None
        type_name = _FIELD_TYPES.get(field.type, "") if field is not None else ""
    text = _LONG_WORD.sub(lambda word: word[0][:24] + "...", text.rstrip("."))
    reason = f"{name}{f' ({type_name})' if type_name else ''}: {text}" if name else text
    return reason if len(reason) <= _MAX_REASON else reason[:_MAX_REASON] + "..."


_FIELD_TYPES = {FieldDescriptor.TYPE_INT64: "int64", FieldDescriptor.TYPE_FIXED64: "fixed64",
                FieldDescriptor.TYPE_UINT32: "uint32", FieldDescriptor.TYPE_FIXED32: "fixed32",
                FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_DOUBLE: "double",
                FieldDescriptor.TYPE_BOOL: "bool", FieldDescriptor.TYPE_STRING: "string",
                FieldDescriptor.TYPE_BYTES: "bytes", FieldDescriptor.TYPE_ENUM: "enum"}


def _attributes_problem(obj: dict[str, Any], exc: Exception, message: type[Message]) -> str:
    """Why a span or resource object did not parse, naming the first attribute that does not (by its key,
    else its index), and for a span's event or link's, by the event or link too; or the field outside the
    attributes."""
    if found := _json_attribute(obj, MAX_NESTING, ""):  # one level below the span or resource, with the KeyValue
        return found
    for _, part, _ in _PARTS if message is Span else ():
        parts = obj.get(part)
        for i, item in enumerate(parts if isinstance(parts, list) else ()):
            if isinstance(item, dict):
                name = item.get("name") if part == _PARTS[0][1] else None
                where = _part(part, i, name[:MAX_KEY_SHOWN] if isinstance(name, str) else None)
                if found := _json_attribute(item, MAX_NESTING - 1, where):  # two levels below: the part, the KeyValue
                    return found
    return _parse_reason(exc, message)


def _json_attribute(obj: dict[str, Any], depth: int, where: str) -> str | None:
    """The first attribute of `obj` that does not parse alone within `depth` messages, named after `where`."""
    attributes = obj.get("attributes")
    for i, kv in enumerate(attributes if isinstance(attributes, list) else ()):
        if not isinstance(kv, dict):  # json_format raises TypeError, not ParseError, for these
            return f"{where}attributes[{i}] must be an object, got {type(kv).__name__}"
        try:
            json_format.ParseDict(kv, KeyValue(), ignore_unknown_fields=True, max_recursion_depth=depth)
        except _NOT_READ as attribute_exc:
            key = kv.get("key")
            name = key[:MAX_KEY_SHOWN] if isinstance(key, str) else f"attributes[{i}]"
            return f"{where}attribute {name} {_parse_reason(attribute_exc, KeyValue)}"
    return None


# the request-level fields walked here, by lowerCamelCase name: their original names
_ORIGINAL_NAMES = {"resourceSpans": "resource_spans", "scopeSpans": "scope_spans"}


def _json_list(container: dict[str, Any], key: str, where: str) -> list[Any]:
    """The array `key` of a request-level object, under its lowerCamelCase or its original name (the later of
    the two when both are there, as json_format reads them); [] when absent or null."""
    original = _ORIGINAL_NAMES.get(key)
    if original is not None and original in container:
        key = original if key not in container else next(k for k in reversed(container) if k in (key, original))
    value = container.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{where}.{key} must be an array, got {type(value).__name__}", f"{where}.{key}")
    return value


def _json_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DecodeError(f"{where} must be an object, got {type(value).__name__}", where)
    return value


def _json_resource(resource_spans: dict[str, Any], where: str, keys: Collection[str],
                   slow: SlowRead | None) -> tuple[dict[str, Any], str | None]:
    """The resource attributes of one ResourceSpans object, or the problem that rejects its spans (by the fast
    reader first unless `slow` is None: the reference)."""
    obj = _json_object(resource_spans.get("resource") or {}, f"{where}.resource")
    if slow is not None:
        with contextlib.suppress(Unvouched):
            return read_resource(obj, keys), None
        slow()
    try:
        resource = json_format.ParseDict(obj, Resource(), ignore_unknown_fields=True,
                                         max_recursion_depth=MAX_NESTING + 1)
        return _pb_attributes(resource.attributes, keys), None
    except _NOT_READ as exc:
        return {}, f"its resource cannot be read: {_attributes_problem(obj, exc, Resource)}"


def _json_span(obj: dict[str, Any], resource: dict[str, Any], where: str, keys: Collection[str],
               slow: SlowRead | None) -> RawSpan:
    """One span object: by the fast reader when it vouches for it, else (`slow()` first) by `json_format`; by
    `json_format` alone when `slow` is None (the reference)."""
    if slow is not None:
        with contextlib.suppress(Unvouched):
            attributes, end_time_ns = read_span(obj, keys)
            return RawSpan(attributes, resource, end_time_ns, where)
        slow()
    try:
        span = span_from_json(obj)
    except _NOT_READ as exc:
        return RawSpan({}, resource, 0, where, _attributes_problem(obj, exc, Span))
    return RawSpan(_pb_attributes(span.attributes, keys), resource, span.end_time_unix_nano, where)


def _decode_json(body: bytes, span_keys: Collection[str], resource_keys: Collection[str],
                 slow: SlowRead | None) -> list[RawSpan]:
    """The request's structure down to each span is walked here (a broken one is a `DecodeError` naming
    where); each resource and each span is read on its own, so one that does not parse rejects only itself
    (or, for a resource, its spans)."""
    try:
        try:
            document = json.loads(body)
        except RecursionError:  # nested deeper than json.loads reads: read again without recursing, charged
            document = bounded_json.loads(body, slow or _unlimited)
    except (UnicodeDecodeError, ValueError) as exc:
        raise DecodeError(f"body is not valid JSON: {exc}") from None
    document = _json_object(document, "request")
    spans: list[RawSpan] = []
    for r, resource_spans in enumerate(_json_list(document, "resourceSpans", "request")):
        where_r = f"resourceSpans[{r}]"
        resource_spans = _json_object(resource_spans, where_r)
        resource, resource_problem = _json_resource(resource_spans, where_r, resource_keys, slow)
        for s, scope_spans in enumerate(_json_list(resource_spans, "scopeSpans", where_r)):
            where_s = f"{where_r}.scopeSpans[{s}]"
            for p, obj in enumerate(_json_list(_json_object(scope_spans, where_s), "spans", where_s)):
                where = f"{where_s}.spans[{p}]"
                obj = _json_object(obj, where)
                if resource_problem is not None:
                    spans.append(RawSpan({}, resource, 0, where, resource_problem))
                else:
                    spans.append(_json_span(obj, resource, where, span_keys, slow))
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

