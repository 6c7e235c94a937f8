"""JSON through orjson where it gives exactly what the standard library's `json` gives, `json` elsewhere.

Replay decodes every record of a session file and digests every message by its canonical JSON;
orjson does both several times faster than `json` (on the corpus's Claude Code records: decoding
about 2x, encoding with sorted keys about 7x). On a few inputs the two differ, and those are left
to `json`, so every value and every byte is the one `json` gives:

- `decoded`: orjson reads an integer past 64 bits as a float, without a word; it refuses what
  `json` reads beyond the standard (NaN, Infinity, 1e400, a lone surrogate escape such as
  ``\\ud800``) and nests up to 1,024 levels, where `json` stops at the interpreter's recursion
  limit (a little under 1,000, less the calls already on the stack). What orjson reads is taken
  when orjson writes it back as the very text (less trailing white space): that text is then what
  `json` reads too, so its value is orjson's (see `_written_back` for why), and compact records, as
  agents write them, pass with no check of their own bytes. Otherwise (indented or spaced text, an
  escape written another way) the text itself is checked: a run of 19 digits anywhere (a number that
  may not fit 64 bits: the check cannot tell a string from a number), or more than `MAX_OPENERS`
  brackets, is `REFUSED`, as is anything orjson refuses: the caller reads it with `json`, which gives
  its own value or error.
- `encoded`: orjson writes floats its own way (``1e16`` where `json` writes ``1e+16``, NaN as
  null) and iterates a dict subclass without its ``items()``; it refuses lone surrogates, integers
  past 64 bits and nesting past 254 levels. So a value is written by orjson only when it holds
  nothing but plain str, int, bool, None, dict (string keys), list and tuple, with no float, in at
  most `MAX_CONTAINERS` containers; otherwise, or when orjson refuses it, the caller uses `json`.

For those values the outputs are the same by construction: both escape only ``"``, ``\\`` and the
control characters below U+0020 (``\\n``, ``\\t``... and ``\\u00XX`` in lower case), write every
other character as itself in UTF-8 (``ensure_ascii=False``), separate with ``,`` and ``:``, keep
dict order or sort keys by code point, and keep the last of duplicated keys at its first place.
tests/instrumentation/test_fastjson.py checks both directions against `json`.
"""

from __future__ import annotations

from typing import Any

import orjson

REFUSED: Any = object()  # sentinel: `decoded` leaves this text to `json`
MAX_OPENERS = 512  # more brackets than this: maybe deeper than `json` reads
MAX_CONTAINERS = 4096  # a value with more containers is not walked for floats (nor a cycle for ever)

# every digit -> "0", both opening brackets -> "[", every other byte -> " " (one C pass over the text)
_MARKS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x5B if b in b"[{" else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 19  # an integer of 18 digits or fewer fits 64 bits; one of 19 may not
_LEAVES = (str, int, bool, type(None))


def decoded(data: bytes | str) -> Any:
    """``json.loads(data)`` when orjson is sure to give the same value, else `REFUSED`."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: not UTF-8
            return REFUSED
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return REFUSED
    if _written_back(value, data):
        return value
    marks = data.translate(_MARKS)
    if _LONG_NUMBER in marks or marks.count(b"[") > MAX_OPENERS:
        return REFUSED
    return value


def _written_back(value: Any, data: bytes) -> bool:
    """Whether orjson writes `value` (what it read from `data`) as `data` itself, less trailing JSON white
    space. Then `json` reads `data` as `value`: orjson writes each string with only ``"``, ``\\`` and the
    control characters escaped, dict keys in order (so no key twice), integers in full (64 bits at most: one
    it read past them is a float, and its float is written otherwise) and each float as the shortest text
    that reads back as that float (so a correctly rounding reader, as `json` is, reads that very float), and
    refuses to nest past 254 levels, well within what `json` reads. A text with a line break before its last
    byte (indented: orjson writes none) is not written again."""
    if data.find(b"\n", 0, len(data) - 1) >= 0:
        return False
    try:
        written = orjson.dumps(value)
    except orjson.JSONEncodeError:  # too deep
        return False
    return data.startswith(written) and not data[len(written):].strip(b" \t\n\r")


def encoded(value: object, *, sort_keys: bool = False, max_containers: int = MAX_CONTAINERS) -> bytes | None:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)`` as UTF-8,
    when orjson is sure to write those bytes; else None (the caller writes it with `json`). A value of more
    than `max_containers` containers (at most `MAX_CONTAINERS`) is None too: one of at most N containers is
    nested at most N levels deep."""
    if not _plain(value, min(max_containers, MAX_CONTAINERS)):
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS if sort_keys else 0)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer past 64 bits, a non-string key, too deep
        return None


def _plain(value: object, budget: int) -> bool:
    """Only plain str, int, bool, None, dict, list and tuple (exact types), no float, at most
    `budget` containers."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            children: Any = item.values()  # type: ignore[attr-defined]
        elif kind is list or kind is tuple:
            children = item
        else:
            if kind not in _LEAVES:
                return False
            continue
        budget -= 1
        if budget < 0:
            return False
        for child in children:
            if type(child) is not str:
                stack.append(child)
    return True
