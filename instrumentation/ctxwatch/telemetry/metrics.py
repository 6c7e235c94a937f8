"""The metric instruments of the wire contract, created once per meter provider, and how one
guard `Report` is recorded on them.

Instruments are built from `semconv.METRICS` (name, unit, bucket advice), cached per meter
provider and shared by every `MutationTelemetry` on that provider, together with the agent and
service caps, so many guards in one process still stay under the cardinality cap. Counters are
pre-aggregated `Tally`s (observable counters); histograms are synchronous: the guard duration for
every attempt, the rewrite figures (pass number, d_t, r_t) for applied rewrites only
(`semconv.is_applied_rewrite`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics._internal import _PROXY_METER_PROVIDER as _API_PROXY  # the global before any set

from .. import semconv
from ..report import Report
from .bounded import BoundedValues
from .tally import Tally

_G = semconv.GENAI_V1_41
_DECISIONS = {"patch": "patch", "defer": "defer", "abort": "abort", "halt": "halt"}


def _create(meter: metrics.Meter, spec: semconv.MetricSpec) -> Any:
    if spec.instrument == "counter":
        return Tally(meter, spec.name, spec.unit, spec.description)
    return meter.create_histogram(spec.name, unit=spec.unit, description=spec.description,
                                  explicit_bucket_boundaries_advisory=spec.buckets)


class Instruments:
    """Every instrument of the contract on one meter, plus the caps on caller-supplied labels."""

    def __init__(self, meter: metrics.Meter) -> None:
        made = {spec.name: _create(meter, spec) for spec in semconv.METRICS}
        self.mutations = made[semconv.MUTATIONS.name]
        self.lost_literals = made[semconv.LOST_LITERALS.name]
        self.orphaned_tool_parts = made[semconv.ORPHANED_TOOL_PARTS.name]
        self.deferrals = made[semconv.DEFERRALS.name]
        self.violations = made[semconv.INVARIANT_VIOLATIONS.name]
        self.warnings = made[semconv.INVARIANT_WARNINGS.name]
        self.telemetry_errors = made[semconv.TELEMETRY_ERRORS.name]
        self.duration = made[semconv.GUARD_DURATION.name]
        self.hash_distance = made[semconv.HASH_DISTANCE_HISTOGRAM.name]
        self.literal_loss_rate = made[semconv.LITERAL_LOSS_RATE.name]
        self.pass_number = made[semconv.PASS_NUMBER_HISTOGRAM.name]
        self.agents = BoundedValues()
        self.services = BoundedValues()
        self._labels: dict[tuple, dict[str, str]] = {}

    def _label_set(self, key: tuple) -> dict[str, str]:
        """The attribute dict for (kind, decision|None, agent|None, service|None, extra key, value)."""
        labels = self._labels.get(key)
        if labels is None:
            kind, decision, agent, service, extra_key, extra_value = key
            labels = {semconv.MUTATION_KIND: kind}
            if decision is not None:
                labels[semconv.DECISION] = decision
            if agent is not None:
                labels[_G.agent_name] = agent
            if service is not None:
                labels[semconv.SERVICE_NAME] = service
            if extra_key is not None:
                labels[extra_key] = extra_value
            self._labels[key] = labels
        return labels

    def record(self, report: Report, violations: list[str], warnings: list[str], agent: str | None,
               service: str | None, duration_s: float) -> None:
        """Record one guard decision on every instrument it concerns (`violations` and `warnings` are
        the report's, computed once by the caller)."""
        kind = semconv.bounded_kind(report.kind)
        decision = _DECISIONS.get(report.decision, semconv.OVERFLOW)
        agent = None if agent is None else self.agents.value(agent)
        service = None if service is None else self.services.value(service)
        key = (kind, decision, agent, service, None, None)
        labels = self._label_set(key)
        self.mutations.add(1, labels, key)
        self.duration.record(duration_s, labels)
        if semconv.is_applied_rewrite(report.kind, decision):
            self.pass_number.record(report.pass_number, labels)
            if report.hash_distance is not None:
                self.hash_distance.record(report.hash_distance, labels)
            if report.literals_before:
                self.literal_loss_rate.record(report.literals_lost / report.literals_before, labels)
        if report.literals_lost:
            self.lost_literals.add(report.literals_lost, labels, key)
        for side, count in zip(semconv.ORPHAN_SIDES, (report.orphans_tool_use, report.orphans_tool_result),
                               strict=True):
            if count:
                self._add(self.orphaned_tool_parts, count, (kind, decision, agent, service, semconv.ORPHAN_SIDE, side))
        if decision == "defer":
            self._add(self.deferrals, 1, (kind, None, agent, service, None, None))
        for inv in violations:
            self._add(self.violations, 1,
                      (kind, decision, agent, service, semconv.INVARIANT, semconv.bounded_invariant(inv)))
        for inv in warnings:
            self._add(self.warnings, 1,
                      (kind, None, agent, service, semconv.INVARIANT, semconv.bounded_invariant(inv)))

    def _add(self, tally: Tally, amount: int, key: tuple) -> None:
        tally.add(amount, self._label_set(key), key)


_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()


def instruments_for(meter_provider: metrics.MeterProvider | None, version: str,
                    schema_url: str) -> Instruments:
    """The shared instruments on `meter_provider` (None: the global provider), created on first use.

    There is one set per provider the instruments end up on: the global provider's set serves both
    None and that provider passed explicitly, and the set made before any SDK was installed (on the
    API's proxy, which delegates to the SDK installed later) goes on serving the global provider. Two
    sets on one SDK meter would lose counts: the SDK keeps the first observable counter of a name and
    never calls the second's callback."""
    with _lock:
        current = metrics.get_meter_provider()
        provider = current if meter_provider is None else meter_provider
        made = _by_provider.get(provider)
        if made is None and provider is current:
            made = _by_provider.get(_API_PROXY)
        if made is None:
            made = Instruments(metrics.get_meter(semconv.INSTRUMENTATION_NAME, version, provider,
                                                 schema_url=schema_url))
        _by_provider[provider] = made
        return made
