"""Calibration of the contraction alarm (ctxwatch.contraction) — the evidence tables in docs/alarm.md.

Every figure is measured by `ctxwatch.cycles`, the measurement the guard itself runs (pure appends
are no cycle; r_t counts downstream literals), so the tables describe what a user's guard computes.

1. Onset delay over seeded contracting loops of two families (ctxwatch.simulate.loops:
   instruction absorption, and a summary-of-summary chain converging on a fixed text). Delay =
   the loop cycle at which the detector entered ``contracting`` − the family's onset.
2. False alarms over seeded healthy loops: appending, sliding window, literal-preserving
   summarization, full-replacement compaction of a growing history (the shape of Claude Code and
   Codex), summary-of-summary chains keeping their literals, and a naive sliding summarizer
   folding the oldest 60% without its literals every few cycles, and docs/guard.md's own loops run long
   in one conversation with 1-3 tool calls a step (ctxwatch.simulate.docsloop), also with tools whose
   results do not echo their input (1-4 calls a step; review F2); plus, for information,
   sentinel-drift and re-ranking loops. 2b: every healthy family run long; 2c: the quiet-tool docs loops on
   held-out seeds (HELD_OUT_HEALTHY), also fed without a count's chance spread.
3. Every real session in the corpus, audited as `ctxwatch replay` does, so with the guard's rule of
   what is a cycle (`ctxwatch.cycles.no_cycle_reason`: a microcompaction, a rewind, Codex's opaque
   remote compaction are none, listed without figures of the alarm): per cycle d, r, the three
   conditions and the margin to the evidence condition; the verdict with its reason; and the verdict
   when the session is extended by repeating its last cycle five more times.
4. Sweeps of `converge_max`, `fall_ratio`, `contract_ratio`, `carried_min`, `step_ratio`, `contract_noise`,
   `confirm_noise` and `shrink_min`, one at a time: onsets caught, false alarms, and the real sessions' evidence cycles
   and smallest margin.
5. The targets of issue 14, each MET or MISS.

Each loop is measured once (`ctxwatch.cycles.CycleMeter.cycle`, the guard's measurement); every
configuration's detector is then fed the same figures.

    .venv/bin/python bench/calibrate_alarm.py [--loops 120] [--healthy 60] [--long-loops 10] [--corpus DIR]
        [--first-seed 0] [--held-out 9000,13000,...] [--held-out-healthy 51000,...] [--long-runs 2]
        [--long-cycles 2000] [--cache FILE]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ctxwatch.contraction import ContractionDetector, CycleVerdict, DetectorConfig
from ctxwatch.cycles import CycleMeter
from ctxwatch.replay import audit_session
from ctxwatch.simulate.docsloop import DOCS_LOOP_FAMILIES
from ctxwatch.simulate.loops import (
    CONTRACTING_FAMILIES,
    HEALTHY_FAMILIES,
    SyntheticLoop,
    paraphrasing_loop,
    reranking_loop,
)
from ctxwatch.simulate.toolloop import TOOL_LOOP_FAMILIES

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
    """A synthetic loop's rewrite cycles as the guard measures them: (t, d, literals before, lost,
    size of Q_t), the size as the guard's span carries it (`ctxwatch.size.after`); its seed and onset."""

    seed: int
    onset: int | None
    cycles: tuple[tuple[int, float, int, int, int], ...]

    @classmethod
    def of(cls, loop: SyntheticLoop) -> Measured:
        meter, out = CycleMeter(), []
        for c in loop.cycles:
            figures = meter.cycle(c.pre, c.post)
            if figures is not None:
                out.append((c.t, figures.d, figures.literals_before, figures.literals_lost,
                            sum(m.size for m in c.post)))
        return cls(loop.seed, loop.onset, tuple(out))

    def verdicts(self, config: DetectorConfig) -> list[tuple[int, CycleVerdict]]:
        detector = ContractionDetector(config)
        return [(t, detector.update(d, before, lost, size)) for t, d, before, lost, size in self.cycles]

    def entered_at(self, config: DetectorConfig) -> int | None:
        """The loop cycle at which the detector entered ``contracting`` (None: never)."""
        return next((t for t, v in self.verdicts(config) if v.entered), None)

    def delay(self, config: DetectorConfig) -> int | None:
        entered = self.entered_at(config)
        return None if entered is None or self.onset is None else entered - self.onset


# every loop measured once: (family, seed, its length when not the family's own) -> (onset, cycles); `--cache FILE`
# keeps them across runs (a loop's figures depend on its family, seed and length only: the simulations are seeded)
MEASURED: dict[tuple[str, int, int | None], tuple[int | None, tuple[tuple[int, float, int, int, int], ...]]] = {}


def measured(family: str, seed: int, make: Callable[[int], SyntheticLoop], length: int | None = None) -> Measured:
    key = (family, seed, length)
    if key not in MEASURED:
        loop = Measured.of(make(seed))
        MEASURED[key] = (loop.onset, loop.cycles)
    onset, cycles = MEASURED[key]
    return Measured(seed, onset, cycles)


def contracting_loops(n: int, first: int = 0) -> dict[str, list[Measured]]:
    return {family: [measured(family, seed, make) for seed in range(first, first + n)]
            for family, make in CONTRACTING_FAMILIES.items()}


def healthy_loops(n: int, first: int = 1000, long_loops: int = 10) -> dict[str, list[Measured]]:
    """`n` loops of each healthy family, and `long_loops` of each of docs/guard.md's long loops (150
    compactions each, one conversation; the review's D1 shape)."""
    families = {**HEALTHY_FAMILIES, **TOOL_LOOP_FAMILIES}
    loops = {family: [measured(family, seed, make) for seed in range(first, first + n)]
             for family, make in families.items()}
    return loops | {family: [measured(family, seed, make) for seed in range(first, first + long_loops)]
                    for family, make in DOCS_LOOP_FAMILIES.items()}


# families whose buffer keeps every literal grow with the run (their cycles lose nothing, and measuring them costs
# the square of their length): they run a fifth as long
GROWING = frozenset({"summarizing", "chain"})


def long_families(cycles: int) -> dict[str, Callable[[int], SyntheticLoop]]:
    """Every healthy family run for `cycles` rewrite cycles (compactions, folds) in one loop: a healthy agent
    runs for days, and a per-cycle false-alarm rate of 1e-4 halts it. Appending has no cycle to run."""
    simple = {family: partial(make, cycles=cycles // 5 if family in GROWING else cycles)
              for family, make in HEALTHY_FAMILIES.items() if family != "appending"}
    return (simple | {family: partial(make, folds=cycles) for family, make in TOOL_LOOP_FAMILIES.items()}
            | {family: partial(make, compactions=cycles) for family, make in DOCS_LOOP_FAMILIES.items()})


def long_loops(n: int, first: int, cycles: int) -> dict[str, list[Measured]]:
    return {family: [measured(family, seed, make, cycles) for seed in range(first, first + n)]
            for family, make in long_families(cycles).items()}


def onset_table(contracting: dict[str, list[Measured]], targets: Targets) -> None:
    n = len(next(iter(contracting.values())))
    print(f"\n## 1. Onset delay: {n} contracting loops per family (seeds {_seeds(contracting)})")
    print("| family | setting | within 2 cycles | delay 0 / 1 / 2 / 3 / 4+ | early (before onset) | missed "
          "| d, onset to onset+2 (p10 / p50 / p90) | r, same |")
    print("|---|---|---|---|---|---|---|---|")
    for family, loops in contracting.items():
        near = [(d, lost / before if before else 0.0) for lp in loops for t, d, before, lost, _ in lp.cycles
                if lp.onset is not None and lp.onset <= t <= lp.onset + 2]
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


# contracting seeds besides the design sets (0-119, 5000-5199): 9000-60000 were looked at while `carried_min` and
# `fall_ratio` were chosen, 70000-90000 only after (docs/alarm.md, "The step's own spread"); 9000-90000 were looked at
# while `confirm_noise` was chosen, 100000-120000 only after (docs/alarm.md, "A dip is not a step")
HELD_OUT = (9000, 13000, 21000, 30000, 40000, 50000, 60000, 70000, 80000, 90000, 100000, 110000, 120000)
# healthy seeds of the quiet-tool docs loops besides the design set (1000-): 51000 alarmed 2 of them before the entry
# run had to compound (and 41000 was looked at too); 52000-54000 were fixed before they were measured
HELD_OUT_HEALTHY = (51000, 52000, 53000, 54000)
QUIET_DOCS_FAMILIES = {family: make for family, make in DOCS_LOOP_FAMILIES.items() if "quiet tools" in family}


def _onset_counts(loops: list[Measured]) -> tuple[int, int, int, list[int]]:
    """Within 2 cycles, early, missed, and the seeds caught later than 2 cycles after their onset."""
    delays = [(lp.seed, lp.delay(CONFIGS["default"])) for lp in loops]
    late = [seed for seed, d in delays if d is not None and d > 2]
    return (sum(d is not None and 0 <= d <= 2 for _, d in delays), sum(d is not None and d < 0 for _, d in delays),
            sum(d is None for _, d in delays), late)


def held_out_table(ranges: tuple[int, ...], n: int, targets: Targets) -> None:
    """Onset on contracting seeds the defaults were not chosen on, `n` loops per family from each first seed."""
    print(f"\n## 1c. Onset out of sample: {n} contracting loops per family from each first seed (defaults)")
    print("| seeds | family | within 2 cycles | late (seeds) | early (before onset) | missed |")
    print("|---|---|---|---|---|---|")
    for first in ranges:
        for family, loops in contracting_loops(n, first).items():
            within, early, missed, late = _onset_counts(loops)
            print(f"| {first}-{first + n - 1} | {family} | {within}/{n} ({within / n:.1%}) | "
                  f"{', '.join(map(str, late)) or '—'} | {early} | {missed} |")
            targets.check(f"{family}, seeds {first}-{first + n - 1}: onset within 2 cycles in >= 95% ({within}/{n}), "
                          f"none before it ({early})", within >= 0.95 * n and early == 0)


# a detector without a count's chance spread, whose entry runs need not compound, enters the quiet-tool loops falsely
# (review F2): what leaving looks like
FORCED = DetectorConfig(contract_noise=0.0, step_noise=0.0, confirm_noise=0.0)
# no count's chance spread, the entry run compounding as by default: how much room the compounding alone leaves
SPREAD_OFF = DetectorConfig(contract_noise=0.0, step_noise=0.0)
REGIME_CYCLES = 40  # contracting loops run this long to show that a loop converging on a fixed point never leaves
RECOVERY_ROOM = 50  # a false entry with this many cycles after it must have left the regime by then


def leaving_table(n: int, first: int, healthy: dict[str, list[Measured]], targets: Targets) -> None:
    """Contracting loops run `REGIME_CYCLES` cycles (none may leave once entered), and the docs loops fed to a
    detector that enters them falsely (`FORCED`: every false entry must leave)."""
    print(f"\n## 1d. Leaving the regime: {n} contracting loops per family run {REGIME_CYCLES} cycles (defaults); "
          f"docs/guard.md's long loops with no chance spread and no compounding (contract_noise=0, step_noise=0, "
          f"confirm_noise=0: false entries)")
    print("| loops | entered | left | still in the regime at the end | cycles in the regime before leaving "
          "(min / median / max) |")
    print("|---|---|---|---|---|")
    for family, make in CONTRACTING_FAMILIES.items():
        runs = [[v for _, v in measured(family, seed, partial(make, cycles=REGIME_CYCLES), REGIME_CYCLES)
                 .verdicts(CONFIGS["default"])]
                for seed in range(first, first + n)]
        entered, left = sum(any(v.entered for v in r) for r in runs), sum(any(v.left for v in r) for r in runs)
        print(f"| {family} (contracting, {REGIME_CYCLES} cycles) | {entered}/{n} | {left} | "
              f"{sum(r[-1].state == 'contracting' for r in runs)} | — |")
        targets.check(f"{family}, {REGIME_CYCLES} cycles: no loop leaves the regime while it converges ({left})",
                      left == 0)
    for family in DOCS_LOOP_FAMILIES:
        entries = left = still = stuck = 0
        spans: list[int] = []
        for lp in healthy[family]:
            start = None
            verdicts = [v for _, v in lp.verdicts(FORCED)]
            for v in verdicts:
                if v.entered:
                    entries, start = entries + 1, v.cycle
                elif v.left and start is not None:
                    spans.append(v.cycle - start)
                    left, start = left + 1, None
            if start is not None:
                still += 1
                stuck += len(verdicts) - start >= RECOVERY_ROOM
        spread = f"{min(spans)} / {statistics.median(spans):g} / {max(spans)}" if spans else "—"
        print(f"| {family} (healthy, forced) | {entries} | {left} | {still} | {spread} |")
        if entries:
            targets.check(f"{family}: every false entry with {RECOVERY_ROOM} cycles after it leaves the regime "
                          f"({stuck} did not)", stuck == 0 and all(x < RECOVERY_ROOM for x in spans))


# the definition without one of its parts: d judged as measured (before `net_distance`), and no contracting step
COMPARED = {"default": DetectorConfig(), "shrink_min=1": DetectorConfig(shrink_min=1.0),
            "step_ratio=0": DetectorConfig(step_ratio=0.0)}


def late_loops_table(contracting: dict[str, list[Measured]]) -> None:
    """Every contracting loop caught later than 2 cycles after its onset, by the defaults, with d judged
    as measured (shrink_min=1) or without the contracting step (step_ratio=0): its cycles' figures (K the
    downstream literals kept, c the share of the cycle's input literals the previous cycle kept) and which
    cycles were evidence under each."""
    names = " / ".join(COMPARED)
    print("\n## 1b. Late loops, onset - 1 to onset + 3 (late: entered more than 2 cycles after the onset, or never)")
    print(f"| family | seed | onset | delay ({names}) | t | d | net d | r | lost/before | K | c | \\|Q_t\\| "
          f"| evidence ({names}) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for family, loops in contracting.items():
        for lp in loops:
            delays = [lp.delay(config) for config in COMPARED.values()]
            if all(d is not None and d <= 2 for d in delays):
                continue
            shown = " / ".join("never" if d is None else str(d) for d in delays)
            carried = None  # K of the previous cycle
            for row in zip(*(lp.verdicts(config) for config in COMPARED.values()), strict=True):
                t, v = row[0]
                kept = v.literals_before - v.literals_lost
                share = "—" if carried is None or not v.literals_before else f"{carried / v.literals_before:.2f}"
                carried = kept
                if not lp.onset - 1 <= t <= lp.onset + 3:
                    continue
                evidence = " / ".join(_yes(x.evidence) for _, x in row)
                print(f"| {family} | {lp.seed} | {lp.onset} | {shown} | {t} | {v.d:.3f} | {v.d_net:.3f} | "
                      f"{v.r:.3f} | {v.literals_lost}/{v.literals_before} | {kept} | {share} | {v.size_after} | "
                      f"{evidence} |")


def false_alarm_table(healthy: dict[str, list[Measured]], targets: Targets) -> None:
    n = len(next(iter(healthy.values())))
    long_loops = len(healthy[next(iter(DOCS_LOOP_FAMILIES))])
    informational: dict[str, Callable[[int], SyntheticLoop]] = {
        "sentinel drift (paraphrasing, rate 0.3)": paraphrasing_loop, "ordering inversion (re-ranking)": reranking_loop}
    shown = {**healthy, **{label: [measured(label, 1000 + seed, make) for seed in range(20)]
                           for label, make in informational.items()}}
    print(f"\n## 2. False alarms: healthy loops ({n} per family, seeds {_seeds(healthy)}; docs/guard.md's long "
          f"loops: {long_loops} per family, 150 compactions each; sentinel drift and re-ranking: 20, seeds 1000-1019)")
    print("| family | rewrite cycles | " + " | ".join(f"alarms, {name}" for name in CONFIGS)
          + " | evidence cycles | median d | median r | smallest margin |")
    print("|---|---|" + "---|" * (len(CONFIGS) + 4))
    for label, loops in shown.items():
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


def held_out_healthy_table(ranges: tuple[int, ...], n: int, targets: Targets) -> None:
    """The quiet-tool docs loops (review F2's shape, the one that alarmed out of sample) on seeds the defaults were not
    chosen on, `n` loops per family from each first seed; also fed without a count's chance spread (`SPREAD_OFF`)."""
    print(f"\n## 2c. Healthy out of sample: docs/guard.md's loops with quiet tools, {n} loops per family from each "
          f"first seed (150 compactions each)")
    print("| seeds | family | rewrite cycles | alarms | evidence cycles | smallest margin "
          "| alarms without a chance spread (contract_noise=0, step_noise=0) |")
    print("|---|---|---|---|---|---|---|")
    for first in ranges:
        for family, make in QUIET_DOCS_FAMILIES.items():
            loops = [measured(family, seed, make) for seed in range(first, first + n)]
            verdicts = [v for lp in loops for _, v in lp.verdicts(CONFIGS["default"])]
            alarms = sum(lp.entered_at(CONFIGS["default"]) is not None for lp in loops)
            spread_off = sum(lp.entered_at(SPREAD_OFF) is not None for lp in loops)
            margins = [v.margin for v in verdicts if v.margin is not None]
            print(f"| {first}-{first + n - 1} | {family} | {len(verdicts)} | {alarms}/{n} | "
                  f"{sum(v.evidence for v in verdicts)} | {_margin(min(margins, default=None))} | {spread_off}/{n} |")
            targets.check(f"{family}, seeds {first}-{first + n - 1}: no false alarm ({alarms}/{n})", alarms == 0)


def long_table(n: int, first: int, cycles: int, targets: Targets) -> None:
    """`n` runs of every healthy family, `cycles` rewrite cycles each (a fifth for the growing ones)."""
    print(f"\n## 2b. Long runs: {n} loop(s) per healthy family from seed {first}, {cycles} rewrite cycles each "
          f"({cycles // 5} for {' and '.join(sorted(GROWING))}, whose buffers keep every literal and grow)")
    print("| family | rewrite cycles | alarms | evidence cycles | smallest margin |")
    print("|---|---|---|---|---|")
    for family, loops in long_loops(n, first, cycles).items():
        verdicts = [[v for _, v in lp.verdicts(CONFIGS["default"])] for lp in loops]
        alarms = sum(any(v.entered for v in run) for run in verdicts)
        flat = [v for run in verdicts for v in run]
        margins = [v.margin for v in flat if v.margin is not None]
        print(f"| {family} | {len(flat)} | {alarms}/{len(loops)} | {sum(v.evidence for v in flat)} | "
              f"{_margin(min(margins, default=None))} |")
        targets.check(f"{family}, {len(flat)} cycles in {len(loops)} long run(s): no false alarm ({alarms})",
                      alarms == 0)


def _seeds(families: dict[str, list[Measured]]) -> str:
    loops = next(iter(families.values()))
    return f"{loops[0].seed}-{loops[-1].seed}"


def _deciles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=10)
    return f"{q[0]:.2f} / {q[4]:.2f} / {q[8]:.2f}"


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}" if values else "—"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _margin(margin: float | None) -> str:
    return "— (nothing lost)" if margin is None else f"{margin:+.3f}"


def _first_margin(v: CycleVerdict) -> float:
    """A first cycle's margin as if it had a history: d' over the conditions judged on the net distance."""
    return v.d_net - min(CONFIGS["default"].converge_max, v.r)


def _cycle_margin(v: CycleVerdict) -> str:
    if v.first and v.losing:
        return f"— (first cycle; {_first_margin(v):+.3f} with a history)"
    if v.losing and v.margin is None:
        return "— (second cycle: no trend of d yet, kept literals not contracting)"
    return _margin(v.margin)


Figures = list[tuple[float, int, int, int | None]]  # a session's cycles: d, literals before, lost, |Q_t|


def figures_of(verdicts: list[CycleVerdict]) -> Figures:
    return [(v.d, v.literals_before, v.literals_lost, v.size_after) for v in verdicts]


def fed(figures: Figures, config: DetectorConfig) -> list[CycleVerdict]:
    detector = ContractionDetector(config)
    return [detector.update(*f) for f in figures]


def extended(verdicts: list[CycleVerdict], config: DetectorConfig) -> list[CycleVerdict]:
    """The session's cycles fed again, then its last cycle repeated `EXTENSION` more times."""
    figures = figures_of(verdicts)
    return fed(figures + [figures[-1]] * EXTENSION, config)[len(figures):]


def corpus_table(corpus: Path, targets: Targets) -> list[Figures]:
    """Prints table 3 and returns every read session's figures (for the sweeps)."""
    print(f"\n## 3. Real sessions ({corpus.name}/, every file)")
    config = CONFIGS["default"]
    summary: list[str] = []
    sessions: list[Figures] = []
    real_margins: list[float] = []
    first_margins: list[float] = []  # first cycles, as if they had a history (for information)
    for path in sorted(p for p in corpus.iterdir() if p.suffix != ".md"):
        audit = audit_session(path, config=config)
        if not audit.readable:
            print(f"\n### {path.name}\n\nnot read: {audit.error}")
            summary.append(f"| {path.name} | — | not read by the session readers | — | — |")
            continue
        verdicts = audit.verdicts
        sessions.append(figures_of(verdicts))
        others = len(audit.mutations) - len(verdicts)
        print(f"\n### {path.name} ({audit.format}, {len(verdicts)} rewrite cycle(s)"
              + (f", {others} mutation(s) that are no cycle" if others else "") + ")")
        if audit.mutations:
            print("\n| cycle | mutation | messages | d | net d | literals before | lost | r | converging | losing "
                  "| d<r | margin | state |")
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for m in audit.mutations:
            v = m.verdict
            where = f"line {m.line}" if m.line is not None else f"step {m.step}"
            mutation = f"{m.kind} ({m.source}, {where}) | {m.messages.before} -> {m.messages.after}"
            if v is None:  # no cycle of the alarm: its literals, nothing the detector is fed
                lost = f"{m.hidden} hidden" if m.hidden is not None else str(len(m.lost))
                print(f"| — | {mutation} | — | — | {m.literals_before} | {lost} | — | — | — | — | — "
                      f"| no cycle: {m.no_cycle} |")
                continue
            print(f"| {v.cycle} | {mutation} | "
                  f"{v.d:.3f} | {v.d_net:.3f} | {v.literals_before} | {v.literals_lost} | {v.r:.3f} | "
                  f"{_yes(v.shrinking)} | {_yes(v.losing)} | {_yes(v.below)} | {_cycle_margin(v)} | {v.state} |")
        margins = [v.margin for v in verdicts if v.margin is not None]
        real_margins.extend(margins)
        first_margins.extend(_first_margin(v) for v in verdicts if v.first and v.losing)
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
    return sessions


SWEEP = {"converge_max": (0.55, 0.6, 0.62, 0.65, 0.7), "fall_ratio": (0.6, 0.7, 0.8, 0.9, 1.0),
         "contract_ratio": (0.3, 0.4, 0.5, 0.6, 0.7), "carried_min": (0.5, 0.6, 0.65, 0.7, 0.8, 0.9),
         "step_ratio": (0.0, 0.8, 0.85, 0.9, 0.95, 1.0), "contract_noise": (0.0, 1.5, 2.0, 2.25, 2.5, 3.0),
         "step_noise": (0.0, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5), "confirm_noise": (0.0, 0.5, 1.0, 1.25, 1.5, 2.0),
         "shrink_min": (0.2, 0.3, 0.4, 0.5, 1.0)}


def sweep_table(contracting: dict[str, list[Measured]], healthy: dict[str, list[Measured]],
                sessions: list[Figures]) -> None:
    print("\n## 4. Sweeps: one field at a time, the others at their defaults")
    print("| setting | " + " | ".join(f"{family}: within 2 cycles" for family in contracting)
          + " | " + " | ".join(f"{family}: alarms" for family in healthy)
          + " | healthy: evidence cycles | healthy: smallest margin | corpus: evidence cycles "
          "| corpus: smallest margin |")
    print("|---|" + "---|" * (len(contracting) + len(healthy) + 4))
    n_c = len(next(iter(contracting.values())))
    for name, values in SWEEP.items():
        for value in values:
            config = DetectorConfig(**{name: value})
            within = [sum(d is not None and 0 <= d <= 2 for d in (lp.delay(config) for lp in loops))
                      for loops in contracting.values()]
            judged = [[[v for _, v in lp.verdicts(config)] for lp in loops] for loops in healthy.values()]
            alarms = [sum(any(v.entered for v in loop) for loop in loops) for loops in judged]
            calm = [v for loops in judged for loop in loops for v in loop]
            calm_margin = min((v.margin for v in calm if v.margin is not None), default=None)
            real = [v for figures in sessions for v in fed(figures, config)]
            smallest = min((v.margin for v in real if v.margin is not None), default=None)
            print(f"| {name}={value} | " + " | ".join(f"{w}/{n_c}" for w in within) + " | "
                  + " | ".join(f"{a}/{len(loops)}" for a, loops in zip(alarms, healthy.values(), strict=True))
                  + f" | {sum(v.evidence for v in calm)} | {_margin(calm_margin)} "
                  f"| {sum(v.evidence for v in real)} | {_margin(smallest)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=120, help="contracting loops per family")
    parser.add_argument("--healthy", type=int, default=60, help="healthy loops per family")
    parser.add_argument("--long-loops", type=int, default=10, help="loops per family of docs/guard.md's long loops")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="first contracting seed (healthy loops start 1000 later): other seeds check the defaults "
                             "out of sample")
    parser.add_argument("--held-out", default=",".join(map(str, HELD_OUT)),
                        help="first seeds of the out-of-sample onset ranges, comma-separated ('' for none)")
    parser.add_argument("--held-out-loops", type=int, default=200, help="contracting loops per family and range")
    parser.add_argument("--held-out-healthy", default=",".join(map(str, HELD_OUT_HEALTHY)),
                        help="first seeds of the out-of-sample quiet-tool docs loop ranges (comma-separated, '' none)")
    parser.add_argument("--held-out-healthy-loops", type=int, default=20, help="loops per quiet-tool family and range")
    parser.add_argument("--long-runs", type=int, default=2, help="long runs per healthy family (0 for none)")
    parser.add_argument("--long-cycles", type=int, default=2000, help="rewrite cycles of each long run")
    parser.add_argument("--long-first", type=int, default=71000, help="first seed of the long runs")
    parser.add_argument("--cache", type=Path, metavar="FILE",
                        help="keep every loop's measured figures in FILE (pickle) and reuse them on the next run")
    args = parser.parse_args()
    cfg = DetectorConfig()
    print(f"# contraction alarm calibration — DetectorConfig defaults: enter_cycles={cfg.enter_cycles}, "
          f"exit_cycles={cfg.exit_cycles}, window={cfg.window}, converge_max={cfg.converge_max}, "
          f"rise_max={cfg.rise_max}, fall_ratio={cfg.fall_ratio}, contract_ratio={cfg.contract_ratio}, "
          f"carried_min={cfg.carried_min}, step_ratio={cfg.step_ratio}, contract_noise={cfg.contract_noise}, "
          f"step_noise={cfg.step_noise}, recover_ratio={cfg.recover_ratio}, confirm_noise={cfg.confirm_noise}, "
          f"shrink_min={cfg.shrink_min}, "
          f"min_literals={cfg.min_literals}, min_lost={cfg.min_lost}, "
          f"exit_margin={cfg.exit_margin}")
    if args.cache and args.cache.exists():
        MEASURED.update(pickle.loads(args.cache.read_bytes()))
    targets = Targets()
    contracting = contracting_loops(args.loops, args.first_seed)
    healthy = healthy_loops(args.healthy, args.first_seed + 1000, args.long_loops)
    onset_table(contracting, targets)
    late_loops_table(contracting)
    if args.held_out:
        held_out_table(tuple(int(x) for x in args.held_out.split(",")), args.held_out_loops, targets)
    leaving_table(args.loops, args.first_seed, healthy, targets)
    false_alarm_table(healthy, targets)
    if args.held_out_healthy:
        held_out_healthy_table(tuple(int(x) for x in args.held_out_healthy.split(",")), args.held_out_healthy_loops,
                               targets)
    if args.long_runs:
        long_table(args.long_runs, args.long_first, args.long_cycles, targets)
    sessions = corpus_table(args.corpus, targets)
    sweep_table(contracting, healthy, sessions)
    print("\n## 5. Targets\n")
    for label, met in targets.lines:
        print(f"- {'MET' if met else 'MISS'}: {label}")
    print(f"\n{sum(met for _, met in targets.lines)}/{len(targets.lines)} targets met")
    if args.cache:
        args.cache.write_bytes(pickle.dumps(MEASURED))


if __name__ == "__main__":
    main()
