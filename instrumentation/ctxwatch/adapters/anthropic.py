"""Anthropic Messages <-> ctxwatch messages.

Read: ``{"role": "user" | "assistant", "content": str | blocks}``. ``text`` blocks become TextPart,
``tool_use`` blocks ToolCall (``input`` kept as compact JSON text in `ToolCall.arguments`, key
order preserved), ``tool_result`` blocks ToolResult (content a string, blocks or absent;
``is_error``), every other block (``thinking``, ``redacted_thinking``, ``image``, ``document``,
server tool blocks) an OpaquePart. Several ``tool_use`` blocks may share one assistant message and
their ``tool_result`` blocks the next user message, exactly as the API sends them.

A request dict ``{"system": ..., "messages": [...], ...}`` is accepted too: ``system`` becomes a
leading system message, and the request's other keys (and key order) ride in that message's
extra envelope (or the first message's, without a system), so writing the messages back gives
the request dict again.

Write: one message dict per message; a message list starting with a system message (or carrying
a request envelope) is written as a request dict. Tool messages from another format become
``tool_result`` blocks of one user message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, cast

from ..errors import InvalidContextError
from ..fastjson import encoded
from ..model import SYSTEM_ROLES, Message, OpaquePart, Part, TextPart, ToolCall, ToolResult
from . import _shape
from ._reader import DEFAULT_LIMITS, MISSING, Limits, Reader
from ._shape import ABSENT, LIST, leftovers, read_content, write_content

FORMAT = "anthropic"
ROLES = ("user", "assistant")
_TEXT = frozenset({"text"})
_MESSAGE_KEYS = frozenset({"role", "content"})
_USE_KEYS = frozenset({"type", "id", "name", "input"})
_RESULT_KEYS = frozenset({"type", "tool_use_id", "content", "is_error"})


def read(item: Any, index: int | None, limits: Limits = DEFAULT_LIMITS) -> Message:
    role, parts, keep, shape = _read_message(item, index, limits)
    return Message(role, parts, **_shape.envelope(FORMAT, keep, shape))


def read_parts(item: Any, index: int | None, limits: Limits = DEFAULT_LIMITS) -> Message:
    """As `read`, the same checks, but without the envelope that writes the message back in its own
    shape (`extra` is None): for a reader that keeps only roles and parts (a recorded session)."""
    parts = _ordinary_parts(item, limits)
    if parts is not None:
        return Message(item["role"], parts)
    role, parts, _, _ = _read_message(item, index, limits)
    return Message(role, parts)


def _ordinary_parts(item: Any, limits: Limits) -> list[Part] | None:
    """The parts `_read_message` reads from `item`, read in one pass when every check it makes is sure to
    pass; None when any might not, or the message holds anything less common (the caller then reads it with
    `_read_message`, which names what is wrong). Covered: a ``role``/``content`` dict whose content is a string
    or a list of ``text`` blocks, ``tool_use`` blocks, ``tool_result`` blocks with string content, and other
    blocks with a string ``type`` (opaque parts); each JSON value written with `encoded` in at most
    ``max_depth`` containers, so it is nested no deeper than `Reader.json` allows and holds no float.
    Characters are counted from above (a value's compact JSON is at least as long as its keys and strings),
    so within the cap here is within it there. tests/instrumentation/test_anthropic_ordinary_parts.py checks
    that both ways agree."""
    if type(item) is not dict or not _MESSAGE_KEYS.issuperset(item):
        return None
    role, content = item.get("role"), item.get("content")
    if type(role) is not str or role not in ROLES:
        return None
    room = limits.max_message_chars - len(role)
    if type(content) is str:
        return [TextPart(content)] if len(content) <= room else None
    if type(content) is not list:
        return None
    depth = limits.max_depth
    parts: list[Part] = []
    for block in content:
        if type(block) is not dict:
            return None
        kind = block.get("type")
        if type(kind) is not str:
            return None
        if kind == "text":
            text = block.get("text")
            if type(text) is not str or not _shape.TEXT_KEYS.issuperset(block):
                return None
            room -= len(text)
            parts.append(TextPart(text))
        elif kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            arguments = encoded(block["input"], max_containers=depth) if "input" in block else None
            if type(call_id) is not str or type(name) is not str or arguments is None:
                return None
            room -= len(call_id) + len(name) + len(arguments)
            for key in block.keys() - _USE_KEYS:  # kept for the round trip: only checked here
                other = encoded(block[key], max_containers=depth) if type(key) is str else None
                if other is None:
                    return None
                room -= len(key) + len(other)
            parts.append(ToolCall(call_id, name, arguments.decode("utf-8")))
        elif kind == "tool_result":
            call_id, output, flag = block.get("tool_use_id"), block.get("content"), block.get("is_error", False)
            if type(call_id) is not str or type(output) is not str or type(flag) is not bool \
                    or not _RESULT_KEYS.issuperset(block):
                return None
            room -= len(call_id) + len(output)
            parts.append(ToolResult(call_id, output, flag))
        else:
            if _shape.annotations_of(block):  # kept aside from the block's data
                return None
            data = encoded(block, sort_keys=True, max_containers=depth)
            if data is None:
                return None
            room -= len(data)
            parts.append(OpaquePart(kind, data.decode("utf-8")))
    return parts if room >= 0 else None


def _read_message(item: Any, index: int | None, limits: Limits) -> tuple[str, list[Part], dict, dict]:
    r = Reader(index, limits)
    d = r.mapping(item, None)
    role = r.key(d, "role", "role")
    if role not in ROLES:
        hint = "; pass it as the request's 'system'" if role in SYSTEM_ROLES else ""
        r.fail("role", f"unknown role {role!r} for Anthropic messages (expected user or assistant){hint}")
    parts, shape = _read_content(r, d.get("content", MISSING), "content")
    return role, parts, leftovers(r, d, _MESSAGE_KEYS), shape


def _read_content(r: Reader, value: Any, field: str) -> tuple[list[Part], dict]:
    return read_content(r, value, field, text_types=_TEXT, default_text="text", empty=LIST,
                        blocks=_read_block)


def _read_block(r: Reader, block: dict, where: str) -> tuple[Part, dict] | None:
    kind = block.get("type")
    if kind == "tool_use":
        if "input" not in block:
            r.fail(where + ".input", "missing")
        tool_input = r.json(block["input"], where + ".input")
        fast = encoded(tool_input)
        part: Part = ToolCall(r.key(block, "id", where + ".id"), r.key(block, "name", where + ".name"),
                              fast.decode("utf-8") if fast is not None
                              else json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")))
        rest = _USE_KEYS
    elif kind == "tool_result":
        call_id = r.key(block, "tool_use_id", where + ".tool_use_id")
        value = block.get("content", MISSING)
        nested, nested_shape = read_content(r, value, where + ".content", text_types=_TEXT,
                                            default_text="text", empty=ABSENT)
        flag = block.get("is_error", MISSING)
        is_error = False if flag is MISSING else r.flag(flag, where + ".is_error")
        part = ToolResult(call_id, _shape.result_output(value, nested), is_error)
        rest = _RESULT_KEYS
    else:
        return None
    entry: dict[str, Any] = {}
    if not rest.issuperset(block):
        entry["k"] = leftovers(r, block, rest, where)
    if kind == "tool_result":
        if nested_shape:
            entry["s"] = nested_shape
        if flag is False:
            entry["e"] = 1
    return part, entry


def _block_writer(index: int) -> Callable[[Part, dict], dict]:
    def write_block(part: Part, entry: dict) -> dict:
        if isinstance(part, ToolCall):
            return _write_use(part, entry, index)
        return _write_result(cast(ToolResult, part), entry, index)  # write_content hands over calls and results
    return write_block


def _write_use(part: ToolCall, entry: dict, index: int) -> dict:
    try:
        tool_input = json.loads(part.arguments)
    except ValueError:
        raise InvalidContextError("tool call arguments are not JSON, so they cannot be an Anthropic tool_use "
                                  "input", index=index, field=f"tool call {part.id!r}") from None
    return {"type": "tool_use", "id": part.id, "name": part.name, "input": tool_input, **entry.get("k", {})}


def _write_result(part: ToolResult, entry: dict, index: int) -> dict:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.call_id}
    content = _shape.write_output(part.output, entry.get("s", {}), index=index, default_text="text", empty=ABSENT)
    if content is not MISSING:
        block["content"] = content
    if part.is_error or entry.get("e"):
        block["is_error"] = part.is_error
    block.update(entry.get("k", {}))
    return block


# --- request dicts --------------------------------------------------------------------------

def is_request(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("messages"), list)


def read_request(data: dict, limits: Limits, read_one: Callable[[Any, int], Message]) -> list[Message]:
    """Messages of a request dict; `read_one(item, index)` reads one entry of ``messages``."""
    r = Reader(None, limits)
    envelope = {"order": list(data), "other": leftovers(r, data, {"system", "messages"})}
    out = [read_one(item, i) for i, item in enumerate(data["messages"])]
    if "system" in data:
        parts, shape = read_content(Reader(None, limits), data["system"], "system", text_types=_TEXT,
                                    default_text="text", empty=LIST)
        out.insert(0, Message("system", parts, **_shape.envelope(FORMAT, None, {**shape, "req": envelope})))
    elif out:
        first = out[0]
        keep, shape = _shape.unpack(first, FORMAT)
        out[0] = Message(first.role, first.parts, id=first.id, name=first.name,
                         **_shape.envelope(FORMAT, keep, {**shape, "req": envelope}))
    return out


def write(messages: Sequence[Message]) -> list[dict] | dict:
    """Message dicts, or a request dict when the list starts with a system message or a request envelope."""
    envelope: dict | None = None
    system: Any = MISSING
    if messages:
        _, shape = _shape.unpack(messages[0], FORMAT)
        envelope = shape.get("req")
        if messages[0].role in SYSTEM_ROLES:
            system = write_content(messages[0].parts, shape, index=0, default_text="text", empty=LIST)
            envelope = envelope or {"order": ["system", "messages"], "other": {}}
    offset = 0 if system is MISSING else 1
    out: list[dict] = []
    merged_tool_turn = False
    for index, m in enumerate(messages[offset:], start=offset):
        keep, shape = _shape.unpack(m, FORMAT)
        if m.role in SYSTEM_ROLES:
            raise InvalidContextError("Anthropic messages have no system role; only a leading system message "
                                      "can be written (as the request's 'system')", index=index, field="role")
        content = write_content(m.parts, shape, index=index, default_text="text", empty=LIST,
                                blocks=_block_writer(index))
        if m.role == "tool" and merged_tool_turn:  # from another format: results share one user turn
            out[-1]["content"].extend(content)
            continue
        d: dict[str, Any] = {"role": "user" if m.role == "tool" else m.role}
        if content is not MISSING:
            d["content"] = content
        d.update(keep)
        out.append(d)
        merged_tool_turn = m.role == "tool"
    if envelope is None:
        return out
    request: dict[str, Any] = {}
    other = envelope.get("other", {})
    for key in envelope.get("order", ()):
        if key == "messages":
            request["messages"] = out
        elif key == "system":
            if system is not MISSING:
                request["system"] = system
        elif key in other:
            request[key] = other[key]
    request.setdefault("messages", out)
    if system is not MISSING:
        request.setdefault("system", system)
    return request
