"""The fast reader of OTLP/JSON `Span` and `Resource` objects (as `json.loads` returns them).

It reads what OTLP exporters send, straight from the parsed JSON, without building protobuf messages: keys in
lowerCamelCase or as the original field names (the proto3 JSON mapping's parsers accept both), 64-bit integers
as decimal strings or numbers, enums as numbers or names (an unknown name: 0), trace and span ids in hex (the
OTLP JSON mapping),
every AnyValue variant but bytes, unknown fields ignored. Every field is checked against the message's schema,
taken from the protobuf descriptors: its JSON type, and its range for integers. (The OTLP specification tells
senders to use lowerCamelCase keys and enum numbers only; original names and enum names are read anyway, as
the OpenTelemetry Collector's OTLP receiver and json_format read them: docs/monitor.md, "The OTLP receiver".)

`google.protobuf.json_format` is the reference (`otlp_codec.decode_json_reference`): whatever this reader cannot
vouch for reading exactly as json_format does raises `Unvouched`, and the caller reads that object with
json_format, which accepts it or names what is wrong. That covers every refusal (an integer outside its type, a
lone surrogate, two AnyValue variants, a quoted bool, ...) and the rare spellings json_format also takes (a
float or an exponent for an integer, base64 ids, "NaN", bytes values, nulls in a oneof, one field under both
names). So this reader never accepts what json_format refuses, nor reads a value differently
(tests/monitor/test_otlp_json.py checks it against json_format on generated bodies).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

# json_format refuses more than 100 nested messages; objects nested deeper than this are left to it
_MAX_DEPTH = 64
_ID_FIELDS = frozenset({"trace_id", "span_id", "parent_span_id"})  # bytes fields OTLP/JSON writes in hex
_HEX_DIGITS = "0123456789abcdefABCDEF"
_EXACT_DOUBLE = 2**53  # an integer given for a double is read here up to this size

Reader = Callable[[Any, int], Any]  # (JSON value, depth of its message) -> the value as the monitor keeps it


class Unvouched(Exception):
    """This reader cannot vouch for reading the object as json_format would: read it with json_format."""


def _utf8(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (it has no lone surrogate, which json.loads lets through)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _read_string(value: Any, depth: int) -> str:
    if type(value) is str and (value.isascii() or _utf8(value)):
        return value
    raise Unvouched


def _read_bool(value: Any, depth: int) -> bool:
    if type(value) is bool:
        return value
    raise Unvouched


def _read_double(value: Any, depth: int) -> float:
    if type(value) is float and value - value == 0.0:  # finite: inf - inf and nan - nan are nan
        return value
    if type(value) is int and -_EXACT_DOUBLE <= value <= _EXACT_DOUBLE:
        return float(value)
    raise Unvouched


def _read_hex_id(value: Any, depth: int) -> str:
    """A trace or span id in hex (or empty); only checked, the monitor does not keep ids."""
    if type(value) is str and len(value) % 2 == 0 and not value.strip(_HEX_DIGITS):
        return value
    raise Unvouched


def _unvouched(value: Any, depth: int) -> Any:
    raise Unvouched


def _int_reader(low: int, high: int) -> Reader:
    """An integer field of this range, from a JSON number or a plain decimal string."""
    digits = len(str(low if -low > high else high))

    def read(value: Any, depth: int) -> int:
        if type(value) is int:
            number = value
        elif (type(value) is str and 0 < len(value) <= digits and value.isascii()
              and (value[1:] if value[0] == "-" else value).isdigit()):
            number = int(value)
        else:
            raise Unvouched
        if low <= number <= high:
            return number
        raise Unvouched

    return read


def _enum_reader(enum: EnumDescriptor) -> Reader:
    """An enum field, from its number (any int32 when the enum is open, as proto3 enums are) or its name; a name
    it does not know is the field's default, 0 (json_format, ignoring unknown fields, leaves it unset; the
    Collector's receiver reads 0)."""
    by_name = {value.name: value.number for value in enum.values}
    known = frozenset(by_name.values())

    def read(value: Any, depth: int) -> int:
        if type(value) is int and -(2**31) <= value < 2**31 and (not enum.is_closed or value in known):
            return value
        if type(value) is str:
            if value in by_name:
                return by_name[value]
            try:
                int(value)  # json_format reads a string it can take for a number as that number: left to it
            except ValueError:
                return 0
        raise Unvouched

    return read


_S32, _U32, _S64, _U64 = (-(2**31), 2**31 - 1), (0, 2**32 - 1), (-(2**63), 2**63 - 1), (0, 2**64 - 1)
_INT_RANGES = {FieldDescriptor.TYPE_INT32: _S32, FieldDescriptor.TYPE_SINT32: _S32, FieldDescriptor.TYPE_SFIXED32: _S32,
               FieldDescriptor.TYPE_UINT32: _U32, FieldDescriptor.TYPE_FIXED32: _U32,
               FieldDescriptor.TYPE_INT64: _S64, FieldDescriptor.TYPE_SINT64: _S64, FieldDescriptor.TYPE_SFIXED64: _S64,
               FieldDescriptor.TYPE_UINT64: _U64, FieldDescriptor.TYPE_FIXED64: _U64}
_SCALARS: dict[int, Reader] = {
    **{field_type: _int_reader(*bounds) for field_type, bounds in _INT_RANGES.items()},
    FieldDescriptor.TYPE_STRING: _read_string, FieldDescriptor.TYPE_BOOL: _read_bool,
    FieldDescriptor.TYPE_DOUBLE: _read_double,
}  # float (32-bit) and bytes other than ids: left to json_format


def _repeated(read_item: Reader) -> Reader:
    def read(value: Any, depth: int) -> list[Any]:
        if type(value) is not list:
            raise Unvouched
        return [_unvouched(item, depth) if item is None else read_item(item, depth) for item in value]

    return read


# Messages whose value the monitor keeps in another shape than the dict of their fields (as _pb_value does).
def _any_value(fields: dict[str, Any]) -> Any:
    return next(iter(fields.values()), None)  # the oneof's one variant, or None for an empty AnyValue


_ANY_VALUE, _KEY_VALUE = "opentelemetry.proto.common.v1.AnyValue", "opentelemetry.proto.common.v1.KeyValue"
_SHAPES: dict[str, Callable[[dict[str, Any]], Any]] = {
    _ANY_VALUE: _any_value,
    _KEY_VALUE: lambda fields: (fields.get("key", ""), fields.get("value")),
    "opentelemetry.proto.common.v1.ArrayValue": lambda fields: fields.get("values", []),
    "opentelemetry.proto.common.v1.KeyValueList": lambda fields: dict(fields.get("values", ())),
}
_MESSAGES: dict[str, Reader] = {}

Fields = dict[str, tuple[str, Reader, str | None, str | None]]  # JSON key -> name, reader, other key, oneof


# Shortcuts for the messages every attribute has, in the form exporters send them; anything else goes to
# the message's own reader, so a shortcut reads nothing differently. They look their field readers up when
# called: `fields` is filled in after the shortcut is made.
def _any_value_shortcut(read: Reader, fields: Fields) -> Reader:
    def read_any_value(obj: Any, depth: int) -> Any:
        if type(obj) is dict and len(obj) == 1 and depth <= _MAX_DEPTH:
            for key, value in obj.items():  # one variant, given once
                spec = fields.get(key)
                if spec is not None and value is not None:
                    return spec[1](value, depth + 1)
        return read(obj, depth)

    return read_any_value


def _key_value_shortcut(read: Reader, fields: Fields) -> Reader:
    def read_key_value(obj: Any, depth: int) -> Any:
        if type(obj) is dict and len(obj) == 2 and depth <= _MAX_DEPTH:
            key, value = obj.get("key"), obj.get("value")
            if type(key) is str and key.isascii() and value is not None:  # just these two, both set
                return key, fields["value"][1](value, depth + 1)
        return read(obj, depth)

    return read_key_value


_SHORTCUTS = {_ANY_VALUE: _any_value_shortcut, _KEY_VALUE: _key_value_shortcut}


def _field_reader(field: FieldDescriptor) -> Reader:
    message = field.message_type
    if message is not None:  # maps and well-known types have JSON forms of their own: left to json_format
        special = message.GetOptions().map_entry or message.full_name.startswith("google.protobuf.")
        read = _unvouched if special else _message_reader(message)
    elif field.enum_type is not None:
        read = _enum_reader(field.enum_type)
    elif field.type == FieldDescriptor.TYPE_BYTES:
        read = _read_hex_id if field.name in _ID_FIELDS else _unvouched
    else:
        read = _SCALARS.get(field.type, _unvouched)
    return _repeated(read) if field.is_repeated else read


def _unknown_key_ignored(key: str) -> bool:
    """Whether json_format ignores this unknown key too: it reads "[name]" as an extension (and refuses it),
    and fails on a key that is not valid UTF-8."""
    return key[:1] != "[" and (key.isascii() or _utf8(key))


def _message_reader(message: Descriptor) -> Reader:
    """The reader of one message type (built once per type; the fields of a recursive one are filled in after)."""
    known = _MESSAGES.get(message.full_name)
    if known is not None:
        return known
    fields: Fields = {}
    shape = _SHAPES.get(message.full_name)

    def read(obj: Any, depth: int) -> Any:
        if type(obj) is not dict or depth > _MAX_DEPTH:
            raise Unvouched
        out: dict[str, Any] = {}
        oneofs: set[str] | None = None
        for key, value in obj.items():
            spec = fields.get(key)
            if spec is None:
                if _unknown_key_ignored(key):
                    continue
                raise Unvouched
            name, read_field, other_key, oneof = spec
            if other_key in obj:  # one field under both names: json_format keeps the later
                raise Unvouched
            if oneof is not None:  # a null variant clears the oneof in json_format; two variants are refused
                oneofs = oneofs if oneofs is not None else set()
                if value is None or oneof in oneofs:
                    raise Unvouched
                oneofs.add(oneof)
            if value is not None:  # null: the field's default
                out[name] = read_field(value, depth + 1)
        return out if shape is None else shape(out)

    shortcut = _SHORTCUTS.get(message.full_name)
    # registered before its fields are filled in: a recursive message (AnyValue holds ArrayValue holds AnyValue)
    # asks for its own reader on the way
    _MESSAGES[message.full_name] = read if shortcut is None else shortcut(read, fields)
    for field in message.fields:
        read_field, oneof = _field_reader(field), field.containing_oneof
        oneof_name = oneof.name if oneof is not None else None
        if field.json_name == field.name:
            fields[field.name] = (field.name, read_field, None, oneof_name)
        else:
            fields[field.json_name] = (field.name, read_field, field.name, oneof_name)
            fields[field.name] = (field.name, read_field, field.json_name, oneof_name)
    return _MESSAGES[message.full_name]


_read_span = _message_reader(Span.DESCRIPTOR)
_read_resource = _message_reader(Resource.DESCRIPTOR)


def _kept(attributes: list[tuple[str, Any]], keys: Collection[str]) -> dict[str, Any]:
    return {key: value for key, value in attributes if key in keys}


def read_span(obj: dict[str, Any], keys: Collection[str]) -> tuple[dict[str, Any], int]:
    """The attributes of `keys` and the end time (ns) of one OTLP/JSON span object; `Unvouched` if in doubt."""
    fields = _read_span(obj, 1)
    return _kept(fields.get("attributes", []), keys), fields.get("end_time_unix_nano", 0)


def read_resource(obj: dict[str, Any], keys: Collection[str]) -> dict[str, Any]:
    """The attributes of `keys` of one OTLP/JSON resource object; `Unvouched` if in doubt."""
    return _kept(_read_resource(obj, 1).get("attributes", []), keys)
