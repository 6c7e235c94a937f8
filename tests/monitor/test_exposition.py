"""The monitor's own exposition writer says what prometheus_client's encoders say (issue 15, item 5).

/metrics is written by `ctxwatch_monitor.exposition` from cached label text (the prometheus_client
encoders took 170 ms at the default series budget). Both formats are parsed back with
prometheus_client's parsers (the OpenMetrics one is strict) and compared, sample by sample, with
what prometheus_client's own encoders write for the same families and values, label values that
need escaping included.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import exposition
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.registry import CollectorRegistry

from ctxwatch_monitor.instruments import Instruments
from ctxwatch_monitor.metric_store import MetricSet

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


class _Reference:
    """The same families as prometheus_client metric families (the encoders' input)."""

    def __init__(self, metric_set: MetricSet) -> None:
        self.metric_set = metric_set

    def collect(self) -> Iterator[Metric]:
        for family in self.metric_set.families.values():
            if family.kind == "histogram":
                out = HistogramMetricFamily(family.name, family.doc, labels=family.labelnames)
                for key, series in family.items():
                    cumulative, total = [], 0
                    for le, count in zip(family.bucket_labels, series, strict=False):
                        total += count
                        cumulative.append((le, total))
                    out.add_metric(key, cumulative, series[-1])
            else:
                kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
                out = kind(family.name, family.doc, labels=family.labelnames)
                for key, value in family.items():
                    out.add_metric(key, value)
            yield out


def _samples(families: Iterator[Metric]) -> dict[tuple[str, str, tuple[tuple[str, str], ...]], float]:
    return {(f.name, f.type, s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def _populated() -> Instruments:
    instruments = Instruments(label_cap=10)
    for agent in ('plain', 'quo"te', "back\\slash", "new\nline"):
        base = ("compact", "patch", agent, "svc")
        instruments.mutations.family.inc((*base, "2.1.39"), 3)  # and its agent_version
        instruments.lost_literals.family.inc(base, 1.5)
        instruments.hash_distance.family.observe_many(base, [0.05, 0.3, 0.99, 1.0])
        instruments.loops.add(("svc", agent, "healthy"), 2)
    instruments.spans_accepted.inc((), 7)
    instruments.requests.inc(("traces", "200"))
    return instruments


@pytest.mark.parametrize("accept,parse", [(None, parse_text), (OPENMETRICS, parse_openmetrics)],
                         ids=["text", "openmetrics"])
def test_same_samples_as_prometheus_client(accept: str | None, parse) -> None:
    metric_set = _populated().metric_set
    body, content_type = metric_set.render(accept)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Reference(metric_set))
    encoder, expected_type = exposition.choose_encoder(accept or "")
    assert content_type == expected_type
    ours, theirs = _samples(parse(body.decode())), _samples(parse(encoder(registry).decode()))
    assert ours == theirs
    assert ('ctxwatch_mutations_total', (("agent", 'quo"te'), ("agent_version", "2.1.39"), ("decision", "patch"),
                                         ("kind", "compact"), ("service", "svc"))) in {(k[2], k[3]) for k in ours}


@pytest.mark.parametrize("accept,parse", [(None, parse_text), (OPENMETRICS, parse_openmetrics)],
                         ids=["text", "openmetrics"])
def test_a_value_that_cannot_be_written_is_left_out_and_counted(accept: str | None, parse) -> None:
    """Validation keeps such values out of the state; should one get in, /metrics still answers."""
    instruments = _populated()
    instruments.mutations.family.inc(("compact", "patch", "lone\ud800surrogate", "svc", ""))
    instruments.lost_literals.family.inc(("compact", "patch", "plain", "huge"), 10**400)
    body, _ = instruments.metric_set.render(accept)
    samples = _samples(parse(body.decode()))
    assert not any("surrogate" in str(key) or "huge" in str(key) for key in samples)
    assert ("ctxwatch_mutations_total", (("agent", "plain"), ("agent_version", "2.1.39"), ("decision", "patch"),
                                         ("kind", "compact"), ("service", "svc"))) in {(k[2], k[3]) for k in samples}
    assert instruments.unwritable.values[()] == 2
