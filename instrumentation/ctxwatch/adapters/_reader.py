"""Reading one input message safely: type checks, JSON validation, depth and size bounds.

Every adapter reads its input through a `Reader`, so each error names the message index and the
field (``message 3, field 'tool_calls[0].id': missing``) and no bad input escapes as a bare
KeyError, TypeError or RecursionError. Nested values are walked iteratively with a depth bound,
and the characters of every string read are counted against a per-message cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NoReturn

from ..errors import InvalidContextError

MISSING: Any = object()  # sentinel: a key absent from its dict


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one input message: nesting depth of any value, and characters across all its strings."""

    max_depth: int = 64
    max_message_chars: int = 64 * 1024 * 1024


DEFAULT_LIMITS = Limits()


def type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


class Reader:
    """Reads the fields of message `index`; every failure raises `InvalidContextError` naming it."""

    __slots__ = ("index", "limits", "chars")

    def __init__(self, index: int | None, limits: Limits = DEFAULT_LIMITS) -> None:
        self.index = index
        self.limits = limits
        self.chars = 0

    def fail(self, field: str | None, reason: str) -> NoReturn:
        raise InvalidContextError(reason, index=self.index, field=field)

    def count(self, n: int, field: str) -> None:
        self.chars += n
        if self.chars > self.limits.max_message_chars:
            self.fail(field, f"message exceeds {self.limits.max_message_chars} characters")

    def text(self, value: object, field: str) -> str:
        """A required string."""
        if value is MISSING:
            self.fail(field, "missing")
        if not isinstance(value, str):
            self.fail(field, f"expected a string, got {type_name(value)}")
        self.count(len(value), field)
        return value

    def key(self, obj: dict, key: str, field: str) -> str:
        """The required string `obj[key]`."""
        return self.text(obj.get(key, MISSING), field)

    def mapping(self, value: object, field: str | None) -> dict:
        return self._of(value, field, dict, "an object")

    def array(self, value: object, field: str) -> list:
        return self._of(value, field, list, "a list")

    def _of(self, value: Any, field: str | None, kind: type, noun: str) -> Any:
        if value is MISSING:
            self.fail(field, "missing")
        if not isinstance(value, kind):
            self.fail(field, f"expected {noun}, got {type_name(value)}")
        return value

    def flag(self, value: object, field: str) -> bool:
        if not isinstance(value, bool):
            self.fail(field, f"expected true or false, got {type_name(value)}")
        return value

    def json(self, value: Any, field: str) -> Any:
        """Check that `value` is plain JSON (str keys; no NaN; bounded depth); count its characters.

        Walked with an explicit stack, so a deeply nested or self-referencing value is reported,
        never a RecursionError. Only containers are pushed; scalars are checked in place and a
        field path is built only for containers and errors.
        """
        if not isinstance(value, (dict, list)):
            self._scalar(value, field)
            return value
        max_depth = self.limits.max_depth
        stack: list[tuple[Any, int, str]] = [(value, 1, field)]
        n = 0
        while stack:
            item, depth, where = stack.pop()
            if depth > max_depth:
                self.fail(where, f"nested deeper than {max_depth} levels")
            if isinstance(item, dict):
                for k in item:
                    if not isinstance(k, str):
                        self.fail(where, f"object key {k!r} is not a string")
                    n += len(k)
            for k, v in (item.items() if isinstance(item, dict) else enumerate(item)):
                if isinstance(v, str):
                    n += len(v)
                elif isinstance(v, (dict, list)):
                    stack.append((v, depth + 1, _child(where, k)))
                else:
                    self._scalar(v, where, k)
        self.count(n, field)
        return value

    def _scalar(self, value: object, where: str, key: str | int | None = None) -> None:
        """Check a non-container value; its field path is built only when it is reported."""
        if isinstance(value, str):
            self.count(len(value), where)
        elif not (value is None or isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))):
            field = where if key is None else _child(where, key)
            self.fail(field, f"{value} is not valid JSON" if isinstance(value, float)
                      else f"a {type_name(value)} is not JSON")


def _child(where: str, key: str | int) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}"
