"""Incrementally kept metric families and their Prometheus / OpenMetrics exposition.

Every value is updated when a span or request is processed, never computed by scanning loops, so
rendering costs only the (bounded) number of series. Families marked `persist` report the series
changed since the last flush (`take_dirty`) so the state database can keep them across restarts.
Exposition goes through prometheus_client's text and OpenMetrics encoders, chosen by `Accept`.

Rendering may run on another thread than the updates: each family is copied with one
`list(dict.items())`, a single C-level call the GIL makes atomic for these str-tuple keys.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import exposition
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry
from prometheus_client.utils import floatToGoString

Key = tuple[str, ...]


class Family:
    """One metric family: a name, its label names, and a value per label tuple."""

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = (), *, persist: bool = False) -> None:
        self.name, self.doc, self.labelnames, self.persist = name, doc, tuple(labelnames), persist
        self.values: dict[Key, Any] = {}
        self.dirty: set[Key] = set()

    def restore(self, key: Key, value: Any) -> None:
        """Set a series from its persisted value."""
        self.values[key] = value


class _ScalarFamily(Family):
    """A family with one number per series, exposed as `exposition` (a prometheus_client family type)."""

    exposition: type[CounterMetricFamily] | type[GaugeMetricFamily]

    def metric(self) -> Metric:
        family = self.exposition(self.name, self.doc, labels=self.labelnames)
        for key, value in list(self.values.items()):
            family.add_metric(key, value)
        return family


class Counter(_ScalarFamily):
    exposition = CounterMetricFamily

    def inc(self, key: Key, amount: float = 1) -> None:
        values = self.values
        values[key] = values.get(key, 0) + amount
        if self.persist:
            self.dirty.add(key)


class Gauge(_ScalarFamily):
    """A value that goes up and down; never persisted (gauges are rebuilt from the state)."""

    exposition = GaugeMetricFamily

    def add(self, key: Key, delta: float) -> None:
        self.values[key] = self.values.get(key, 0) + delta

    def set(self, key: Key, value: float) -> None:
        self.values[key] = value


class Histogram(Family):
    """Per series: a list of per-bucket counts (the last one is +Inf) followed by the sum."""

    def __init__(self, name: str, doc: str, labelnames: Sequence[str] = (), *, buckets: Iterable[float],
                 persist: bool = False) -> None:
        super().__init__(name, doc, labelnames, persist=persist)
        self.buckets = tuple(sorted(float(b) for b in buckets if math.isfinite(b)))
        self._le = [floatToGoString(b) for b in self.buckets] + ["+Inf"]

    def observe(self, key: Key, value: float) -> None:
        self.observe_many(key, (value,))

    def observe_many(self, key: Key, values: Sequence[float]) -> None:
        """`observe` each of `values` in the one series `key`."""
        if not values:
            return
        series = self.values.get(key)
        if series is None:
            series = self.values[key] = [0] * (len(self.buckets) + 1) + [0.0]
        buckets, total = self.buckets, series[-1]
        for value in values:
            series[bisect_left(buckets, value)] += 1
            total += value
        series[-1] = total
        if self.persist:
            self.dirty.add(key)

    def metric(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        for key, series in list(self.values.items()):
            cumulative, total = [], 0
            for le, count in zip(self._le, series, strict=False):
                total += count
                cumulative.append((le, total))
            family.add_metric(key, cumulative, series[-1])
        return family


class MetricSet:
    """The monitor's families, as a prometheus_client collector in a private registry."""

    def __init__(self, families: Iterable[Family]) -> None:
        self.families: dict[str, Family] = {f.name: f for f in families}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for family in self.families.values():
            yield family.metric()

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition body and its content type, negotiated from `Accept` (OpenMetrics or text)."""
        encoder, content_type = exposition.choose_encoder(accept or "")
        return encoder(self.registry), content_type

    def take_dirty(self) -> list[tuple[str, Key, Any]]:
        """(family, labels, value) of every persisted series changed since the last call."""
        rows = []
        for family in self.families.values():
            if family.dirty:
                rows.extend((family.name, key, family.values[key]) for key in family.dirty)
                family.dirty = set()
        return rows

    def forget_dirty(self) -> None:
        """Drop pending changes (after the state was reloaded from the database)."""
        for family in self.families.values():
            family.dirty = set()
