"""OpenAI Responses input items <-> ctxwatch messages.

Read, one message per item:
- ``message`` items (and "easy" ``{"role", "content"}`` items without a type): role user, system,
  developer or assistant; content a string or ``input_text`` / ``output_text`` parts (TextPart),
  other parts (images, files, refusals) OpaquePart. The item ``id`` becomes `Message.id`.
- ``function_call`` / ``custom_tool_call`` (``call_id``, ``name``, ``arguments`` / ``input``): an
  assistant message with one ToolCall.
- ``function_call_output`` / ``custom_tool_call_output`` (``call_id``, ``output`` a string or
  parts): a tool message with one ToolResult.
- every other item (``reasoning``, ``web_search_call``, ``compaction``, ``item_reference``...):
  one OpaquePart holding the whole item, role tool for ``*_output`` items, assistant otherwise.

Write: the same items back. A message from another format becomes its ``function_call_output``
items, then a ``message`` item for its content, then its ``function_call`` items.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..model import Message, OpaquePart, Part, ToolCall, ToolResult
from . import _shape
from ._reader import DEFAULT_LIMITS, MISSING, Limits, Reader
from ._shape import LIST, leftovers, opaque, read_content, write_content

FORMAT = "openai_responses"
ROLES = ("user", "system", "developer", "assistant")
TEXT_TYPES = frozenset({"input_text", "output_text"})
CALL_TYPES = {"function_call": "arguments", "custom_tool_call": "input"}
OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_MESSAGE_KEYS = frozenset({"type", "role", "content", "id"})


def read(item: Any, index: int | None, limits: Limits = DEFAULT_LIMITS) -> Message:
    r = Reader(index, limits)
    d = r.mapping(item, None)
    kind = d.get("type", MISSING)
    if kind is MISSING or kind == "message":
        return _read_message(r, d, kind)
    if not isinstance(kind, str):
        r.fail("type", f"expected a string, got {type(kind).__name__}")
    item_id = _item_id(r, d)
    consumed = {"type", "call_id"} | ({"id"} if item_id is not None else set())
    if kind in CALL_TYPES:
        arg_key = CALL_TYPES[kind]
        call = ToolCall(r.key(d, "call_id", "call_id"), r.key(d, "name", "name"), r.key(d, arg_key, arg_key))
        keep = leftovers(r, d, consumed | {"name", arg_key})
        return Message("assistant", [call], id=item_id, **_shape.envelope(FORMAT, keep, _kind_shape(kind)))
    if kind in OUTPUT_TYPES:
        call_id = r.key(d, "call_id", "call_id")
        value = d.get("output", MISSING)
        parts, shape = read_content(r, value, "output", text_types=TEXT_TYPES, default_text="input_text",
                                    empty=LIST)
        shape.update(_kind_shape(kind))
        keep = leftovers(r, d, consumed | {"output"})
        return Message("tool", [ToolResult(call_id, _shape.result_output(value, parts))], id=item_id,
                       **_shape.envelope(FORMAT, keep, shape))
    role = "tool" if kind.endswith("_output") else "assistant"
    return Message(role, [opaque(r, d, "item", kind)], id=item_id, extra=_shape.pack_extra(FORMAT, None, {"raw": 1}))


def _read_message(r: Reader, d: dict, kind: object) -> Message:
    role = r.key(d, "role", "role")
    if role not in ROLES:
        r.fail("role", f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    parts, shape = read_content(r, d.get("content", MISSING), "content", text_types=TEXT_TYPES,
                                default_text=_default_text(role), empty=LIST)
    if kind is MISSING:
        shape["t"] = "absent"
    item_id = _item_id(r, d)
    consumed = _MESSAGE_KEYS if item_id is not None else _MESSAGE_KEYS - {"id"}
    keep = leftovers(r, d, consumed)
    return Message(role, parts, id=item_id, **_shape.envelope(FORMAT, keep, shape))


def _item_id(r: Reader, d: dict) -> str | None:
    value = d.get("id")
    return None if value is None else r.text(value, "id")


def _kind_shape(kind: str) -> dict:
    return {"t": kind} if kind.startswith("custom_") else {}


def _default_text(role: str) -> str:
    return "output_text" if role == "assistant" else "input_text"


def write(messages: Sequence[Message]) -> list[dict]:
    out: list[dict] = []
    for index, m in enumerate(messages):
        keep, shape = _shape.unpack(m, FORMAT)
        if shape.get("raw") and len(m.parts) == 1 and type(m.parts[0]) is OpaquePart:
            out.append(json.loads(m.parts[0].data))
            continue
        content, calls, results = _shape.split_parts(m.parts)
        items = [_write_output(res, shape, index) for res in results]
        if content or not (calls or results):
            items.append(_write_message(m, content, shape, index))
        items.extend(_write_call(call, shape) for call in calls)
        if len(items) == 1:
            if m.id is not None:
                items[0]["id"] = m.id
            items[0].update(keep)
        out.extend(items)
    return out


def _write_message(m: Message, content: list[Part], shape: dict, index: int) -> dict:
    role = "user" if m.role == "tool" else m.role
    d: dict[str, Any] = {} if shape.get("t") == "absent" else {"type": "message"}
    d["role"] = role
    value = write_content(content, shape, index=index, default_text=_default_text(role), empty=LIST)
    if value is not MISSING:
        d["content"] = value
    return d


def _write_call(call: ToolCall, shape: dict) -> dict:
    kind = shape.get("t", "function_call")
    kind = kind if kind in CALL_TYPES else "function_call"
    return {"type": kind, "call_id": call.id, "name": call.name, CALL_TYPES[kind]: call.arguments}


def _write_output(result: ToolResult, shape: dict, index: int) -> dict:
    kind = shape.get("t", "function_call_output")
    d: dict[str, Any] = {"type": kind if kind in OUTPUT_TYPES else "function_call_output",
                         "call_id": result.call_id}
    value = _shape.write_output(result.output, shape, index=index, default_text="input_text", empty=LIST)
    if value is not MISSING:
        d["output"] = value
    return d
