"""Bounded Prometheus label values: at most `cap` distinct values at once, each freed once unused.

Agent and service names come from the wire, so each label keeps its own small set of admitted
values; an over-long value or one past the cap is recorded as `ctxwatch.semconv.OVERFLOW`. Each
admitted value remembers when a span last carried it (`seen`); `expire` frees the values not seen
since a horizon and not held by a tracked loop, so a burst of junk names cannot keep its slots
for good. Loop ids are never labels.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from ctxwatch.semconv import MAX_LABEL_LENGTH, OVERFLOW


class BoundedLabel:
    """The admitted values of one label; `value(raw)` maps a raw value to its label value."""

    __slots__ = ("cap", "_seen", "changed")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._seen: dict[str, float] = {}  # admitted value -> when a span last carried it (unix s)
        self.changed = False  # admitted values changed since the state was last taken (persisted)

    def value(self, raw: str) -> str:
        if raw in self._seen:
            return raw
        if len(raw) > MAX_LABEL_LENGTH or len(self._seen) >= self.cap:
            return OVERFLOW
        self._seen[raw] = time.time()
        self.changed = True
        return raw

    def seen(self, value: str, now: float) -> None:
        """A span carried the admitted `value` at `now` (OVERFLOW and unknown values are ignored)."""
        if value in self._seen:
            self._seen[value] = now

    def expire(self, horizon: float, in_use: set[str]) -> set[str]:
        """Free the values last seen before `horizon` that no tracked loop holds; returns them."""
        freed = {v for v, at in self._seen.items() if at < horizon and v not in in_use}
        for value in freed:
            del self._seen[value]
        self.changed = self.changed or bool(freed)
        return freed

    def state(self) -> dict[str, float]:
        """The admitted values and when each was last seen (persisted so a restart keeps the mapping)."""
        return dict(self._seen)

    def restore(self, saved: Mapping[str, float] | Iterable[str]) -> None:
        """Admit persisted values: a mapping value -> last seen, or a list (files of earlier versions)."""
        now = time.time()
        items = saved.items() if isinstance(saved, Mapping) else ((value, now) for value in saved)
        for value, at in items:
            if self.value(value) == value:
                self._seen[value] = float(at)
        self.changed = False
