"""Incrementally kept metric families and their Prometheus / OpenMetrics exposition.

Every value is updated when a span or request is processed, never computed by scanning loops, so
rendering costs only the (bounded) number of series. Families marked `persist` report the series
changed since the last flush (`take_dirty`) so the state database can keep them across restarts.
Exposition goes through prometheus_client's text and OpenMetrics encoders, chosen by `Accept`.

Rendering may run on another thread than the updates: each family is copied with one
`list(dict.items())`, a single C-level call the GIL makes atomic for these str-tuple keys.
Ingest validation keeps unwritable values out, but should one get in anyway (a label value that is
not UTF-8, a number too large for a float), the render is done again without the series holding it,
which are counted on the `skipped` counter: /metrics never fails because of one value.
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


def _writable(sample: Any) -> bool:
    """Whether the encoders can write this sample: UTF-8 label values and a value that is a float."""
    try:
        float(sample.value)
        for value in sample.labels.values():
            value.encode()
    except (TypeError, ValueError, OverflowError, UnicodeEncodeError, AttributeError):
        return False
    return True


def _series_key(sample: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in sample.labels.items() if k not in ("le", "quantile")))


class _Writable:
    """A collector yielding the set's metrics without the series holding a sample that cannot be written."""

    def __init__(self, metric_set: MetricSet) -> None:
        self.metric_set = metric_set

    def collect(self) -> Iterator[Metric]:
        skipped = 0
        for metric in list(self.metric_set.collect()):
            bad = {_series_key(sample) for sample in metric.samples if not _writable(sample)}
            if bad:
                kept = [sample for sample in metric.samples if _series_key(sample) not in bad]
                skipped += len(bad)
                metric = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                metric.samples = kept
            yield metric
        if skipped and self.metric_set.skipped is not None:
            self.metric_set.skipped.inc((), skipped)


class MetricSet:
    """The monitor's families, as a prometheus_client collector in a private registry; `skipped` counts
    series left out of a render because they could not be written."""

    def __init__(self, families: Iterable[Family], skipped: Counter | None = None) -> None:
        self.families: dict[str, Family] = {f.name: f for f in families}
        self.skipped = skipped
        if skipped is not None:
            self.families.setdefault(skipped.name, skipped)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for family in self.families.values():
            yield family.metric()

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The exposition body and its content type, negotiated from `Accept` (OpenMetrics or text)."""
        encoder, content_type = exposition.choose_encoder(accept or "")
        try:
            return encoder(self.registry), content_type
        except Exception:  # noqa: BLE001 - a value that cannot be written: left out, counted, never a 500
            return encoder(_Writable(self)), content_type  # type: ignore[arg-type]

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
