"""The monitor's metric families: the guard's instruments rebuilt from spans, loops by state, self-metrics.

Fleet families reuse the wire contract's instruments (`ctxwatch.semconv.METRICS`: names, label keys,
buckets and descriptions), so a dashboard reads the same `ctxwatch_*` series whether they come from
the monitor or from the guard's own OTel metrics through a collector; select by `job` when you
scrape both. `ctxwatch_loops{service,agent,state}` counts tracked loops per detector state, kept
incrementally by the loop store. Self-metrics are `ctxwatch_monitor_*`. Labels are bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter

from ctxwatch import semconv
from ctxwatch.report import MUTATION_KINDS
from ctxwatch.semconv import OVERFLOW

from . import wire
from .labels import BoundedLabel
from .metrics import Counter, Family, Gauge, Histogram, Key, MetricSet
from .records import AGENT_NAME, MutationRecord

# A record's label vector: (kind, decision, agent, service, side-or-invariant).
_VECTOR_INDEX = {semconv.MUTATION_KIND: 0, semconv.DECISION: 1, AGENT_NAME: 2, semconv.SERVICE_NAME: 3,
                 semconv.ORPHAN_SIDE: 4, semconv.INVARIANT: 4}
_DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LOOP_LABELS = ("service", "agent", "state")
_KINDS = frozenset(MUTATION_KINDS)
EVICTION_REASONS = ("ttl", "cap")  # not seen within the TTL; least recently seen past the cap


def _family(spec: semconv.MetricSpec) -> Counter | Histogram:
    labels = [semconv.PROMETHEUS_LABELS[a] for a in spec.attributes]
    name = semconv.prometheus_name(spec)
    if spec.instrument == "counter":
        return Counter(name, spec.description, labels, persist=True)
    return Histogram(name, spec.description, labels, buckets=spec.buckets or (), persist=True)


class _Fleet:
    """One semconv instrument as a family, with the getter that picks its labels from a vector."""

    __slots__ = ("family", "key")

    def __init__(self, spec: semconv.MetricSpec) -> None:
        self.family = _family(spec)
        self.key = itemgetter(*(_VECTOR_INDEX[a] for a in spec.attributes))


class Instruments:
    """All families, the bounded agent/service labels, and `observe` for one accepted record."""

    def __init__(self, label_cap: int) -> None:
        self.services = BoundedLabel(label_cap)
        self.agents = BoundedLabel(label_cap)
        self.mutations = _Fleet(semconv.MUTATIONS)
        self.lost_literals = _Fleet(semconv.LOST_LITERALS)
        self.orphans = _Fleet(semconv.ORPHANED_TOOL_PARTS)
        self.deferrals = _Fleet(semconv.DEFERRALS)
        self.violations = _Fleet(semconv.INVARIANT_VIOLATIONS)
        self.warnings = _Fleet(semconv.INVARIANT_WARNINGS)
        self.hash_distance = _Fleet(semconv.HASH_DISTANCE_HISTOGRAM)
        self.loss_rate = _Fleet(semconv.LITERAL_LOSS_RATE)
        self.pass_number = _Fleet(semconv.PASS_NUMBER_HISTOGRAM)
        fleet = [self.mutations, self.lost_literals, self.orphans, self.deferrals, self.violations,
                 self.warnings, self.hash_distance, self.loss_rate, self.pass_number]
        self.onsets = Counter("ctxwatch_contraction_onsets_total",
                              "Loops the monitor's contraction detector saw enter the contraction regime.",
                              ("service", "agent"), persist=True)
        self.loops = Gauge("ctxwatch_loops", "Loops tracked by the monitor, by contraction state.", LOOP_LABELS)
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
        self.held_spans.inc((), 0)
        self.unwritable = Counter("ctxwatch_monitor_unwritable_series_total",
                                  "Series left out of a /metrics render because a value could not be written.")
        self.unwritable.inc((), 0)
        # every known label value starts at 0, so rate() sees the first event and panels have data
        for encoding in (wire.PROTOBUF, wire.JSON):
            self.decode_errors.inc((encoding,), 0)
        for reason in EVICTION_REASONS:
            self.evictions.inc((reason,), 0)
        families: list[Family] = [f.family for f in fleet]
        families += [self.onsets, self.loops, self.requests, self.request_duration, self.spans_accepted,
                     self.spans_rejected, self.spans_ignored, self.decode_errors, self.loops_tracked,
                     self.evictions, self.db_write_duration, self.inflight, self.late_spans,
                     self.held_spans]
        self.metric_set = MetricSet(families, skipped=self.unwritable)
        # label keys of the families keyed by (kind, decision, agent, service), per such tuple (bounded)
        self._base = (self.mutations, self.lost_literals, self.deferrals, self.hash_distance, self.loss_rate,
                      self.pass_number)
        self._key_cache: dict[tuple[str, str, str, str], tuple[Key, ...]] = {}
        self._pairs: dict[tuple[str, str], tuple[str, str]] = {}

    def forget_labels(self) -> None:
        """Forget the admitted agent and service names (before the state is reloaded from the database)."""
        self.services = BoundedLabel(self.services.cap)
        self.agents = BoundedLabel(self.agents.cap)
        self._pairs.clear()

    def label_pair(self, service: str, agent: str) -> tuple[str, str]:
        """The bounded (service, agent) label values of a loop (one shared tuple per distinct pair)."""
        pair = (self.services.value(service), self.agents.value(agent))
        return self._pairs.setdefault(pair, pair)

    def _base_keys(self, kind: str, decision: str, agent: str, service: str) -> tuple[Key, ...]:
        vector = (kind, decision, agent, service, "")
        return tuple(f.key(vector) for f in self._base)

    def observe(self, observed: Iterable[tuple[MutationRecord, tuple[str, str]]]) -> None:
        """Count one request's accepted mutation spans, each with its loop's bounded (service, agent).

        Spans are grouped by their label tuple first, so each series is updated once per request."""
        groups: dict[tuple[str, str, str, str], list[MutationRecord]] = {}
        for record, (service, agent) in observed:
            kind = record.kind
            base = (kind if kind in _KINDS else OVERFLOW, record.decision, agent, service)
            group = groups.get(base)
            if group is None:
                groups[base] = [record]
            else:
                group.append(record)
        for base, records in groups.items():
            self._observe_group(base, records)

    def _observe_group(self, base: tuple[str, str, str, str], records: list[MutationRecord]) -> None:
        keys = self._key_cache.get(base)
        if keys is None:
            keys = self._key_cache[base] = self._base_keys(*base)
        mutations, lost, deferrals, distance, loss_rate, pass_number = keys
        self.mutations.family.inc(mutations, len(records))
        if base[1] == "defer":
            self.deferrals.family.inc(deferrals, len(records))
        if total_lost := sum([r.lost for r in records]):
            self.lost_literals.family.inc(lost, total_lost)
        if semconv.is_applied_rewrite(base[0], base[1]):  # one kind and decision per group
            self.hash_distance.family.observe_many(distance, [r.d for r in records if r.d is not None])
            self.loss_rate.family.observe_many(loss_rate, [r.lost / r.before for r in records if r.before])
            self.pass_number.family.observe_many(pass_number,
                                                 [r.pass_number for r in records if r.pass_number is not None])
        for record in records:
            if record.orphans_tool_use or record.orphans_tool_result or record.violations or record.warnings:
                self._observe_findings(record, list(base) + [""])

    def _observe_findings(self, record: MutationRecord, vector: list[str]) -> None:
        for side, count in (("tool_use", record.orphans_tool_use), ("tool_result", record.orphans_tool_result)):
            if count:
                vector[4] = side
                self.orphans.family.inc(self.orphans.key(vector), count)
        for fleet, ids in ((self.violations, record.violations), (self.warnings, record.warnings)):
            for invariant in ids:
                vector[4] = semconv.bounded_invariant(invariant)
                fleet.family.inc(fleet.key(vector))
