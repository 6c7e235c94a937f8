"""The metric instruments of the wire contract, created once per meter provider, and how one
guard `Report` is recorded on them.

Instruments are built from `semconv.METRICS` (name, unit, bucket advice), cached per meter
provider and shared by every `MutationTelemetry` on that provider, together with the agent,
service and agent-version caps, so many guards in one process still stay under the cardinality cap.
Counters are pre-aggregated `Tally`s (observable counters); histograms are synchronous: the guard
duration for every attempt, the rewrite figures (pass number, d_t, r_t, the agent's tokens before)
for applied rewrites only (`semconv.is_applied_rewrite`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from opentelemetry import metrics

from .. import semconv
from ..report import Report
from . import fleet
from .bounded import BoundedValues, agent_versions
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
        self.by_name = made
        self.telemetry_errors = made[semconv.TELEMETRY_ERRORS.name]
        self.duration = made[semconv.GUARD_DURATION.name]
        self.agents = BoundedValues()
        self.services = BoundedValues()
        self.versions = agent_versions()
        self._pickers = {spec.name: fleet.label_picker(spec) for spec in semconv.METRICS
                         if spec.name != semconv.TELEMETRY_ERRORS.name}
        self._labels: dict[tuple[str, tuple[str | None, ...]], tuple[tuple[str | None, ...], dict[str, str]]] = {}

    def _label_set(self, spec: semconv.MetricSpec, vector: tuple[str | None, ...]
                   ) -> tuple[tuple[str | None, ...], dict[str, str]]:
        """(the tally key, the attribute dict) of `spec` for a label vector (None values are left out)."""
        cache_key = (spec.name, vector)
        found = self._labels.get(cache_key)
        if found is None:
            values = self._pickers[spec.name](vector)
            labels = {key: value for key, value in zip(spec.attributes, values, strict=True) if value is not None}
            found = self._labels[cache_key] = (values, labels)
        return found

    def record(self, report: Report, violations: list[str], warnings: list[str], agent: str | None,
               service: str | None, duration_s: float, agent_version: str | None = None) -> None:
        """Record one guard decision on every instrument it concerns, by the rule the monitor records
        spans by (`telemetry.fleet`; `violations` and `warnings` are the report's, computed once)."""
        kind = semconv.bounded_kind(report.kind)
        decision = _DECISIONS.get(report.decision, semconv.OVERFLOW)
        agent = None if agent is None else self.agents.value(agent)
        service = None if service is None else self.services.value(service)
        version = self.versions.value(agent_version) if agent_version else None
        base = (kind, decision, agent, service, version)
        vector: tuple[str | None, ...] = (*base, None)
        self.duration.record(duration_s, self._label_set(semconv.GUARD_DURATION, vector)[1])
        for spec, extra, amount in fleet.counts(decision, 1, report.literals_lost, report.orphans_tool_use,
                                                report.orphans_tool_result, violations, warnings):
            key, labels = self._label_set(spec, vector if extra is None else (*base, extra))
            self.by_name[spec.name].add(amount, labels, key)
        lost = report.literals_lost if report.literals_hidden is None else None  # an opaque rewrite: unknown
        figures = ((report.pass_number, report.hash_distance, lost, report.literals_before, report.tokens_before),)
        for spec, (value,) in fleet.observations(kind, decision, figures):
            self.by_name[spec.name].record(value, self._label_set(spec, vector)[1])


_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
# the first set made for the global provider, and the provider that was global then
_first_global: tuple[Any, Instruments] | None = None


def instruments_for(meter_provider: metrics.MeterProvider | None, version: str,
                    schema_url: str) -> Instruments:
    """The shared instruments on `meter_provider` (None: the global provider), created on first use.

    There is one set per provider the instruments end up on: the global provider's set serves both
    None and that provider passed explicitly, and the set made before any SDK was installed (on the
    API's proxy, which delegates to the SDK installed later) goes on serving the global provider. Two
    sets on one SDK meter would lose counts: the SDK keeps the first observable counter of a name and
    never calls the second's callback.

    The global provider can be set once only, so a global provider that differs from the one global
    when the first global set was made means that one was the API's proxy (no private API needed)."""
    global _first_global
    with _lock:
        current = metrics.get_meter_provider()
        provider = current if meter_provider is None else meter_provider
        made = _by_provider.get(provider)
        if made is None and provider is current and _first_global is not None and _first_global[0] is not current:
            made = _first_global[1]  # made on the proxy, which now delegates to `current`
        if made is None:
            made = Instruments(metrics.get_meter(semconv.INSTRUMENTATION_NAME, version, provider,
                                                 schema_url=schema_url))
        if provider is current and _first_global is None:
            _first_global = (current, made)
        _by_provider[provider] = made
        return made
