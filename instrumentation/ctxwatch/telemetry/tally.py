"""Pre-aggregated counters: cumulative sums kept in a dict and reported by an OTel asynchronous
(observable) counter when a metric reader collects.

A synchronous SDK counter costs several microseconds per `add` on the agent's thread (attribute
validation and hashing on every call); a `Tally.add` is a dict update under a lock, and the SDK
work happens once per collection instead of once per mutation. Values are cumulative and
monotonic, as the OpenTelemetry API requires of an ObservableCounter.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Meter, Observation


class Tally:
    """Sums by attribute set, exposed through an ObservableCounter created on `meter`."""

    def __init__(self, meter: Meter, name: str, unit: str, description: str) -> None:
        self._lock = threading.Lock()
        self._sums: dict[Hashable, list[Any]] = {}
        self.instrument = meter.create_observable_counter(name, callbacks=[self._observe], unit=unit,
                                                          description=description)

    def add(self, amount: int, attributes: Mapping[str, str], key: Hashable | None = None) -> None:
        """Add `amount` for `attributes` (`key`, when given, identifies the attribute set cheaply)."""
        if key is None:
            key = tuple(attributes.items())
        with self._lock:
            entry = self._sums.get(key)
            if entry is None:
                self._sums[key] = [amount, dict(attributes)]
            else:
                entry[0] += amount

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            return [Observation(total, attributes) for total, attributes in self._sums.values()]
