"""Run the contraction detector over a simulated loop's cycles, measured as the guard measures them.

Each (P_t, Q_t) pair goes through `ctxwatch.cycles.CycleMeter.cycle` — the guard's measurement —
so a pair where Q_t only extends P_t (a summarizer under its budget) is no cycle, exactly as the
guard does not feed its detector on an append.
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
    """Measure every rewrite among the (P_t, Q_t) pairs and feed a fresh detector (pure appends
    are skipped, as the guard skips them)."""
    meter, detector = CycleMeter(), ContractionDetector(config)
    out = []
    for t, (pre, post) in enumerate(pairs, 1):
        figures = meter.cycle(pre, post)
        if figures is not None:
            out.append(Judged(t, figures, detector.update(figures.d, figures.literals_before, figures.literals_lost)))
    return out


def entered_at(pairs: Iterable[tuple[Sequence[Message], Sequence[Message]]],
               config: DetectorConfig | None = None) -> int | None:
    """The position t of the pair at which the detector entered ``contracting`` (None: never)."""
    return next((j.t for j in judge(pairs, config) if j.verdict.entered), None)
