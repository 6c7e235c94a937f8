"""Run the contraction detector over a simulated loop's cycles, measured as the guard measures them.

Each (P_t, Q_t) pair goes through `ctxwatch.cycles.CycleMeter.cycle` — the guard's measurement and its
rule of what is a cycle (`ctxwatch.cycles.no_cycle_reason`) — so a pair where Q_t only extends P_t (a
summarizer under its budget), an elision or an opaque compaction is no cycle, exactly as the guard does
not feed its detector with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ..contraction import ContractionDetector, CycleVerdict, DetectorConfig
from ..cycles import CycleFigures, CycleMeter
from ..model import Message


class Judged(NamedTuple):
    """One rewrite cycle: its 1-based position t among the pairs, its figures and the verdict
    (whose `cycle` counts rewrite cycles only)."""

    t: int
    figures: CycleFigures
    verdict: CycleVerdict


def judge(pairs: Iterable[tuple[Sequence[Message], Sequence[Message]]],
          config: DetectorConfig | None = None) -> list[Judged]:
    """Measure every rewrite cycle among the (P_t, Q_t) pairs and feed a fresh detector (pure appends,
    elisions and opaque compactions are skipped, as the guard skips them)."""
    meter, detector = CycleMeter(), ContractionDetector(config)
    out = []
    for t, (pre, post) in enumerate(pairs, 1):
        figures = meter.cycle(pre, post)
        if figures is not None:
            verdict = detector.update(figures.d, figures.literals_before, figures.literals_lost,
                                      sum(m.size for m in post))  # Q_t's size, as the guard's span carries it
            out.append(Judged(t, figures, verdict))
    return out


def entered_at(pairs: Iterable[tuple[Sequence[Message], Sequence[Message]]],
               config: DetectorConfig | None = None) -> int | None:
    """The position t of the pair at which the detector entered ``contracting`` (None: never)."""
    return next((j.t for j in judge(pairs, config) if j.verdict.entered), None)
