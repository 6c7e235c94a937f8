"""LangChain messages <-> ctxwatch messages; `langchain_core` is imported only when needed.

Read: `SystemMessage`, `HumanMessage`, `AIMessage` and `ToolMessage` objects, and their dict form
``{"type": "system" | "human" | "ai" | "tool", "data": {...}}`` (what ``messages_to_dict`` writes).
Content is a string or a list of strings and blocks (``text`` blocks and bare strings become
TextPart, other blocks OpaquePart); an AIMessage's ``tool_calls`` become ToolCall parts (``args``
as compact JSON text); a ToolMessage needs ``tool_call_id`` and becomes one ToolResult (an error
when ``status == "error"``). ``id`` and ``name`` go to `Message.id` / `Message.name`; any other
field that differs from its default (objects) or is present (dicts) goes to the extra envelope.

Write: objects (default) or the dict form the messages were read from. Reading objects needs no
import (they are already loaded); writing objects imports ``langchain_core`` and fails with a clear
message when it is not installed (``pip install 'ctxwatch[langchain]'``).
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Sequence
from functools import cache
from typing import Any

from ..errors import InvalidContextError
from ..model import Message, Part, ToolCall, ToolResult
from . import _shape
from ._reader import DEFAULT_LIMITS, MISSING, Limits, Reader
from ._shape import STR, block_entries, indexed, leftovers, read_content, write_content

FORMAT = "langchain"
ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
TYPES = {"system": "system", "developer": "system", "user": "human", "assistant": "ai", "tool": "tool"}
CLASSES = {"system": "SystemMessage", "human": "HumanMessage", "ai": "AIMessage", "tool": "ToolMessage"}
_TEXT = frozenset({"text"})
_CALL_KEYS = frozenset({"name", "args", "id", "type"})


def is_langchain_object(item: object) -> bool:
    module = type(item).__module__
    return module.startswith(("langchain_core.", "langchain.")) and hasattr(item, "type")


def _is_role(kind: object) -> bool:
    return isinstance(kind, str) and kind in ROLES


def is_langchain_dict(item: object) -> bool:
    return isinstance(item, dict) and _is_role(item.get("type")) and isinstance(item.get("data"), dict)


def read(item: Any, index: int | None, limits: Limits = DEFAULT_LIMITS) -> Message:
    r = Reader(index, limits)
    if is_langchain_object(item):
        kind = item.type
        data = vars(item)
        defaults = _defaults(type(item))  # type: ignore[arg-type]  # a class is hashable
        shape: dict[str, Any] = {}
    else:
        outer = r.mapping(item, None)
        kind = outer.get("type", MISSING)
        data = r.mapping(outer.get("data", MISSING), "data")
        defaults = {}
        shape = {"form": "dict"}
        if len(outer) > 2:
            shape["o"] = leftovers(r, outer, {"type", "data"})
    if not _is_role(kind):
        r.fail("type", f"unsupported LangChain message type {reprlib.repr(kind)} (expected one of {', '.join(ROLES)})")
    role = ROLES[kind]
    content = data.get("content", MISSING)
    parts, content_shape = read_content(r, content, "content", text_types=_TEXT, default_text="text",
                                        empty=STR, bare=True)
    shape.update(content_shape)
    consumed = {"content"}
    if data.get("type", MISSING) == kind:
        consumed.add("type")
    elif "type" not in data:
        shape["nt"] = 1
    msg_id, name = _optional(r, data, "id", consumed), _optional(r, data, "name", consumed)
    if role == "tool":
        consumed.add("tool_call_id")
        parts = [ToolResult(r.key(data, "tool_call_id", "tool_call_id"), _shape.result_output(content, parts),
                            data.get("status") == "error")]
    elif role == "assistant" and "tool_calls" in data:
        consumed.add("tool_calls")
        parts.extend(_read_calls(r, data["tool_calls"], shape))
    elif role == "assistant":
        shape["tc"] = "absent"
    unset = {k for k in defaults if k not in consumed and data.get(k, MISSING) == defaults[k]}
    keep = leftovers(r, data, consumed | unset)
    return Message(role, parts, id=msg_id, name=name, **_shape.envelope(FORMAT, keep, shape))


def _optional(r: Reader, data: dict, key: str, consumed: set[str]) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    consumed.add(key)
    return r.text(value, key)


def _read_calls(r: Reader, calls: Any, shape: dict) -> list[Part]:
    out: list[Part] = []
    entries: list[tuple[int, dict]] = []
    for i, call in enumerate(r.array(calls, "tool_calls")):
        where = f"tool_calls[{i}]"
        c = r.mapping(call, where)
        call_id = c.get("id")
        if call_id is None:
            r.fail(where + ".id", "missing")
        args = r.json(r.mapping(c.get("args", MISSING), where + ".args"), where + ".args")
        out.append(ToolCall(r.text(call_id, where + ".id"), r.key(c, "name", where + ".name"),
                            json.dumps(args, ensure_ascii=False, separators=(",", ":"))))
        entry: dict[str, Any] = {}
        if c.get("type", MISSING) != "tool_call":
            entry["t"] = r.json(c["type"], where + ".type") if "type" in c else "absent"
        if not _CALL_KEYS.issuperset(c):
            entry["k"] = leftovers(r, c, _CALL_KEYS, where)
        entries.append((i, entry))
    if calls_shape := indexed(entries, len(out)):
        shape["calls"] = calls_shape
    return out


@cache
def _defaults(cls: type) -> dict[str, Any]:
    """Field defaults of a LangChain message class (fields without a default are left out)."""
    out = {}
    for name, info in getattr(cls, "model_fields", {}).items():
        if not info.is_required():
            out[name] = info.get_default(call_default_factory=True)
    return out


def write(messages: Sequence[Message]) -> list[Any]:
    out: list[Any] = []
    for index, m in enumerate(messages):
        keep, shape = _shape.unpack(m, FORMAT)
        content, calls, results = _shape.split_parts(m.parts)
        if m.role == "tool" and len(results) == 1 and not content and not calls:
            out.append(_build("tool", _tool_data(results[0], shape, index), keep, shape, m))
            continue
        out.extend(_build("tool", _tool_data(res, {}, index), {}, {}, None) for res in results)
        if results and not content and not calls:
            continue
        kind = TYPES.get(m.role, "human")
        data: dict[str, Any] = {"content": write_content(content, shape, index=index, default_text="text",
                                                         empty=STR)}
        if kind == "ai" and (calls or (shape.get("form") == "dict" and not shape.get("tc"))):
            entries = block_entries(shape.get("calls", {}), len(calls))
            data["tool_calls"] = [_write_call(c, entries.get(i, {}), index) for i, c in enumerate(calls)]
        out.append(_build(kind, data, keep, shape, m))
    return out


def _tool_data(result: ToolResult, shape: dict, index: int) -> dict[str, Any]:
    output = _shape.write_output(result.output, shape, index=index, default_text="text", empty=STR)
    data: dict[str, Any] = {"content": output, "tool_call_id": result.call_id}
    if result.is_error:
        data["status"] = "error"
    return data


def _write_call(call: ToolCall, entry: dict, index: int) -> dict:
    try:
        args = json.loads(call.arguments)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        raise InvalidContextError("tool call arguments are not a JSON object, so they cannot be LangChain "
                                  "tool call args", index=index, field=f"tool call {call.id!r}")
    d: dict[str, Any] = {"name": call.name, "args": args, "id": call.id}
    kind = entry.get("t", "tool_call")
    if kind != "absent":
        d["type"] = kind
    d.update(entry.get("k", {}))
    return d


def _build(kind: str, data: dict, keep: dict, shape: dict, m: Message | None) -> Any:
    if m is not None:
        if m.id is not None:
            data["id"] = m.id
        if m.name is not None:
            data["name"] = m.name
    data.update(keep)
    if shape.get("form") != "dict":
        return _classes()[kind](**data)
    if not shape.get("nt"):
        data.setdefault("type", kind)
    return {"type": kind, "data": data, **shape.get("o", {})}


@cache
def _classes() -> dict[str, type]:
    try:
        from langchain_core import messages as lc
    except ImportError:
        raise InvalidContextError("writing LangChain messages needs langchain-core: "
                                  "pip install 'ctxwatch[langchain]'") from None
    return {kind: getattr(lc, name) for kind, name in CLASSES.items()}
