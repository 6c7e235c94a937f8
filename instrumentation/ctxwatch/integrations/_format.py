"""Fixing a guard's message format to the one a framework speaks.

A guard detects its format from the first messages it sees, and a first message that reads the
same in several formats (a plain user message) is read provisionally; an integration knows the
format for certain, so it names it before the guard has seen anything. A guard already fixed to
another format is a configuration error, reported at once rather than as a stream of bogus edits.
"""

from __future__ import annotations

from ..guard import ContextGuard


def bind_format(guard: ContextGuard, format: str, integration: str) -> ContextGuard:
    current = guard.bridge.format
    if current is None and not guard.messages:
        guard.bridge.format = format
    elif current != format:
        raise ValueError(f"{integration} hands the guard {format} messages, but this guard reads {current!r}; "
                         f"make it with ContextGuard(..., format={format!r})")
    return guard
