"""The monitor's metric families: the guard's instruments rebuilt from spans, loops by state, self-metrics.

Fleet families reuse the wire contract's instruments (`ctxwatch.semconv.METRICS`: names, label keys,
buckets and descriptions), so a dashboard reads the same `ctxwatch_*` series whether they come from
the monitor or from the guard's own OTel metrics through a collector; select by `job` when you
scrape both. `ctxwatch_loops{service,agent,state}` counts tracked loops per detector state, kept
incrementally by the loop store. Self-metrics are `ctxwatch_monitor_*`.

Labels are bounded twice: each wire label (service, agent) admits at most `label_cap` values at once,
and `agent_version` (on `ctxwatch_mutations_total` only) `semconv.MAX_VERSION_VALUES` version-like ones,
freed `label_ttl` after a span last carried them unless a tracked loop holds them (`sweep_labels`),
and the families with wire labels draw on one `SeriesBudget` (`series_budget` in total,
`metric_series_budget` per family); what the budget refuses goes to the overflow series and is
counted in `ctxwatch_monitor_series_overflow_total{metric}`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ctxwatch import semconv
from ctxwatch.contraction import STATES
from ctxwatch.report import DECISIONS, INVARIANTS, MUTATION_KINDS
from ctxwatch.telemetry import fleet as fleet_rule
from ctxwatch.telemetry.bounded import BoundedValues, agent_versions

from . import wire
from .config import MonitorConfig
from .loop_state import STATUSES
from .metric_store import Counter, Family, Gauge, Histogram, Key, MetricSet, SeriesBudget
from .records import MutationRecord

_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOP_LABELS = ("service", "agent", "state")
STATUS_LABELS = ("service", "agent", "status")
EVICTION_REASONS = ("ttl", "cap")  # not seen within the TTL; least recently seen past the cap
WIRE_LABELS = ("service", "agent", "agent_version")  # label values that come from the wire (bounded, budgeted)
LABEL_STATE_KEYS = ("services", "agents", "versions")  # the admitted values persisted (`take_label_state`)
# how many values each closed-set label can take (unknown kinds and invariants are OVERFLOW)
_CLOSED_SETS = {"kind": len(MUTATION_KINDS) + 1, "decision": len(DECISIONS), "side": len(semconv.ORPHAN_SIDES),
                "invariant": len(INVARIANTS) + 1, "state": len(STATES), "status": len(STATUSES)}


CACHE_COUNTERS = {
    semconv.CACHE_INVALIDATED_CHARS: "Consumed characters the applied rewrites invalidated for the provider's "
                                     "prompt cache (ctxwatch.cache.invalidated.chars summed).",
    semconv.CACHE_INVALIDATED_TOKENS: "The same in estimated tokens (ctxwatch.cache.invalidated.tokens summed).",
    semconv.CACHE_READ_TOKENS: "Tokens the providers served from their prompt cache, as the responses report "
                               "them (ctxwatch.cache.read.tokens summed).",
    semconv.CACHE_CREATION_TOKENS: "Tokens the providers wrote to their prompt cache (as the responses report "
                                   "them; ctxwatch.cache.creation.tokens summed).",
}


# a group of spans counted together: (kind, decision, agent, service, agent version), the label vector of
# `ctxwatch.telemetry.fleet` without its side-or-invariant
Base = tuple[str, str, str, str, str]
# where each wire label sits in that vector: the fleet rule's own positions
_BASE_INDEX = {semconv.PROMETHEUS_LABELS[attribute]: index for attribute, index in fleet_rule.POSITION.items()
               if semconv.PROMETHEUS_LABELS.get(attribute) in WIRE_LABELS}


def cache_counter_name(attribute: str) -> str:
    """The Prometheus counter summing a cache attribute: ``ctxwatch.cache.read.tokens`` ->
    ``ctxwatch_cache_read_tokens_total``."""
    return attribute.replace(".", "_") + "_total"


def _family(spec: semconv.MetricSpec, budget: SeriesBudget) -> Counter | Histogram:
    labels = [semconv.PROMETHEUS_LABELS[a] for a in spec.attributes]
    name = semconv.prometheus_name(spec)
    if spec.instrument == "counter":
        return Counter(name, spec.description, labels, persist=True, wire=WIRE_LABELS, budget=budget)
    return Histogram(name, spec.description, labels, buckets=spec.buckets or (), persist=True, wire=WIRE_LABELS,
                     budget=budget)


def overflow_series(family: Family) -> int:
    """The most series `family` can hold with every wire label at OVERFLOW (reserved out of the budget)."""
    closed = [_CLOSED_SETS[label] for label in family.labelnames if label not in WIRE_LABELS]
    return math.prod(closed) * family.cost


class _Fleet:
    """One semconv instrument as a family, with the getter that picks its labels from a label vector
    (`ctxwatch.telemetry.fleet.label_picker`, the guard's own)."""

    __slots__ = ("family", "key")

    def __init__(self, spec: semconv.MetricSpec, budget: SeriesBudget) -> None:
        self.family = _family(spec, budget)
        self.key = fleet_rule.label_picker(spec)


class Instruments:
    """All families, the bounded agent/service labels, and `observe` for one accepted record."""

    def __init__(self, label_cap: int, series_budget: int = MonitorConfig.series_budget,
                 metric_series_budget: int = MonitorConfig.metric_series_budget) -> None:
        """ValueError when `series_budget` cannot hold the reserved overflow series."""
        self.services = BoundedValues(label_cap)
        self.agents = BoundedValues(label_cap)
        self.versions = agent_versions()
        self.budget = budget = SeriesBudget(series_budget, metric_series_budget)
        # the guard's fleet instruments, by semconv name (what `fleet_rule` says a span updates)
        self._fleet = {spec.name: _Fleet(spec, budget) for spec in fleet_rule.COUNTERS + fleet_rule.HISTOGRAMS}
        by_name = self._fleet
        self.mutations = by_name[semconv.MUTATIONS.name]
        self.lost_literals = by_name[semconv.LOST_LITERALS.name]
        self.orphans = by_name[semconv.ORPHANED_TOOL_PARTS.name]
        self.deferrals = by_name[semconv.DEFERRALS.name]
        self.violations = by_name[semconv.INVARIANT_VIOLATIONS.name]
        self.warnings = by_name[semconv.INVARIANT_WARNINGS.name]
        self.hash_distance = by_name[semconv.HASH_DISTANCE_HISTOGRAM.name]
        self.loss_rate = by_name[semconv.LITERAL_LOSS_RATE.name]
        self.pass_number = by_name[semconv.PASS_NUMBER_HISTOGRAM.name]
        self.tokens_before = by_name[semconv.TOKENS_BEFORE_HISTOGRAM.name]
        fleet = [self.mutations, self.lost_literals, self.orphans, self.deferrals, self.violations,
                 self.warnings, self.hash_distance, self.loss_rate, self.pass_number, self.tokens_before]
        self.onsets = Counter("ctxwatch_contraction_onsets_total",
                              "Loops the monitor's contraction detector saw enter the contraction regime.",
                              ("service", "agent"), persist=True, wire=WIRE_LABELS, budget=budget)
        self.loops = Gauge("ctxwatch_loops", "Loops tracked by the monitor, by contraction state.", LOOP_LABELS,
                           wire=WIRE_LABELS, budget=budget)
        self.loop_status = Gauge("ctxwatch_loops_by_status",
                                 "Loops tracked by the monitor, by on-call status (healthy, contracting, blocked, "
                                 "halted, idle; docs/monitor.md, \"Loop status\").", STATUS_LABELS,
                                 wire=WIRE_LABELS, budget=budget)
        # what rewrites cost the provider's prompt cache: each span's figures summed per service and agent
        self.cache = [Counter(cache_counter_name(name), description, ("service", "agent"), persist=True,
                              wire=WIRE_LABELS, budget=budget) for name, description in CACHE_COUNTERS.items()]
        budgeted: list[Family] = [f.family for f in fleet] + [self.onsets, self.loops, self.loop_status, *self.cache]
        self.series_overflow = Counter("ctxwatch_monitor_series_overflow_total",
                                       "Updates that went to a metric's overflow series (service and agent "
                                       "_OTHER) because the series budget had no room for a new series.",
                                       ("metric",))
        for family in budgeted:
            budget.reserve(family.name, overflow_series(family))
            self.series_overflow.inc((family.name,), 0)
        budget.on_overflow = lambda name: self.series_overflow.inc((name,))
        self.requests = Counter("ctxwatch_monitor_requests_total", "HTTP requests answered, by handler and status.",
                                ("handler", "code"))
        self.request_duration = Histogram("ctxwatch_monitor_request_duration_seconds",
                                          "Time to answer an HTTP request.", ("handler",), buckets=_DURATION_BUCKETS)
        self.spans_accepted = Counter("ctxwatch_monitor_spans_accepted_total", "Mutation spans accepted.")
        self.spans_rejected = Counter("ctxwatch_monitor_spans_rejected_total",
                                      "Mutation spans rejected as invalid (reported in partial_success).")
        self.spans_ignored = Counter("ctxwatch_monitor_spans_ignored_total",
                                     "Spans without ctxwatch.mutation.kind (not mutation spans), ignored.")
        self.decode_errors = Counter("ctxwatch_monitor_decode_errors_total",
                                     "Requests refused with 400 because the body could not be decoded.", ("encoding",))
        self.slow_path_reads = Counter("ctxwatch_monitor_slow_path_reads_total",
                                       "Spans and resources read by a slow decoding path (OTLP/JSON by json_format, "
                                       "protobuf span by span), charged to their client's slow-path budget.",
                                       ("encoding",))
        self.slow_path_refusals = Counter("ctxwatch_monitor_slow_path_refusals_total",
                                          "Export requests refused because their client's slow-path budget was spent "
                                          "(429) or one request needed more than it saves up (413; slow_path_rate, "
                                          "slow_path_burst).", ("encoding",))
        self.loops_tracked = Gauge("ctxwatch_monitor_loops_tracked", "Loops held in memory.")
        self.evictions = Counter("ctxwatch_monitor_loop_evictions_total",
                                 "Loops forgotten: reason=ttl (not seen within the TTL) or cap (least recently "
                                 "seen, past the cap on tracked loops).", ("reason",))
        self.db_write_duration = Histogram("ctxwatch_monitor_db_write_duration_seconds",
                                           "Time to commit one batch of ingest requests to the state database.",
                                           buckets=_DURATION_BUCKETS)
        self.inflight = Gauge("ctxwatch_monitor_inflight_requests", "Ingest requests admitted and not yet answered.")
        self.late_spans = Counter("ctxwatch_monitor_late_spans_total",
                                  "Mutation spans counted but not applied to their loop: reason=late (behind the "
                                  "loop's sequence: a duplicate, a span of the episode the loop left, one after its "
                                  "gap was given up) or unsequenced (no ctxwatch.sequence, from a loop whose guard "
                                  "numbers its spans).", ("reason",))
        for reason in ("late", "unsequenced"):
            self.late_spans.inc((reason,), 0)
        self.held_spans = Counter("ctxwatch_monitor_spans_held_total",
                                  "Mutation spans that arrived before an earlier span of their loop and waited "
                                  "for it (or for a second span of a new episode).")
        self.unwritable = Counter("ctxwatch_monitor_unwritable_series_total",
                                  "Series left out of a /metrics render because a value could not be written.")
        # every known label value starts at 0, so rate() sees the first event and panels have data
        for encoding in (wire.PROTOBUF, wire.JSON):
            for counter in (self.decode_errors, self.slow_path_reads, self.slow_path_refusals):
                counter.inc((encoding,), 0)
        for reason in EVICTION_REASONS:
            self.evictions.inc((reason,), 0)
        families: list[Family] = [f.family for f in fleet]
        families += [self.onsets, self.loops, self.loop_status, *self.cache, self.series_overflow, self.requests,
                     self.request_duration,
                     self.spans_accepted, self.spans_rejected, self.spans_ignored, self.decode_errors,
                     self.slow_path_reads, self.slow_path_refusals,
                     self.loops_tracked, self.evictions, self.db_write_duration, self.inflight, self.late_spans,
                     self.held_spans]
        self.metric_set = MetricSet(families, skipped=self.unwritable)
        # the fleet families' label keys per (kind, decision, agent, service, agent version), by (family, side or
        # invariant)
        self._key_cache: dict[Base, dict[tuple[str, str], Key]] = {}
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}

    def forget_labels(self) -> None:
        """Forget the admitted agent and service names and agent versions (before the state is reloaded from
        the database)."""
        self.services = BoundedValues(self.services.cap)
        self.agents = BoundedValues(self.agents.cap)
        self.versions = agent_versions(self.versions.cap)
        self._pairs.clear()

    def label_pair(self, service: str, agent: str) -> tuple[str, str]:
        """The bounded (service, agent) label values of a loop (one shared tuple per distinct pair)."""
        pair = (self.services.value(service), self.agents.value(agent))
        return self._pairs.setdefault(pair, pair)

    def observe(self, observed: Iterable[tuple[MutationRecord, tuple[str, str]]]) -> None:
        """Count one request's accepted mutation spans, each with its bounded (service, agent): the span's own,
        the loop's where it names none (`Engine._apply`).

        Spans are grouped by their label tuple first, so each series is updated once per request. The agent
        version is the span's own (bounded; "" when it sends none)."""
        now = time.time()
        groups: dict[Base, list[MutationRecord]] = {}
        version_of = self.versions.value
        for record, (service, agent) in observed:
            version = record.agent_version
            base = (semconv.bounded_kind(record.kind), record.decision, agent, service,
                    version_of(version) if version else "")
            group = groups.get(base)
            if group is None:
                groups[base] = [record]
            else:
                group.append(record)
        for base, records in groups.items():
            self.agents.seen(base[2], now)
            self.services.seen(base[3], now)
            self.versions.seen(base[4], now)
            self._observe_group(base, records)

    # --- label values: ageing out and persistence ------------------------------------------------------
    def sweep_labels(self, now: float, ttl: float) -> None:
        """Free the service and agent values no span carried within `ttl` seconds and no tracked loop
        holds, and the agent versions no span carried within `ttl`, dropping their series (so their room in
        the budget and their label slot go to others)."""
        if not ttl:
            return
        held = list(self.loops.values)
        # (label, its values, its place in a loop's (service, agent) pair: loops hold no version)
        for label, bounded, in_pair in (("service", self.services, 0), ("agent", self.agents, 1),
                                        ("agent_version", self.versions, None)):
            freed = bounded.expire(now - ttl, set() if in_pair is None else {key[in_pair] for key in held})
            if not freed:
                continue
            for family in self.metric_set.families.values():
                family.forget(label, freed)
            index = _BASE_INDEX[label]
            self._key_cache = {base: keys for base, keys in self._key_cache.items() if base[index] not in freed}
            if in_pair is not None:
                self._pairs = {pair: labels for pair, labels in self._pairs.items() if pair[in_pair] not in freed}

    def _bounded_labels(self) -> tuple[BoundedValues, ...]:
        """The bounded values of each `LABEL_STATE_KEYS` entry, in that order."""
        return self.services, self.agents, self.versions

    def take_label_state(self, force: bool = False) -> dict[str, Any]:
        """The admitted values and their last-seen times to persist, when they changed (or `force`)."""
        bounded = self._bounded_labels()
        if not (force or any(b.changed for b in bounded)):
            return {}
        for b in bounded:
            b.changed = False
        return {key: b.state() for key, b in zip(LABEL_STATE_KEYS, bounded, strict=True)}

    def restore_labels(self, saved: Mapping[str, Any]) -> None:
        """Admit the persisted values (`take_label_state`'s keys; missing ones are empty)."""
        for key, bounded in zip(LABEL_STATE_KEYS, self._bounded_labels(), strict=True):
            bounded.restore(saved.get(key) or [])

    def _observe_group(self, base: Base, records: list[MutationRecord]) -> None:
        """Record a group of spans with one (kind, decision, agent, service, agent version) by the guard's rule
        (`ctxwatch.telemetry.fleet`), each series updated once for the group."""
        kind, decision = base[0], base[1]
        lost = use = result = 0
        violations: list[str] = []
        warnings: list[str] = []
        for r in records:
            lost += r.lost
            use += r.orphans_tool_use
            result += r.orphans_tool_result
            if r.violations:
                violations += r.violations
            if r.warnings:
                warnings += r.warnings
        keys = self._key_cache.get(base)
        if keys is None:
            keys = self._key_cache[base] = {}
        added: dict[tuple[str, str], int] = {}
        for spec, extra, amount in fleet_rule.counts(decision, len(records), lost, use, result, violations, warnings):
            slot = (spec.name, extra or "")
            added[slot] = added.get(slot, 0) + amount
        for slot, amount in added.items():
            counter = self._fleet[slot[0]].family
            if not isinstance(counter, Counter):
                raise TypeError(f"{slot[0]} is not a counter")
            counter.inc(keys.get(slot) or self._new_key(keys, base, slot), amount)
        figures = ((r.pass_number, r.d, r.lost if r.hidden is None else None, r.before, r.tokens_before)
                   for r in records)  # an opaque rewrite's loss is unknown: no r_t
        for spec, values in fleet_rule.observations(kind, decision, figures):
            histogram = self._fleet[spec.name].family
            if not isinstance(histogram, Histogram):
                raise TypeError(f"{spec.name} is not a histogram")
            slot = (spec.name, "")
            histogram.observe_many(keys.get(slot) or self._new_key(keys, base, slot), values)
        cache_key = (base[3], base[2])
        for counter, total in zip(self.cache, map(sum, zip(*[r.cache for r in records], strict=True)), strict=True):
            if total or cache_key not in counter.values:  # a series from the agent's first span on, 0 or not
                counter.inc(cache_key, total)

    def _new_key(self, keys: dict[tuple[str, str], Key], base: Base, slot: tuple[str, str]) -> Key:
        """The label key of the family named `slot[0]` for `base` and the side or invariant `slot[1]` (cached)."""
        key = keys[slot] = self._fleet[slot[0]].key((*base, slot[1]))
        return key
