"""How a finding names a literal or symbol without quoting it: by kind and length.

Findings reach logs, exception messages (which the OpenTelemetry SDK records on the caller's span
when a typed refusal propagates through it) and, with content capture, span events. By default
they describe a value as ``path, 29 chars``; the quoted form is kept beside it for
`Report.explain(values=True)` and content capture.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_HEX = re.compile(r"(?:0x)?[0-9a-fA-F]{8,}")
_NUMBER = re.compile(r"[+-]?\d[\d.,_ -]*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def kind_of(value: str) -> str:
    """A coarse kind of `value` read from its shape (url, path, hex, number, identifier, id)."""
    if "://" in value:
        return "url"
    if value.startswith(("/", "./", "../", "~/")) or re.match(r"[A-Za-z]:\\", value) or value.count("/") >= 1:
        return "path"
    if _HEX.fullmatch(value):
        return "hex"
    if _NUMBER.fullmatch(value):
        return "number"
    if _IDENTIFIER.fullmatch(value):
        return "identifier"
    return "id"


def describe(value: str) -> str:
    """``kind, N chars``: what a value is, without the value."""
    return f"{kind_of(value)}, {len(value)} chars"


def shown(value: str, *, quoted: bool) -> str:
    """`value` quoted, or described as ``<kind, N chars>``."""
    return repr(value) if quoted else f"<{describe(value)}>"


def listed(values: Iterable[str], *, quoted: bool, limit: int = 12) -> str:
    """At most `limit` values, quoted or described, in a stable order; the rest counted."""
    ordered = sorted(values)
    parts = [shown(v, quoted=quoted) for v in ordered[:limit]]
    more = f" and {len(ordered) - limit} more" if len(ordered) > limit else ""
    return "[" + ", ".join(parts) + more + "]"
