"""Measure a sequence of rewrite cycles the way the guard does, and run the detector over them.

For cycle t with pre-rewrite buffer P_t and post-rewrite buffer Q_t the figures are
d_t = distance(Q_{t-1}, Q_t) (for t = 1: P_1 and Q_1), |literals(P_t)| and
L_t = |literals(P_t) − literals(Q_t)|, exactly the inputs of `ContractionDetector.update`.
Fingerprints are updated incrementally from one buffer to the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..contraction import ContractionDetector, CycleVerdict, DetectorConfig
from ..fingerprint import BufferFingerprint, Fingerprinter, distance
from ..literals import LiteralRegistry
from ..model import Message


@dataclass(frozen=True)
class CycleFigures:
    """What one cycle feeds the detector, plus the lost literal values (never sent anywhere)."""

    d: float
    literals_before: int
    literals_lost: int
    lost: frozenset[str]


class CycleMeter:
    """Turns (P_t, Q_t) pairs into `CycleFigures`, keeping the last post-rewrite fingerprint."""

    def __init__(self, fingerprinter: Fingerprinter | None = None,
                 registry: LiteralRegistry | None = None) -> None:
        self.fingerprinter = fingerprinter or Fingerprinter()
        self.registry = registry or LiteralRegistry()
        self._last: BufferFingerprint | None = None

    def measure(self, pre: Sequence[Message], post: Sequence[Message]) -> CycleFigures:
        fpr = self.fingerprinter
        fp_pre = fpr.buffer(pre, base=self._last)
        fp_post = fpr.buffer(post, base=fp_pre)
        d = distance(self._last if self._last is not None else fp_pre, fp_post)
        before = self.registry.of_all(pre)
        lost = frozenset(before - self.registry.of_all(post))
        self._last = fp_post
        return CycleFigures(d, len(before), len(lost), lost)


def judge(pairs: Iterable[tuple[Sequence[Message], Sequence[Message]]],
          config: DetectorConfig | None = None) -> list[tuple[CycleFigures, CycleVerdict]]:
    """Measure every (P_t, Q_t) pair and feed a fresh detector; the figures and verdict per cycle."""
    meter, detector = CycleMeter(), ContractionDetector(config)
    out = []
    for pre, post in pairs:
        figures = meter.measure(pre, post)
        out.append((figures, detector.update(figures.d, figures.literals_before, figures.literals_lost)))
    return out
