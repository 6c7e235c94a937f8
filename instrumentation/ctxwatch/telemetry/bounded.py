"""Cardinality caps for label values that come from the caller or the wire (agent, service names, agent
versions, error types): the one rule the guard's metrics and the monitor's families both bound them by.

At most `cap` distinct values are admitted at once (`semconv.MAX_LABEL_VALUES` by default); any other
value, any value longer than `semconv.MAX_LABEL_LENGTH`, and any value a label's own `admissible` test
refuses (`agent_versions`: only version-like strings) is recorded as `semconv.OVERFLOW`. Each
admitted value remembers when it was last carried (`seen`); a long-running holder (the monitor) frees
the values not seen since a horizon (`expire`), so a burst of junk names cannot keep its slots for
good, and persists the admitted set (`state`, `restore`). The guard's telemetry never expires values
(an OpenTelemetry series, once reported, stays in the SDK's memory anyway).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from .. import semconv


class BoundedValues:
    """The admitted values of one label; `value(raw)` maps a raw value to its label value."""

    __slots__ = ("cap", "max_length", "admissible", "_seen", "_lock", "changed")

    def __init__(self, cap: int = semconv.MAX_LABEL_VALUES, max_length: int = semconv.MAX_LABEL_LENGTH,
                 admissible: Callable[[str], bool] | None = None) -> None:
        self.cap = cap
        self.max_length = max_length
        self.admissible = admissible  # None: any value up to max_length
        self._seen: dict[str, float] = {}  # admitted value -> when it was last carried (unix s)
        self._lock = threading.Lock()
        self.changed = False  # admitted values changed since the state was last taken (persisted)

    def value(self, raw: str) -> str:
        """`raw` if it is (or can now be) admitted, else `semconv.OVERFLOW`."""
        if raw in self._seen:
            return raw
        if len(raw) > self.max_length or (self.admissible is not None and not self.admissible(raw)):
            return semconv.OVERFLOW
        with self._lock:
            if raw not in self._seen:
                if len(self._seen) >= self.cap:
                    return semconv.OVERFLOW
                self._seen[raw] = time.time()
                self.changed = True
        return raw

    def seen(self, value: str, now: float) -> None:
        """`value` was carried at `now` (OVERFLOW and values not admitted are ignored)."""
        if value in self._seen:
            self._seen[value] = now

    def expire(self, horizon: float, in_use: set[str]) -> set[str]:
        """Free the values last seen before `horizon` that are not `in_use`; returns them."""
        with self._lock:
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


def agent_versions(cap: int = semconv.MAX_VERSION_VALUES) -> BoundedValues:
    """The bounded values of the `agent_version` label: at most `cap` at once, version-like strings only
    (`semconv.is_version_label`)."""
    return BoundedValues(cap, semconv.MAX_VERSION_LENGTH, semconv.is_version_label)
