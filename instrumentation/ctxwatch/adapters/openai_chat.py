"""OpenAI Chat Completions messages <-> ctxwatch messages.

Read: a dict with ``role`` system, developer, user, assistant or tool; ``content`` a string, null,
absent or a list of parts (``text`` parts become TextPart, image/audio/file/refusal parts an
OpaquePart); an assistant's ``tool_calls`` (``function`` and ``custom`` calls) become ToolCall parts
after the content; a tool message needs a string ``tool_call_id`` and becomes one ToolResult.
``name`` is kept on `Message.name`; every other field goes to the extra envelope.

Write: one dict per message. A message from another format that carries tool results beside
other content (an Anthropic user turn) is split into one ``tool`` message per result, then the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model import Message, Part, ToolCall, ToolResult
from . import _shape
from ._reader import DEFAULT_LIMITS, MISSING, Limits, Reader
from ._shape import NULL, block_entries, indexed, leftovers, read_content, write_content

FORMAT = "openai_chat"
ROLES = ("system", "developer", "user", "assistant", "tool")
_TEXT = frozenset({"text"})
_CONSUMED = {
    "tool": frozenset({"role", "content", "name", "tool_call_id"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls"}),
}
_PLAIN = frozenset({"role", "content", "name"})
_CALL_KEYS = {flavour: frozenset({"id", "type", flavour}) for flavour in ("function", "custom")}
_FN_KEYS = {"function": ("arguments", frozenset({"name", "arguments"})),
            "custom": ("input", frozenset({"name", "input"}))}


def read(item: Any, index: int | None, limits: Limits = DEFAULT_LIMITS) -> Message:
    r = Reader(index, limits)
    d = r.mapping(item, None)
    role = r.key(d, "role", "role")
    if role not in ROLES:
        r.fail("role", f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    content = d.get("content", MISSING)
    parts, shape = read_content(r, content, "content", text_types=_TEXT, default_text="text", empty=NULL)
    consumed = _CONSUMED.get(role, _PLAIN)
    name = d.get("name")
    if name is None:
        consumed = consumed - {"name"}  # an explicit null name is kept as it was
    else:
        r.text(name, "name")
    if role == "tool":
        parts = [ToolResult(r.key(d, "tool_call_id", "tool_call_id"), _shape.result_output(content, parts))]
    elif role == "assistant":
        calls = d.get("tool_calls", MISSING)
        if calls is None:
            consumed = consumed - {"tool_calls"}  # kept as a null key: an annotation (_shape), as absent
        elif calls is not MISSING:
            parts.extend(_read_calls(r, calls, shape))
    keep = leftovers(r, d, consumed)
    return Message(role, parts, name=name, **_shape.envelope(FORMAT, keep, shape))


def _read_calls(r: Reader, calls: object, shape: dict) -> list[Part]:
    calls = r.array(calls, "tool_calls")
    if not calls:
        shape["tc"] = "empty"
    out: list[Part] = []
    entries: list[tuple[int, dict]] = []
    for i, call in enumerate(calls):
        where = f"tool_calls[{i}]"
        c = r.mapping(call, where)
        call_id = r.key(c, "id", where + ".id")
        kind = c.get("type", MISSING)
        flavour = "custom" if kind == "custom" else "function"
        fn = r.mapping(c.get(flavour, MISSING), f"{where}.{flavour}")
        arg_key, fn_keys = _FN_KEYS[flavour]
        out.append(ToolCall(call_id, r.key(fn, "name", f"{where}.{flavour}.name"),
                            r.key(fn, arg_key, f"{where}.{flavour}.{arg_key}")))
        entry: dict[str, Any] = {}
        if kind != "function":
            entry["t"] = "absent" if kind is MISSING else kind
        if not _CALL_KEYS[flavour].issuperset(c):
            entry["k"] = leftovers(r, c, _CALL_KEYS[flavour], where)
        if not fn_keys.issuperset(fn):
            entry["fk"] = leftovers(r, fn, fn_keys, f"{where}.{flavour}")
        entries.append((i, entry))
    if calls_shape := indexed(entries, len(calls)):
        shape["calls"] = calls_shape
    return out


def write(messages: Sequence[Message]) -> list[dict]:
    out: list[dict] = []
    for index, m in enumerate(messages):
        out.extend(_write_one(m, index))
    return out


def _write_one(m: Message, index: int) -> list[dict]:
    keep, shape = _shape.unpack(m, FORMAT)
    content, calls, results = _shape.split_parts(m.parts)
    if m.role == "tool" and len(results) == 1 and not content and not calls:
        d: dict[str, Any] = {"role": "tool", "tool_call_id": results[0].call_id}
        _put(d, "content", _output(results[0], shape, index))
        return [_finish(d, m, keep)]
    out = [{"role": "tool", "tool_call_id": r.call_id, "content": _output(r, {}, index)} for r in results]
    if results and not content and not calls:
        return out
    d = {"role": "user" if m.role == "tool" else m.role}
    _put(d, "content", write_content(content, shape, index=index, default_text="text", empty=NULL))
    if calls:
        entries = block_entries(shape.get("calls", {}), len(calls))
        d["tool_calls"] = [_write_call(c, entries.get(i, {})) for i, c in enumerate(calls)]
    elif shape.get("tc"):
        d["tool_calls"] = []
    out.append(_finish(d, m, keep))
    return out


def _output(result: ToolResult, shape: dict, index: int) -> Any:
    return _shape.write_output(result.output, shape, index=index, default_text="text", empty=NULL)


def _write_call(call: ToolCall, entry: dict) -> dict:
    kind = entry.get("t", "function")
    flavour = "custom" if kind == "custom" else "function"
    arg_key = _FN_KEYS[flavour][0]
    d: dict[str, Any] = {"id": call.id}
    if kind != "absent":
        d["type"] = kind
    d[flavour] = {"name": call.name, arg_key: call.arguments, **entry.get("fk", {})}
    d.update(entry.get("k", {}))
    return d


def _put(d: dict, key: str, value: Any) -> None:
    if value is not MISSING:
        d[key] = value


def _finish(d: dict, m: Message, keep: dict) -> dict:
    if m.name is not None:
        d["name"] = m.name
    d.update(keep)
    return d
