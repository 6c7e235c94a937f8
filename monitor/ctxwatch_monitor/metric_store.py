"""Incrementally kept metric families, the series budget they draw on, and their exposition.

Every value is updated when a span or request is processed, never computed by scanning loops, so
rendering costs only the number of series, which `SeriesBudget` bounds: a family whose labels come
from the wire (`wire` label names: service, agent) opens a new series only while the budget has
room for it, per family and in total; past that, the update goes to the family's overflow series
(every wire label `OVERFLOW`) and is counted. Overflow series have only closed-set labels, so their
number is known in advance and reserved out of the budget: the exposition never holds more than the
budget's total. Dropping the series of a label value (`forget`) returns their room.

Families marked `persist` report the series changed or dropped since the last flush (`take_dirty`)
so the state database can keep them across restarts. Each family keeps the exposition text of its
series' labels (`label_text`); `exposition` writes the text and OpenMetrics formats from them.

Rendering runs on another thread than the updates: each family is copied with one
`list(dict.items())` (and each histogram series with one list copy), C-level calls the GIL makes
atomic for these str-tuple keys, so a render never waits for, nor stalls, ingest.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client.utils import floatToGoString

from ctxwatch.semconv import OVERFLOW

from . import exposition

Key = tuple[str, ...]


class SeriesBudget:
    """How many series the wire-labelled families may hold: `per_family` each and `total` in all.

    `reserve(family, n)` sets aside room for a family's overflow series (bounded by its closed-set
    labels) out of both limits; `admit` grants room for one new series or refuses it."""

    def __init__(self, total: int, per_family: int) -> None:
        self.total, self.per_family = total, per_family
        self.used_total = 0
        self.reserved_total = 0
        self._used: dict[str, int] = {}
        self._reserved: dict[str, int] = {}
        self.on_overflow: Callable[[str], None] = lambda family: None

    def reserve(self, family: str, series: int) -> None:
        self._reserved[family] = series
        self.reserved_total = sum(self._reserved.values())
        if self.reserved_total > self.total:
            raise ValueError(f"series_budget {self.total} is below the {self.reserved_total} series reserved "
                             "for the overflow series; raise it")

    def admit(self, family: str, cost: int) -> bool:
        used = self._used.get(family, 0)
        if (used + cost > self.per_family - self._reserved.get(family, 0)
                or self.used_total + cost > self.total - self.reserved_total):
            return False
        self._used[family] = used + cost
        self.used_total += cost
        return True

    def release(self, family: str, cost: int) -> None:
        self._used[family] -= cost
        self.used_total -= cost


class Family:
    """One metric family: a name, its label names, and a value per label tuple."""

    cost = 1  # exposition series per label tuple
    kind = "untyped"  # the exposition TYPE

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = (), *, persist: bool = False,
                 wire: Iterable[str] = (), budget: SeriesBudget | None = None) -> None:
        self.name, self.doc, self.labelnames, self.persist = name, doc, tuple(labelnames), persist
        self.values: dict[Key, Any] = {}
        self._label_texts: dict[Key, str] = {}
        self._order = sorted(range(len(self.labelnames)), key=lambda i: self.labelnames[i])
        self.dirty: set[Key] = set()
        self.removed: set[Key] = set()
        self.budget = budget
        self._wire = tuple(i for i, label in enumerate(self.labelnames) if label in set(wire))
        if not self.labelnames:  # a label-less family has its one sample from the start
            self.values[()] = self.zero()

    def zero(self) -> Any:
        return 0

    def label_text(self, key: Key) -> str:
        """`{name="value",...}` of a series (labels sorted by name, values escaped), formatted once."""
        text = self._label_texts.get(key)
        if text is None:
            pairs = (f'{self.labelnames[i]}="{_escape(key[i])}"' for i in self._order)
            text = self._label_texts[key] = "{" + ",".join(pairs) + "}" if key else ""
        return text

    def _forget_texts(self, key: Key) -> None:
        self._label_texts.pop(key, None)

    def items(self) -> list[tuple[Key, Any]]:
        """A snapshot of (labels, value) of every series to expose."""
        return list(self.values.items())

    def overflow_key(self, key: Key) -> Key:
        """`key` with every wire label replaced by OVERFLOW."""
        if not self._wire:
            return key
        out = list(key)
        for i in self._wire:
            out[i] = OVERFLOW
        return tuple(out)

    def _budgeted(self) -> bool:
        return self.budget is not None and bool(self._wire)

    def _series_key(self, key: Key) -> Key:
        """The key a new series `key` is kept under: itself when the budget admits it, else its overflow."""
        if not self._budgeted():
            return key
        overflow = self.overflow_key(key)
        if overflow == key or self.budget.admit(self.name, self.cost):  # type: ignore[union-attr]
            return key
        self.budget.on_overflow(self.name)  # type: ignore[union-attr]
        return overflow

    def _drop(self, key: Key) -> None:
        del self.values[key]
        self._forget_texts(key)
        if self._budgeted() and self.overflow_key(key) != key:
            self.budget.release(self.name, self.cost)  # type: ignore[union-attr]
        if self.persist:
            self.dirty.discard(key)
            self.removed.add(key)

    def forget(self, label: str, values: set[str]) -> None:
        """Drop every series whose `label` is one of `values` (their label values aged out)."""
        if label not in self.labelnames or not values:
            return
        at = self.labelnames.index(label)
        for key in [k for k in self.values if k[at] in values]:
            self._drop(key)

    def merge(self, current: Any, value: Any) -> Any:
        return current + value

    def clear(self) -> None:
        """Drop every series (before reloading the persisted ones), returning their room to the budget."""
        for key in list(self.values):
            self._drop(key)
        self.dirty, self.removed = set(), set()
        if not self.labelnames:
            self.values[()] = self.zero()

    def restore(self, key: Key, value: Any) -> None:
        """Set a series from its persisted value (within the budget: merged into the overflow past it)."""
        target = key if key in self.values else self._series_key(key)
        if target in self.values:
            self.values[target] = self.merge(self.values[target], value)
        else:
            self.values[target] = value
        if target != key and self.persist:
            self.removed.add(key)
            self.dirty.add(target)


class Counter(Family):
    kind = "counter"

    def inc(self, key: Key, amount: float = 1) -> None:
        values = self.values
        current = values.get(key)
        if current is None:
            key = self._series_key(key)
            current = values.get(key, 0)
        values[key] = current + amount
        if self.persist:
            self.dirty.add(key)


class Gauge(Family):
    """A value that goes up and down; never persisted (gauges are rebuilt from the state).

    Values are kept exactly per label tuple (a series at 0 is dropped); the budget applies to the
    exposition: a label tuple the budget did not admit when it appeared is rendered summed into the
    overflow series, so an `add` and the matching `add(-1)` always meet the same value."""

    kind = "gauge"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._admitted: set[Key] = set()

    def add(self, key: Key, delta: float) -> None:
        values = self.values
        current = values.get(key)
        if current is None:
            current = 0
            if self._budgeted() and self._series_key(key) == key:
                self._admitted.add(key)
        value = current + delta
        if value or not self.labelnames:
            values[key] = value
        else:
            del values[key]
            self._forget_texts(key)
            if key in self._admitted and self.overflow_key(key) != key:
                self._admitted.discard(key)
                self.budget.release(self.name, self.cost)  # type: ignore[union-attr]

    def set(self, key: Key, value: float) -> None:
        self.values[key] = value

    def items(self) -> list[tuple[Key, Any]]:
        items = list(self.values.items())
        if not self._budgeted():
            return items
        admitted, shown = set(self._admitted), []
        merged: dict[Key, float] = {}
        for key, value in items:
            if key in admitted or self.overflow_key(key) == key:
                shown.append((key, value))
            else:
                overflow = self.overflow_key(key)
                merged[overflow] = merged.get(overflow, 0) + value
        for key, value in shown:
            if key in merged:
                merged[key] += value
        return [(k, v) for k, v in shown if k not in merged] + list(merged.items())


class Histogram(Family):
    """Per series: a list of per-bucket counts (the last one is +Inf) followed by the sum."""

    kind = "histogram"

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = (), *, buckets: Iterable[float],
                 persist: bool = False, wire: Iterable[str] = (), budget: SeriesBudget | None = None) -> None:
        self.buckets = tuple(sorted(float(b) for b in buckets if math.isfinite(b)))
        self.bucket_labels = [floatToGoString(b) for b in self.buckets] + ["+Inf"]
        self.cost = len(self.bucket_labels) + 2  # the buckets, _sum and _count
        self._prefixes: dict[Key, tuple[list[str], str, str]] = {}
        super().__init__(name, doc, labelnames, persist=persist, wire=wire, budget=budget)

    def prefixes(self, key: Key) -> tuple[list[str], str, str]:
        """The text before the value of each bucket line, the `_count` line and the `_sum` line of a
        series, formatted once."""
        found = self._prefixes.get(key)
        if found is None:
            name, labels = self.name, self.label_text(key)
            inner = labels[1:-1] + "," if labels else ""
            found = self._prefixes[key] = ([f'{name}_bucket{{{inner}le="{le}"}} ' for le in self.bucket_labels],
                                           f"{name}_count{labels} ", f"{name}_sum{labels} ")
        return found

    def _forget_texts(self, key: Key) -> None:
        super()._forget_texts(key)
        self._prefixes.pop(key, None)

    def zero(self) -> list[float]:
        return [0] * (len(self.buckets) + 1) + [0.0]

    def merge(self, current: Any, value: Any) -> Any:
        return [a + b for a, b in zip(current, value, strict=True)]

    def observe(self, key: Key, value: float) -> None:
        self.observe_many(key, (value,))

    def observe_many(self, key: Key, values: Sequence[float]) -> None:
        """`observe` each of `values` in the one series `key`."""
        if not values:
            return
        series = self.values.get(key)
        if series is None:
            key = self._series_key(key)
            series = self.values.get(key)
            if series is None:
                series = self.values[key] = self.zero()
        buckets, total = self.buckets, series[-1]
        for value in values:
            series[bisect_left(buckets, value)] += 1
            total += value
        series[-1] = total
        if self.persist:
            self.dirty.add(key)



def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


class MetricSet:
    """The monitor's families, by name; `skipped` counts series left out of a render because a value
    could not be written (see `exposition.render`)."""

    def __init__(self, families: Iterable[Family], skipped: Counter | None = None) -> None:
        self.families: dict[str, Family] = {f.name: f for f in families}
        self.skipped = skipped
        if skipped is not None:
            self.families.setdefault(skipped.name, skipped)

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition body and its content type, negotiated from `Accept` (OpenMetrics or text)."""
        skipped = self.skipped
        return exposition.render(self.families.values(), accept,
                                 lambda count: skipped.inc((), count) if skipped is not None else None)

    def take_dirty(self) -> tuple[list[tuple[str, Key, Any]], list[tuple[str, Key]]]:
        """(family, labels, value) of every persisted series changed since the last call, and
        (family, labels) of those dropped."""
        rows: list[tuple[str, Key, Any]] = []
        removed: list[tuple[str, Key]] = []
        for family in self.families.values():
            if family.dirty:
                rows.extend((family.name, key, family.values[key]) for key in family.dirty)
                family.dirty = set()
            if family.removed:
                removed.extend((family.name, key) for key in family.removed)
                family.removed = set()
        return rows, removed

    def forget_dirty(self) -> None:
        """Drop pending changes (after the state was reloaded from the database)."""
        for family in self.families.values():
            family.dirty = set()
            family.removed = set()
