"""Record 003's re-application stability test of a rewrite function: rewrite(rewrite(B)) vs rewrite(B).

`check_idempotence(rewrite_fn, sample)` applies the function repeatedly to a sample buffer and
measures the drift between consecutive applications: fingerprint distance, literal-set
symmetric difference, length ratio, order changes among the messages that survive both, and
message counts. The first pair (once vs twice) decides stability against the tolerances; the
later pairs show whether repeated application converges to a fixed point or keeps moving.

The sample may be a list of `ctxwatch.Message` or any message list `ctxwatch.adapters` reads
(OpenAI, Anthropic, LangChain...). The rewrite function is called in the sample's own format and
each output is converted only to be measured, so a user's function runs exactly as in the loop.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .adapters import to_messages
from .errors import InvalidContextError, NonIdempotentRewriteError
from .fingerprint import Fingerprinter, distance
from .literals import LiteralRegistry
from .model import Message


@dataclass(frozen=True)
class Drift:
    """How far one application moved the buffer (from `a` to `b`)."""

    distance: float
    literals_before: int
    literals_lost: frozenset[str]
    literals_added: frozenset[str]
    length_ratio: float
    order_changes: int
    surviving: int
    messages: tuple[int, int]

    @property
    def literals_changed(self) -> int:
        """Size of the literal-set symmetric difference."""
        return len(self.literals_lost) + len(self.literals_added)

    @property
    def literal_drift(self) -> float:
        """The symmetric difference as a fraction of the literals before (record 003's measure)."""
        return self.literals_changed / max(self.literals_before, 1)

    def describe(self) -> str:
        return (f"distance {self.distance:.3f}, literal drift {self.literal_drift:.1%} "
                f"({len(self.literals_lost)} lost, {len(self.literals_added)} added "
                f"of {self.literals_before}), "
                f"length ratio {self.length_ratio:.3f}, {self.order_changes} of {self.surviving} surviving "
                f"messages out of order, messages {self.messages[0]} -> {self.messages[1]}")


@dataclass(frozen=True)
class IdempotenceResult:
    """The drift of rewrite(rewrite(B)) from rewrite(B), and of each later re-application."""

    tolerance: float
    literal_tolerance: float
    check_order: bool
    rounds: tuple[Drift, ...]

    @property
    def drift(self) -> Drift:
        """rewrite(B) -> rewrite(rewrite(B))."""
        return self.rounds[0]

    def within(self, drift: Drift) -> bool:
        return (drift.distance <= self.tolerance and drift.literal_drift <= self.literal_tolerance
                and not (self.check_order and drift.order_changes))

    @property
    def stable(self) -> bool:
        """Whether rewrite(rewrite(B)) matches rewrite(B) within the tolerances."""
        return self.within(self.drift)

    @property
    def trend(self) -> str:
        """``idempotent``, ``converges after N`` (rewrite^N is a fixed point within tolerance),
        ``converging`` (distances shrink but stay over tolerance) or ``not converging``."""
        if self.stable:
            return "idempotent"
        for n, drift in enumerate(self.rounds[1:], start=2):
            if self.within(drift):
                return f"converges after {n}"
        distances = [r.distance for r in self.rounds]
        if len(distances) > 1 and all(b < a for a, b in zip(distances, distances[1:], strict=False)):
            return "converging"
        return "not converging"

    def explain(self) -> str:
        head = (f"rewrite is {'stable' if self.stable else 'NOT idempotent'} (tolerance: distance "
                f"{self.tolerance}, literal drift {self.literal_tolerance:.1%}); {self.trend}")
        lines = [head] + [f"  rewrite^{n} -> rewrite^{n + 1}: {d.describe()}"
                          for n, d in enumerate(self.rounds, 1)]
        return "\n".join(lines)

    def raise_if_unstable(self) -> None:
        """Raise `NonIdempotentRewriteError` with the drift figures when not stable."""
        if not self.stable:
            raise NonIdempotentRewriteError(
                f"non-idempotent rewrite: rewrite(rewrite(B)) differs from rewrite(B) beyond tolerance — "
                f"{self.drift.describe()}; {self.trend}. Do not run this rewrite in a loop: hold its "
                "directive out of band, preserve literals verbatim, and rank against a stable index.")


def check_idempotence(rewrite_fn: Callable[[Any], Any], sample: Any, tolerance: float = 0.05, *,
                      literal_tolerance: float = 0.0, rounds: int = 3, check_order: bool = True,
                      format: str | None = None, registry: LiteralRegistry | None = None,
                      fingerprinter: Fingerprinter | None = None) -> IdempotenceResult:
    """Apply `rewrite_fn` ``rounds + 1`` times to `sample` and measure each re-application.

    tolerance: largest fingerprint distance between rewrite(B) and rewrite(rewrite(B)) still
    counted as stable; literal_tolerance: largest literal drift; check_order: whether any
    reordering of surviving messages counts as unstable.
    """
    if not 0.0 <= tolerance <= 1.0 or literal_tolerance < 0.0:
        raise ValueError(f"tolerances must be in [0, 1] and >= 0, got {tolerance} and {literal_tolerance}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    registry = registry or LiteralRegistry()
    fpr = fingerprinter or Fingerprinter()
    current = sample
    outputs: list[list[Message]] = []
    for n in range(1, rounds + 2):
        try:
            current = rewrite_fn(current)
        except Exception as exc:
            raise RuntimeError(f"the rewrite function raised on application {n}: {exc!r}") from exc
        try:
            outputs.append(to_messages(current, format))
        except InvalidContextError as exc:
            raise InvalidContextError(f"output of application {n} of the rewrite function: {exc}") from None
    drifts = tuple(measure_drift(a, b, registry, fpr) for a, b in zip(outputs, outputs[1:], strict=False))
    return IdempotenceResult(tolerance, literal_tolerance, check_order, drifts)


def measure_drift(a: Sequence[Message], b: Sequence[Message], registry: LiteralRegistry,
                  fingerprinter: Fingerprinter) -> Drift:
    """The drift figures from buffer `a` to buffer `b`."""
    lits_a, lits_b = registry.of_all(a), registry.of_all(b)
    size_a, size_b = sum(m.size for m in a), sum(m.size for m in b)
    moved, surviving = order_changes(a, b)
    return Drift(distance(fingerprinter.buffer(a), fingerprinter.buffer(b)), len(lits_a),
                 frozenset(lits_a - lits_b), frozenset(lits_b - lits_a),
                 size_b / size_a if size_a else (1.0 if not size_b else float("inf")),
                 moved, surviving, (len(a), len(b)))


def order_changes(a: Sequence[Message], b: Sequence[Message]) -> tuple[int, int]:
    """(messages out of relative order, messages surviving) between `a` and `b`.

    A message survives when identical content is in both (the k-th copy matches the k-th copy);
    the count out of order is the fewest surviving messages that must move to restore `a`'s
    relative order (survivors minus the longest increasing run of their positions in `b`).
    """
    where: dict[tuple[int, int], int] = {}
    seen: dict[int, int] = {}
    for pos, m in enumerate(b):
        k = seen.get(m.digest, 0)
        seen[m.digest] = k + 1
        where[(m.digest, k)] = pos
    seen.clear()
    positions = []
    for m in a:
        k = seen.get(m.digest, 0)
        seen[m.digest] = k + 1
        if (m.digest, k) in where:
            positions.append(where[(m.digest, k)])
    tails: list[int] = []
    for p in positions:
        i = bisect_left(tails, p)
        if i == len(tails):
            tails.append(p)
        else:
            tails[i] = p
    return len(positions) - len(tails), len(positions)
