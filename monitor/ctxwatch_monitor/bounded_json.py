"""Reading a JSON body nested deeper than `json.loads` can: the fallback of the OTLP/JSON decoder.

`json.loads` recurses in C once per nesting level and raises `RecursionError` past about a thousand levels, so
one span holding an attribute value nested that deep would make the whole request unreadable. `loads` reads
the same JSON without recursing: the levels above `SPLIT_DEPTH` (in OTLP/JSON: the request down to each list of
spans) by the loop here, each container at `SPLIT_DEPTH` (a span; an attribute of a resource) by `json.loads`'s
own scanner, and only a container that scanner cannot read for its depth by the loop here again. The loop keeps
a container nested deeper than `MAX_DEPTH` (the document is depth 1) as `TOO_DEEP`, after checking it is valid
JSON: no reader of OTLP goes that deep (the protobuf limit, 100 messages below a span, is at most 207 levels
of OTLP/JSON), so what is cut off there could only ever be ignored (an unknown field) or refused. Otherwise
`loads` returns what `json.loads` would with no recursion limit (strings, numbers and literals are read by its
scanner; the last of duplicate keys wins) and raises `json.JSONDecodeError` for what it refuses.

The cost: what is read in Python costs about twelve times what `json.loads` would (which has already read the
body once before it gave up). `charge` is called when the C scanner gives up on a container, and again for
every `CHARGE_VALUES` values read in Python (about what `json_format` takes for one span), so the caller counts
that work against the sender's budget of slow reads (`slow_path`) and stops it by raising.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json.decoder import JSONDecodeError, scanstring  # type: ignore[attr-defined]  # json's C string reader
from json.scanner import make_scanner
from typing import Any

MAX_DEPTH = 256  # containers nested deeper than this are kept as TOO_DEEP
SPLIT_DEPTH = 7  # containers at this depth are read by json.loads's scanner first: an OTLP/JSON span is at 7
CHARGE_VALUES = 256  # one more charge for every this many values read in Python


class TooDeep:
    """The one value standing for a container nested deeper than `MAX_DEPTH`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<nested deeper than {MAX_DEPTH}>"


TOO_DEEP = TooDeep()

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# json's own (C) scanner of one value, as json.loads reads it
_scan_once: Callable[[str, int], tuple[Any, int]] = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
_CLOSE = {"{": "}", "[": "]"}


def _uncharged() -> None:
    return None


def loads(body: bytes | str, charge: Callable[[], None] = _uncharged) -> Any:
    """`body` as `json.loads` reads it, however deep (see the module docstring)."""
    text = body if isinstance(body, str) else body.decode(json.detect_encoding(body), "surrogatepass")
    if text.startswith("\ufeff"):
        raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    value, end = _read(text, _skip(text, 0), charge)
    end = _skip(text, end)
    if end != len(text):
        raise JSONDecodeError("Extra data", text, end)
    return value


def _skip(text: str, at: int) -> int:
    """The position after the whitespace at `at`."""
    return _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]  # matches the empty string


def _scalar(text: str, at: int) -> tuple[Any, int]:
    try:
        return _scan_once(text, at)
    except StopIteration:
        raise JSONDecodeError("Expecting value", text, at) from None


def _key(text: str, at: int) -> tuple[str, int]:
    """An object's key at `at`, and the position of its value."""
    if text[at:at + 1] != '"':
        raise JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
    key, at = scanstring(text, at + 1, True)
    at = _skip(text, at)
    if text[at:at + 1] != ":":
        raise JSONDecodeError("Expecting ':' delimiter", text, at)
    return key, _skip(text, at + 1)


def _read(text: str, at: int, charge: Callable[[], None]) -> tuple[Any, int]:
    """The document's value starting at `at`, and where it ends."""
    # the open containers: [opening bracket, the dict or list (None past MAX_DEPTH), the key its value is for]
    stack: list[list[Any]] = []
    fell_back = 0  # the depth of the container being read here because the C scanner could not; 0: none
    uncharged = 0  # values read here since the last charge
    while True:
        depth, opening = len(stack) + 1, text[at:at + 1]
        value: Any = _PENDING
        if opening not in _CLOSE:
            value, at = _scalar(text, at)
        elif not fell_back and depth >= SPLIT_DEPTH:
            try:
                value, at = _scan_once(text, at)
            except RecursionError:
                fell_back, uncharged = depth, CHARGE_VALUES
        if value is _PENDING or opening not in _CLOSE:  # read here, not by the C scanner
            uncharged += 1
            if uncharged >= CHARGE_VALUES:
                charge()
                uncharged = 0
        if value is _PENDING:  # a container read here: open it
            frame: list[Any] = [opening, None if depth > MAX_DEPTH else {} if opening == "{" else [], None]
            at = _skip(text, at + 1)
            if text[at:at + 1] != _CLOSE[opening]:
                stack.append(frame)
                if opening == "{":
                    frame[2], at = _key(text, at)
                continue
            value, at = TOO_DEEP if frame[1] is None else frame[1], at + 1
            if depth == fell_back:
                fell_back = 0
        while stack:  # `value` is complete: put it in its container, close each container that ends here
            frame = stack[-1]
            container = frame[1]
            if container is not None:
                if frame[0] == "[":
                    container.append(value)
                else:
                    container[frame[2]] = value
            at = _skip(text, at)
            char = text[at:at + 1]
            if char == ",":
                at = _skip(text, at + 1)
                if frame[0] == "{":
                    frame[2], at = _key(text, at)
                break
            if char != _CLOSE[frame[0]]:
                raise JSONDecodeError("Expecting ',' delimiter", text, at)
            if len(stack) == fell_back:
                fell_back = 0
            stack.pop()
            value, at = TOO_DEEP if container is None else container, at + 1
        else:
            return value, at


_PENDING = object()
