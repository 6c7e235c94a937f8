"""Cardinality caps for metric attribute values that come from the caller (agent, service names).

The first `semconv.MAX_LABEL_VALUES` distinct values are kept as they are; any later value, and any
value longer than `semconv.MAX_LABEL_LENGTH`, is recorded as `semconv.OVERFLOW`.
"""

from __future__ import annotations

import threading

from .. import semconv


class BoundedValues:
    """A first-come set of at most `cap` distinct strings; values past the cap map to OVERFLOW."""

    def __init__(self, cap: int = semconv.MAX_LABEL_VALUES,
                 max_length: int = semconv.MAX_LABEL_LENGTH) -> None:
        self._cap = cap
        self._max_length = max_length
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str | None:
        if value is None or value in self._seen:
            return value
        if len(value) > self._max_length:
            return semconv.OVERFLOW
        with self._lock:
            if len(self._seen) < self._cap:
                self._seen.add(value)
                return value
        return semconv.OVERFLOW
