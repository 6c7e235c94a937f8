"""Recording one mutation on the fleet instruments: which instruments it updates, by how much, and
with which labels. The one rule the guard's own metrics (`telemetry.metrics`) and the monitor's
families rebuilt from spans (`ctxwatch_monitor.instruments`) both record by, so the two produce the
same `ctxwatch_*` figures and labels for the same mutations (tests/monitor/test_guard_contract.py).

- `ctxwatch.mutations`: 1 per attempt; `ctxwatch.deferrals`: 1 per deferral; `ctxwatch.lost_literals`:
  the literals it would drop; `ctxwatch.orphaned_tool_parts`: per side; `ctxwatch.invariant_violations`
  and `..._warnings`: 1 per finding, by (bounded) invariant id (`counts`).
- The `ctxwatch.rewrite.*` histograms: pass number, d_t, r_t and the agent's tokens before the rewrite
  (when it recorded them) of applied rewrites only (`semconv.is_applied_rewrite`; `observations`).
- Labels: each instrument's `MetricSpec.attributes`, picked from one label vector
  (kind, decision, agent, service, agent version, side or invariant) by `label_picker`; only
  `ctxwatch.mutations` carries the agent version.

The guard's duration histogram is the guard's own (the monitor cannot measure it) and is not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import itemgetter
from typing import TypeVar

from .. import semconv

T = TypeVar("T")
# a mutation's label vector: (kind, decision, agent, service, agent version, side-or-invariant)
POSITION = {semconv.MUTATION_KIND: 0, semconv.DECISION: 1, semconv.GENAI_V1_41.agent_name: 2,
             semconv.SERVICE_NAME: 3, semconv.GENAI_V1_41.agent_version: 4, semconv.ORPHAN_SIDE: 5,
             semconv.INVARIANT: 5}
COUNTERS: tuple[semconv.MetricSpec, ...] = (
    semconv.MUTATIONS, semconv.LOST_LITERALS, semconv.ORPHANED_TOOL_PARTS, semconv.DEFERRALS,
    semconv.INVARIANT_VIOLATIONS, semconv.INVARIANT_WARNINGS)
HISTOGRAMS: tuple[semconv.MetricSpec, ...] = (
    semconv.HASH_DISTANCE_HISTOGRAM, semconv.LITERAL_LOSS_RATE, semconv.PASS_NUMBER_HISTOGRAM,
    semconv.TOKENS_BEFORE_HISTOGRAM)


def label_picker(spec: semconv.MetricSpec) -> Callable[[Sequence[T]], tuple[T, ...]]:
    """A function picking `spec`'s label values (in `spec.attributes` order) out of a label vector."""
    getter = itemgetter(*(POSITION[a] for a in spec.attributes))
    if len(spec.attributes) == 1:
        return lambda vector: (getter(vector),)
    return getter  # itemgetter of several items returns a tuple


def counts(decision: str, mutations: int, lost: int, orphans_tool_use: int, orphans_tool_result: int,
           violations: Iterable[str], warnings: Iterable[str]) -> Iterator[tuple[semconv.MetricSpec, str | None, int]]:
    """(counter, side or bounded invariant id or None, amount) for every counter that `mutations`
    mutations of one decision add to, given their summed figures and all their findings (the guard
    records one mutation at a time, the monitor a group of spans with the same labels at once)."""
    yield semconv.MUTATIONS, None, mutations
    if decision == "defer":
        yield semconv.DEFERRALS, None, mutations
    if lost:
        yield semconv.LOST_LITERALS, None, lost
    for side, count in zip(semconv.ORPHAN_SIDES, (orphans_tool_use, orphans_tool_result), strict=True):
        if count:
            yield semconv.ORPHANED_TOOL_PARTS, side, count
    for invariant in violations:
        yield semconv.INVARIANT_VIOLATIONS, semconv.bounded_invariant(invariant), 1
    for invariant in warnings:
        yield semconv.INVARIANT_WARNINGS, semconv.bounded_invariant(invariant), 1


# one mutation's histogram figures: (pass number, hash distance d_t, literals lost or None when unknown
# (an opaque rewrite), literals before, the agent's tokens before it or None)
RewriteFigures = tuple[int | None, float | None, int | None, int, int | None]


def observations(kind: str, decision: str, figures: Iterable[RewriteFigures]
                 ) -> Iterator[tuple[semconv.MetricSpec, list[float]]]:
    """(histogram, values) for every rewrite histogram that mutations of one kind and decision are
    recorded on: applied rewrites only (`figures` is not read otherwise), r_t only with literals and a
    known loss (None: an opaque rewrite, whose loss is unknown), tokens before only when the agent
    recorded them."""
    if not semconv.is_applied_rewrite(kind, decision):
        return
    passes: list[float] = []
    distances: list[float] = []
    loss_rates: list[float] = []
    tokens: list[float] = []
    for pass_number, hash_distance, lost, literals_before, tokens_before in figures:
        if pass_number is not None:
            passes.append(pass_number)
        if hash_distance is not None:
            distances.append(hash_distance)
        if literals_before and lost is not None:
            loss_rates.append(lost / literals_before)
        if tokens_before is not None:
            tokens.append(tokens_before)
    for spec, values in ((semconv.PASS_NUMBER_HISTOGRAM, passes), (semconv.HASH_DISTANCE_HISTOGRAM, distances),
                         (semconv.LITERAL_LOSS_RATE, loss_rates), (semconv.TOKENS_BEFORE_HISTOGRAM, tokens)):
        if values:
            yield spec, values
