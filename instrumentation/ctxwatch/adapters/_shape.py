"""The `extra` envelope of a converted message, and reading and writing content lists.

An adapter keeps in `Message.extra` exactly what it needs to give a message back in its own
shape: the fields it does not model (``keep``) and how modelled fields were spelled (``shape``:
content as a string, a list, null or absent; per-block types and extra keys). The envelope names
its format; a message written to another format ignores it and gets that format's defaults. A
message with nothing to keep has ``extra=None``, so the same content read from two formats has
the same digest.

Content lists are read into `TextPart`s and `OpaquePart`s (plus whatever a format's own block
reader handles, such as Anthropic's ``tool_use``), one part per block, in order.

One rule of message identity lives here: what the model does not read is an annotation, not content:

- a ``cache_control`` breakpoint (of a block, or of the message: LiteLLM's and SWE-agent's tool messages
  carry it there). It changes nothing the model reads (the provider's cache is keyed on content);
- a key whose value is null (of a block, or of the message): the APIs read it as an absent one (an SDK
  object dumped with or without ``exclude_none`` is the same message);
- the list form of a content holding exactly one plain text block (``[{"type": "text", "text": "x"}]``,
  its breakpoint aside): the provider reads it as the string ``"x"``. SWE-agent and prompt-caching SDK
  loops turn a string into such a list to carry the breakpoint, and back. A tool result's output read
  from such a list is its string (`result_output`), so the two forms are one `ToolResult` too;
- the keys of an Anthropic request dict besides ``system`` and ``messages`` (``model``, ``max_tokens``,
  ``tools``...), which ride on its first message (``req``): settings of the request, not of the message.

`read_content` keeps a block's annotations in its shape entry (``a``) and a one-text-block list form as
``c1``; `envelope` moves them, the request keys and the message's null keys and breakpoint out of the
envelope into the message's `annotations`, which are outside the digest, and `unpack` puts them back for
writing. So a breakpoint that moves from turn to turn (Anthropic's multi-turn prompt caching), a
``"citations": null``, a content that turns from a string into a list and back, or a request whose
``max_tokens`` changed leaves a message as it was, and the message still writes back as it was read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidContextError
from ..model import Message, OpaquePart, Part, TextPart, ToolCall, ToolResult, canonical_json
from ._reader import MISSING, Reader

STR, LIST, NULL, ABSENT = "str", "list", "null", "absent"
ANNOTATION = "cache_control"  # a block's prompt-cache breakpoint: no part of what the model reads


_REQUIRED = frozenset({"type", "text", "id", "name", "input", "tool_use_id"})  # null there: an error to name


def annotations_of(block: dict) -> dict:
    """A block's annotations: its breakpoint and its optional keys whose value is null."""
    if ANNOTATION not in block and None not in block.values():
        return {}
    return {k: v for k, v in block.items() if k == ANNOTATION or (v is None and k not in _REQUIRED)}

# A format's reader for blocks it models itself: (reader, block, field) -> (part, shape entry) or None.
BlockReader = Callable[[Reader, dict, str], "tuple[Part, dict] | None"]
# A format's writer for parts that are not text or opaque: (part, shape entry) -> block.
BlockWriter = Callable[[Part, dict], Any]


def pack_extra(fmt: str, keep: dict | None = None, shape: dict | None = None) -> str | None:
    """The canonical JSON envelope, or None when there is nothing to keep."""
    if not keep and not shape:
        return None
    body: dict[str, Any] = {"fmt": fmt}
    if keep:
        body["keep"] = keep
    if shape:
        body["shape"] = shape
    return canonical_json(body)


def envelope(fmt: str, keep: dict | None, shape: dict) -> dict[str, str | None]:
    """A message's ``extra`` and ``annotations`` (keyword arguments of `Message`): the envelope without
    the annotations, and those (the blocks' in the shape's layout, the message's null keys), which stay
    outside the digest."""
    plain, notes = _split(shape)
    if keep and (None in keep.values() or ANNOTATION in keep):
        notes = {**notes, "keep": {k: v for k, v in keep.items() if v is None or k == ANNOTATION}}
        keep = {k: v for k, v in keep.items() if v is not None and k != ANNOTATION}
    return {"extra": pack_extra(fmt, keep, plain), "annotations": canonical_json(notes) if notes else None}


def unpack(message: Message, fmt: str) -> tuple[dict, dict]:
    """(keep, shape) of a message read by `fmt`, its annotations back in the shape."""
    keep, shape = unpack_extra(message.extra, fmt)
    if message.annotations is not None:
        notes = json.loads(message.annotations)
        if isinstance(notes, dict):
            shape = _merge(shape, notes)
            keep = {**keep, **notes.get("keep", {})}
    return keep, shape


# Shape keys that are annotations as a whole, moved to the notes and back under their own names. A
# one-text-block list's form is ``c1`` (not ``c``): the list form of other contents is content.
_NOTE_KEYS = ("c1", "req")


def _split(shape: dict) -> tuple[dict, dict]:
    """(`shape` without its annotations, those annotations in the same layout: {} when none)."""
    notes: dict[str, Any] = {key: shape[key] for key in _NOTE_KEYS if key in shape}
    plain = {k: v for k, v in shape.items() if k not in _NOTE_KEYS} if notes else shape
    blocks = plain.get("b")
    if not blocks:
        return plain, notes
    kept: list[dict] = []
    block_notes: list[dict] = []
    for entry in blocks:
        note: dict[str, Any] = {}
        if "a" in entry or "s" in entry:
            entry = dict(entry)
            if "a" in entry:
                note["a"] = entry.pop("a")
            if "s" in entry:
                inner, inner_notes = _split(entry.pop("s"))
                if inner:
                    entry["s"] = inner
                if inner_notes:
                    note["s"] = inner_notes
        if note:
            block_notes.append({**note, "i": entry["i"]})
        if len(entry) > 1:  # more than its index
            kept.append(entry)
    if not block_notes:
        return plain, notes
    plain = {k: v for k, v in plain.items() if k not in ("n", "b")}
    if kept:
        plain.update(n=shape["n"], b=kept)
    return plain, {**notes, "n": shape["n"], "b": block_notes}


def _merge(shape: dict, notes: dict) -> dict:
    """`shape` with the annotations `_split` took out of it put back."""
    out = {**shape, **{key: notes[key] for key in _NOTE_KEYS if key in notes}}
    if not notes.get("b"):
        return out
    entries = {e["i"]: dict(e) for e in shape.get("b", ()) if isinstance(e, dict) and "i" in e}
    for note in notes["b"]:
        entry = entries.setdefault(note["i"], {"i": note["i"]})
        if "a" in note:
            entry["a"] = note["a"]
        if "s" in note:
            entry["s"] = _merge(entry.get("s", {}), note["s"])
    return {**out, "n": notes["n"], "b": list(entries.values())}


def unpack_extra(extra: str | None, fmt: str) -> tuple[dict, dict]:
    """(keep, shape) of an envelope written by `fmt`; empty for any other envelope."""
    if extra is None:
        return {}, {}
    try:
        body = json.loads(extra)
    except ValueError:
        return {}, {}
    if not isinstance(body, dict) or body.get("fmt") != fmt:
        return {}, {}
    keep, shape = body.get("keep", {}), body.get("shape", {})
    return (keep if isinstance(keep, dict) else {}), (shape if isinstance(shape, dict) else {})


def leftovers(r: Reader, obj: dict, known: frozenset[str] | set[str], field: str = "") -> dict:
    """The keys of `obj` an adapter does not model, validated as JSON (kept for the round trip).

    `field` is where `obj` sits in the message ("" for the message itself)."""
    rest = {}
    for k, v in obj.items():
        if k not in known:
            if not isinstance(k, str):
                r.fail(field or None, f"key {k!r} is not a string")
            r.json(v, f"{field}.{k}" if field else k)
            rest[k] = v
    return rest


def opaque(r: Reader, block: Any, field: str, kind: object) -> OpaquePart:
    r.json(block, field)
    return OpaquePart(kind if isinstance(kind, str) else "unknown", canonical_json(block))


def default_form(parts: Sequence[Part], empty: str) -> str:
    if not parts:
        return empty
    return STR if len(parts) == 1 and type(parts[0]) is TextPart else LIST


TEXT_KEYS = frozenset({"type", "text"})  # a text block's own keys


def read_content(r: Reader, value: Any, field: str, *, text_types: frozenset[str], default_text: str,
                 empty: str, blocks: BlockReader | None = None,
                 bare: bool = False) -> tuple[list[Part], dict]:
    """Parts of a content value (string, list of blocks, null or absent) and its shape entries.

    Returns the shape as a dict with ``c`` (the form, when not the default for these parts), ``n``
    (number of blocks) and ``b`` (per-block entries, only for blocks that differ from the default).
    """
    if value is MISSING or value is None:
        parts: list[Part] = []
        form = ABSENT if value is MISSING else NULL
        return parts, ({} if form == empty else {"c": form})
    if isinstance(value, str):
        r.count(len(value), field)
        return [TextPart(value)], {}
    if not isinstance(value, list):
        r.fail(field, f"expected a string or a list of content blocks, got {type(value).__name__}")
    parts = []
    entries: list[tuple[int, dict]] = []
    for i, block in enumerate(value):
        where = f"{field}[{i}]"
        entry: dict[str, Any] = {}
        notes = annotations_of(block) if isinstance(block, dict) else {}
        if notes:  # kept aside: see the module docstring
            r.json(notes, where)
            block = {k: v for k, v in block.items() if k not in notes}
        if isinstance(block, str) and bare:
            r.count(len(block), where)
            part: Part = TextPart(block)
            entry["bare"] = 1
        elif not isinstance(block, dict):
            r.fail(where, f"expected a content block object, got {type(block).__name__}")
        elif isinstance(kind := block.get("type"), str) and kind in text_types:  # any JSON value may be there
            part = TextPart(r.key(block, "text", where + ".text"))
            if kind != default_text:
                entry["t"] = kind
            if not TEXT_KEYS.issuperset(block):
                entry["k"] = leftovers(r, block, TEXT_KEYS, where)
        elif blocks is not None and (handled := blocks(r, block, where)) is not None:
            part, entry = handled
        else:
            part = opaque(r, block, where, kind)
        if notes:
            entry = {**entry, "a": notes}
        parts.append(part)
        entries.append((i, entry))
    shape: dict[str, Any] = indexed(entries, len(value))
    if default_form(parts, empty) != LIST:  # one text part: a string unless marked
        one_block = len(value) == 1 and not (entries[0][1].keys() - {"a"})  # a plain text block, its notes aside
        shape["c1" if one_block else "c"] = LIST
    return parts, shape


def write_content(parts: Sequence[Part], shape: dict, *, index: int, default_text: str, empty: str,
                  blocks: BlockWriter | None = None) -> Any:
    """The content value for `parts` in the form recorded by `shape` (MISSING when absent)."""
    form = _form(shape) or default_form(parts, empty)
    if not parts:
        return MISSING if form == ABSENT else (None if form == NULL else ("" if form == STR else []))
    if form == STR and len(parts) == 1 and type(parts[0]) is TextPart:
        return parts[0].text
    entries = block_entries(shape, len(parts))
    out: list[Any] = []
    for i, part in enumerate(parts):
        entry = entries.get(i, {})
        block: Any
        if type(part) is TextPart:
            if entry.get("bare"):
                block = part.text
            else:
                block = {"type": entry.get("t", default_text), "text": part.text, **entry.get("k", {})}
        elif type(part) is OpaquePart:
            block = json.loads(part.data)
        elif blocks is not None:
            block = blocks(part, entry)
        else:
            raise InvalidContextError(f"a {type(part).__name__} cannot be written as a content block here",
                                      index=index, field=f"parts[{i}]")
        if "a" in entry and isinstance(block, dict):
            block.update(entry["a"])
        out.append(block)
    return out


def _form(shape: dict) -> str | None:
    """The content form a shape records, if any: ``c``, or ``c1`` (a one-text-block list, an annotation)."""
    return shape.get("c") or shape.get("c1")


def indexed(entries: list[tuple[int, dict]], count: int) -> dict:
    """The shape of a list's per-item entries: the items that differ from the default, and the count."""
    found = [{**entry, "i": i} for i, entry in entries if entry]
    return {"n": count, "b": found} if found else {}


def block_entries(shape: dict, count: int) -> dict[int, dict]:
    """Per-block entries by position, or none when the parts no longer match the recorded blocks."""
    if shape.get("n") != count:
        return {}
    return {e["i"]: e for e in shape.get("b", ()) if isinstance(e, dict) and "i" in e}


def split_parts(parts: Sequence[Part]) -> tuple[list[Part], list[ToolCall], list[ToolResult]]:
    """(content parts, tool calls, tool results) of a message, each in order."""
    content: list[Part] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for p in parts:
        if type(p) is ToolCall:
            calls.append(p)
        elif type(p) is ToolResult:
            results.append(p)
        else:
            content.append(p)
    return content, calls, results


def result_output(value: Any, parts: list[Part]) -> str | tuple[Part, ...]:
    """A tool result's output: the string itself when the content was a string or a list of one text
    block (its text: the same output to the model), else its parts."""
    if isinstance(value, str):
        return value
    if len(parts) == 1 and type(parts[0]) is TextPart:
        return parts[0].text
    return tuple(parts)


def write_output(output: str | tuple[Part, ...], shape: dict, *, index: int, default_text: str,
                 empty: str) -> Any:
    """A tool result's content value for `output` in the form recorded by `shape` (as `write_content`): a
    string output read from a one-text-block list is written as that list again."""
    if isinstance(output, str):
        if _form(shape) != LIST:
            return output
        output = (TextPart(output),)
    return write_content(output, shape, index=index, default_text=default_text, empty=empty)
