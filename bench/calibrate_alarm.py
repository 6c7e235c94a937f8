"""Calibration of the contraction alarm (ctxwatch.contraction) — the evidence tables in docs/alarm.md.

Every figure is measured by `ctxwatch.cycles`, the measurement the guard itself runs (pure appends
are no cycle; r_t counts downstream literals), so the tables describe what a user's guard computes.

1. Onset delay over seeded contracting loops of two families (ctxwatch.simulate.loops:
   instruction absorption, and a summary-of-summary chain converging on a fixed text). Delay =
   the loop cycle at which the detector entered ``contracting`` − the family's onset.
2. False alarms over seeded healthy loops: appending, sliding window, literal-preserving
   summarization, full-replacement compaction of a growing history (the shape of Claude Code and
   Codex), summary-of-summary chains keeping their literals, and a naive sliding summarizer
   folding the oldest 60% without its literals every few cycles; plus, for information,
   sentinel-drift and re-ranking loops.
3. Every real session in the corpus, audited as `ctxwatch replay` does (every recorded mutation is
   one rewrite cycle): per cycle d, r, the three conditions and the margin to the evidence
   condition; the verdict with its reason; and the verdict when the session is extended by
   repeating its last cycle five more times.
4. A sweep of `converge_max`, the threshold that trades early detection of slowly compounding
   loops against false alarms on full-replacement compaction.
5. The targets of issue 14, each with PASS or FAIL.

Each loop is measured once (`ctxwatch.cycles.CycleMeter.cycle`, the guard's measurement); every
configuration's detector is then fed the same figures.

    .venv/bin/python bench/calibrate_alarm.py [--loops 120] [--healthy 60] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ctxwatch.contraction import ContractionDetector, CycleVerdict, DetectorConfig
from ctxwatch.cycles import CycleMeter
from ctxwatch.replay import audit_session
from ctxwatch.simulate.loops import (
    CONTRACTING_FAMILIES,
    HEALTHY_FAMILIES,
    SyntheticLoop,
    paraphrasing_loop,
    reranking_loop,
)

# as tests/conftest.py finds it: CTXWATCH_CORPUS, ../shared/corpus beside the checkout, the workplace's
DEFAULT_CORPUS = next((Path(p) for p in (os.environ.get("CTXWATCH_CORPUS"),
                                         Path(__file__).resolve().parents[2] / "shared" / "corpus",
                                         "/work/shared/corpus") if p and Path(p).is_dir()), Path("shared/corpus"))
STRICT = "no rise (rise_max=0)"
CONFIGS = {"default": DetectorConfig(), STRICT: DetectorConfig(rise_max=0.0)}
EXTENSION = 5
MARGIN_TARGET = 0.1


@dataclass
class Targets:
    """The targets of issue 14 and whether each was met."""

    lines: list[tuple[str, bool]] = field(default_factory=list)

    def check(self, label: str, met: bool) -> None:
        self.lines.append((label, met))


@dataclass(frozen=True)
class Measured:
    """A synthetic loop's rewrite cycles as the guard measures them: (t, d, literals before, lost)."""

    loop: SyntheticLoop
    cycles: tuple[tuple[int, float, int, int], ...]

    @classmethod
    def of(cls, loop: SyntheticLoop) -> Measured:
        meter, out = CycleMeter(), []
        for c in loop.cycles:
            figures = meter.cycle(c.pre, c.post)
            if figures is not None:
                out.append((c.t, figures.d, figures.literals_before, figures.literals_lost))
        return cls(loop, tuple(out))

    def verdicts(self, config: DetectorConfig) -> list[tuple[int, CycleVerdict]]:
        detector = ContractionDetector(config)
        return [(t, detector.update(d, before, lost)) for t, d, before, lost in self.cycles]

    def entered_at(self, config: DetectorConfig) -> int | None:
        """The loop cycle at which the detector entered ``contracting`` (None: never)."""
        return next((t for t, v in self.verdicts(config) if v.entered), None)

    def delay(self, config: DetectorConfig) -> int | None:
        entered = self.entered_at(config)
        return None if entered is None or self.loop.onset is None else entered - self.loop.onset


def contracting_loops(n: int) -> dict[str, list[Measured]]:
    return {family: [Measured.of(make(seed)) for seed in range(n)] for family, make in CONTRACTING_FAMILIES.items()}


def healthy_loops(n: int) -> dict[str, list[Measured]]:
    return {family: [Measured.of(make(1000 + seed)) for seed in range(n)] for family, make in HEALTHY_FAMILIES.items()}


def onset_table(contracting: dict[str, list[Measured]], targets: Targets) -> None:
    n = len(next(iter(contracting.values())))
    print(f"\n## 1. Onset delay: {n} contracting loops per family (seeds 0-{n - 1})")
    print("| family | setting | within 2 cycles | delay 0 / 1 / 2 / 3 / 4+ | early (before onset) | missed "
          "| d, onset to onset+2 (p10 / p50 / p90) | r, same |")
    print("|---|---|---|---|---|---|---|---|")
    for family, loops in contracting.items():
        near = [(d, lost / before if before else 0.0) for lp in loops for t, d, before, lost in lp.cycles
                if lp.loop.onset is not None and lp.loop.onset <= t <= lp.loop.onset + 2]
        spread = f"{_deciles([d for d, _ in near])} | {_deciles([r for _, r in near])}"
        for name, config in CONFIGS.items():
            delays = [lp.delay(config) for lp in loops]
            hist = Counter(min(d, 4) for d in delays if d is not None and d >= 0)
            within = sum(d is not None and 0 <= d <= 2 for d in delays)
            early = sum(1 for d in delays if d is not None and d < 0)
            print(f"| {family} | {name} | {within}/{n} ({within / n:.1%}) | "
                  f"{' / '.join(str(hist.get(k, 0)) for k in range(5))} | {early} | {delays.count(None)} | "
                  f"{spread} |")
            if name == "default":
                targets.check(f"{family}: onset within 2 cycles in >= 95% ({within}/{n})", within >= 0.95 * n)
                targets.check(f"{family}: no alarm before the onset ({early})", early == 0)


def false_alarm_table(healthy: dict[str, list[Measured]], targets: Targets) -> None:
    n = len(next(iter(healthy.values())))
    informational: dict[str, Callable[[int], SyntheticLoop]] = {
        "sentinel drift (paraphrasing, rate 0.3)": paraphrasing_loop, "ordering inversion (re-ranking)": reranking_loop}
    measured = {**healthy, **{label: [Measured.of(make(1000 + seed)) for seed in range(20)]
                              for label, make in informational.items()}}
    print(f"\n## 2. False alarms: healthy loops ({n} per family, seeds 1000-{999 + n})")
    print("| family | rewrite cycles | " + " | ".join(f"alarms, {name}" for name in CONFIGS)
          + " | evidence cycles | median d | median r | smallest margin |")
    print("|---|---|" + "---|" * (len(CONFIGS) + 4))
    for label, loops in measured.items():
        count = len(loops)
        alarms = [sum(lp.entered_at(cfg) is not None for lp in loops) for cfg in CONFIGS.values()]
        verdicts = [v for lp in loops for _, v in lp.verdicts(CONFIGS["default"])]
        margins = [v.margin for v in verdicts if v.margin is not None]
        note = "" if label in healthy else " (not healthy; shown for information)"
        print(f"| {label}{note} | {len(verdicts)} | " + " | ".join(f"{a}/{count}" for a in alarms)
              + f" | {sum(v.evidence for v in verdicts)} | {_median([v.d for v in verdicts])} | "
              f"{_median([v.r for v in verdicts])} | {_margin(min(margins, default=None))} |")
        if label in healthy:
            targets.check(f"{label}: no false alarm ({alarms[0]}/{count})", alarms[0] == 0)


def _deciles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=10)
    return f"{q[0]:.2f} / {q[4]:.2f} / {q[8]:.2f}"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "—"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _margin(margin: float | None) -> str:
    return "— (nothing lost)" if margin is None else f"{margin:+.3f}"


def _cycle_margin(v: CycleVerdict) -> str:
    if v.first and v.losing:
        return f"— (first cycle; {v.d - v.threshold:+.3f} with a history)"
    return _margin(v.margin)


def extended(verdicts: list[CycleVerdict], config: DetectorConfig) -> list[CycleVerdict]:
    """The session's cycles fed again, then its last cycle repeated `EXTENSION` more times."""
    detector = ContractionDetector(config)
    figures = [(v.d, v.literals_before, v.literals_lost) for v in verdicts]
    return [detector.update(*f) for f in figures + [figures[-1]] * EXTENSION][len(figures):]


def corpus_table(corpus: Path, targets: Targets) -> None:
    print(f"\n## 3. Real sessions ({corpus.name}/, every file)")
    config = CONFIGS["default"]
    summary: list[str] = []
    real_margins: list[float] = []
    first_margins: list[float] = []  # first cycles, as if they had a history (for information)
    for path in sorted(p for p in corpus.iterdir() if p.suffix != ".md"):
        audit = audit_session(path, config=config)
        if not audit.readable:
            print(f"\n### {path.name}\n\nnot read: {audit.error}")
            summary.append(f"| {path.name} | — | not read by the session readers | — | — |")
            continue
        verdicts = [m.verdict for m in audit.mutations]
        print(f"\n### {path.name} ({audit.format}, {len(verdicts)} rewrite cycle(s))")
        if verdicts:
            print("\n| cycle | mutation | messages | d | literals before | lost | r | converging | losing | d<r "
                  "| margin | state |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for m in audit.mutations:
            v = m.verdict
            where = f"line {m.line}" if m.line is not None else f"step {m.step}"
            print(f"| {v.cycle} | {m.kind} ({m.source}, {where}) | {m.messages.before} -> {m.messages.after} | "
                  f"{v.d:.3f} | {v.literals_before} | {v.literals_lost} | {v.r:.3f} | {_yes(v.shrinking)} | "
                  f"{_yes(v.losing)} | {_yes(v.below)} | {_cycle_margin(v)} | {v.state} |")
        margins = [v.margin for v in verdicts if v.margin is not None]
        real_margins.extend(margins)
        first_margins.extend(v.d - v.threshold for v in verdicts if v.first and v.losing)
        ext = extended(verdicts, config) if verdicts else []
        ext_state = "contracting" if any(v.state == "contracting" for v in ext) else "healthy"
        print(f"\nverdict: {audit.explain()}")
        if ext:
            print(f"extended by its last cycle x{EXTENSION}: {ext_state} "
                  f"({sum(v.evidence for v in ext)} evidence cycle(s), margin {_margin(ext[-1].margin)})")
        summary.append(f"| {path.name} | {len(verdicts)} | {audit.explain()} | "
                       f"{_margin(min(margins, default=None))} | {ext_state if ext else '—'} |")
        targets.check(f"{path.name}: no evidence cycle", not any(v.evidence for v in verdicts))
        if ext:
            targets.check(f"{path.name}: extended x{EXTENSION} stays healthy", ext_state == "healthy")
    print("\n### Summary: one row per corpus file\n")
    print("| file | cycles | verdict (reason) | smallest margin | extended x5 |")
    print("|---|---|---|---|---|")
    print("\n".join(summary))
    smallest = min(real_margins, default=None)
    targets.check(f"corpus: smallest margin to the evidence condition >= {MARGIN_TARGET} ({_margin(smallest)}; "
                  f"first cycles, which cannot be evidence, would have {_margin(min(first_margins, default=None))} "
                  "with a history)", smallest is None or smallest >= MARGIN_TARGET)


SWEEP = (0.55, 0.6, 0.62, 0.65, 0.7)


def sweep_table(contracting: dict[str, list[Measured]], healthy: dict[str, list[Measured]]) -> None:
    print("\n## 4. Sweep of converge_max (other fields at their defaults)")
    print("| converge_max | " + " | ".join(f"{family}: within 2 cycles" for family in contracting)
          + " | " + " | ".join(f"{family}: alarms" for family in healthy) + " |")
    print("|---|" + "---|" * (len(contracting) + len(healthy)))
    for value in SWEEP:
        config = DetectorConfig(converge_max=value)
        within = [sum(d is not None and 0 <= d <= 2 for d in (lp.delay(config) for lp in loops))
                  for loops in contracting.values()]
        alarms = [sum(lp.entered_at(config) is not None for lp in loops) for loops in healthy.values()]
        n_c, n_h = len(next(iter(contracting.values()))), len(next(iter(healthy.values())))
        print(f"| {value} | " + " | ".join(f"{w}/{n_c}" for w in within) + " | "
              + " | ".join(f"{a}/{n_h}" for a in alarms) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=120, help="contracting loops per family")
    parser.add_argument("--healthy", type=int, default=60, help="healthy loops per family")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    cfg = DetectorConfig()
    print(f"# contraction alarm calibration — DetectorConfig defaults: enter_cycles={cfg.enter_cycles}, "
          f"exit_cycles={cfg.exit_cycles}, window={cfg.window}, converge_max={cfg.converge_max}, "
          f"rise_max={cfg.rise_max}, min_literals={cfg.min_literals}, min_lost={cfg.min_lost}, "
          f"exit_margin={cfg.exit_margin}")
    targets = Targets()
    contracting, healthy = contracting_loops(args.loops), healthy_loops(args.healthy)
    onset_table(contracting, targets)
    false_alarm_table(healthy, targets)
    corpus_table(args.corpus, targets)
    sweep_table(contracting, healthy)
    print("\n## 5. Targets\n")
    for label, met in targets.lines:
        print(f"- {'PASS' if met else 'FAIL'}: {label}")
    print(f"\n{sum(met for _, met in targets.lines)}/{len(targets.lines)} targets met")


if __name__ == "__main__":
    main()
