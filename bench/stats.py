"""Shared timing helpers for the benchmarks: repeat a callable, report min/median/max."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    label: str
    samples: list[float]  # seconds

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def row(self, unit: str = "ms", baseline: Timing | None = None) -> str:
        scale = {"ms": 1e3, "us": 1e6, "s": 1.0}[unit]
        lo, med, hi = min(self.samples) * scale, self.median * scale, max(self.samples) * scale
        ratio = f"  {self.median / baseline.median:6.2f}x {baseline.label}" if baseline else ""
        return f"{self.label:<48} min {lo:9.3f}  median {med:9.3f}  max {hi:9.3f} {unit}{ratio}"


def measure(label: str, fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> Timing:
    """Time `fn` `repeat` times (running `setup` untimed before each, when given)."""
    samples = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return Timing(label, samples)
