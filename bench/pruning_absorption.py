"""Review F5: candidate rules for when a pruning (an elision: it only drops whole messages) is a cycle of the
contraction alarm, measured on the prune-only loops of `ctxwatch.simulate.loops.PRUNING_FAMILIES`.

Today (`ctxwatch.cycles.no_cycle_reason`) no elision is a cycle, so record 003's instruction absorption done by
pruning alone (the `pruning absorption` family: the buffer collapses onto its head, every cycle's new work
dropped) is never fed to the detector and never alarms. Each candidate rule below says which elisions are fed
(with their real d and r, Q_{t-1} the buffer after the last cycle fed, as `ctxwatch.cycles` measures); the
detector, with its defaults, decides. Printed per rule: onsets caught within 2 cycles, early, late or missed
(target: >= 95% within 2, none early), and false alarms on the healthy prune-only families (target: 0).

These rules are candidates, measured here only: none is the guard's rule. Review F2's healthy loop through the
guard (docs/guard.md's loop, tools that do not echo their input, prunings and summaries) halted on 11 of 12
seeds when every pruning was a cycle (tests/instrumentation/test_prune_long_conversation.py), which this script
does not re-run.

    .venv/bin/python bench/pruning_absorption.py [--loops 40] [--healthy 20]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from ctxwatch.contraction import ContractionDetector, CycleVerdict
from ctxwatch.cycles import ELISION, CycleMeter, no_cycle_reason
from ctxwatch.diff import Change
from ctxwatch.model import Context
from ctxwatch.simulate.loops import PRUNING_FAMILIES, SyntheticLoop

# a rule: (the change, the digests of the buffer after the previous rewrite of any kind, None before the first)
# -> whether an elision is fed to the detector
Rule = Callable[[Change, list[int] | None], bool]


def new_work(change: Change, last_rewrite: list[int] | None) -> tuple[int, int]:
    """How many messages were appended since the previous rewrite, and how many of them `change` drops."""
    if last_rewrite is None:
        return 0, 0
    new = Counter(change.before_digests) - Counter(last_rewrite)
    return sum(new.values()), sum((new & Counter(m.digest for m in change.removed_messages)).values())


def drops_new_work(change: Change, last_rewrite: list[int] | None) -> bool:
    """It drops a message appended since the previous rewrite (work the pruner discards, not the oldest)."""
    return new_work(change, last_rewrite)[1] > 0


RULES: dict[str, Rule] = {
    "no elision is a cycle (today)": lambda change, last: False,
    "an elision dropping work appended since the previous rewrite": drops_new_work,
    "every elision": lambda change, last: True,
}


def verdicts(loop: SyntheticLoop, rule: Rule) -> list[tuple[int, CycleVerdict]]:
    """The loop fed through `ctxwatch.cycles`' measurement, with `rule` deciding which elisions are cycles."""
    meter, detector = CycleMeter(), ContractionDetector()
    out = []
    for c, change, last in rewrites(loop):
        reason = no_cycle_reason(change)
        if reason == ELISION and rule(change, last):
            reason = None
        figures = meter._measure(change, reason)  # the meter's own measurement, the candidate's decision
        if figures.d is not None:
            out.append((c.t, detector.update(figures.d, figures.literals_before, figures.literals_lost,
                                             sum(m.size for m in c.post))))
    return out


def rewrites(loop: SyntheticLoop) -> Iterator[tuple[Any, Change, list[int] | None]]:
    """Each cycle of `loop` that is no pure append: (the cycle, its change, the previous rewrite's digests)."""
    last: list[int] | None = None
    for c in loop.cycles:
        change = Change.between(Context(c.pre), c.post, "prune")
        if change.is_append_only:
            continue
        yield c, change, last
        last = change.after_digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=40, help="pruning absorption loops (seeds 0-)")
    parser.add_argument("--healthy", type=int, default=20, help="loops per healthy prune-only family (seeds 1000-)")
    args = parser.parse_args()
    contracting = [PRUNING_FAMILIES["pruning absorption"](seed) for seed in range(args.loops)]
    healthy = {family: [make(seed) for seed in range(1000, 1000 + args.healthy)]
               for family, make in PRUNING_FAMILIES.items() if family != "pruning absorption"}
    print("| rule | absorption: within 2 cycles | early | late (delay: loops) | missed | "
          + " | ".join(f"{family}: alarms (cycles fed)" for family in healthy) + " |")
    print("|---|---|---|---|---|" + "---|" * len(healthy))
    for name, rule in RULES.items():
        delays = []
        for loop in contracting:
            entered = next((t for t, v in verdicts(loop, rule) if v.entered), None)
            delays.append(None if entered is None or loop.onset is None else entered - loop.onset)
        late = Counter(d for d in delays if d is not None and d > 2)
        cells = []
        for loops in healthy.values():
            runs = [verdicts(loop, rule) for loop in loops]
            cells.append(f"{sum(any(v.entered for _, v in run) for run in runs)}/{len(loops)} "
                         f"({sum(map(len, runs))})")
        print(f"| {name} | {sum(d is not None and 0 <= d <= 2 for d in delays)}/{len(delays)} | "
              f"{sum(d is not None and d < 0 for d in delays)} | "
              f"{', '.join(f'{d}: {n}' for d, n in sorted(late.items())) or '—'} | {delays.count(None)} | "
              + " | ".join(cells) + " |")
    shares_table({"pruning absorption": contracting, **healthy})


def dropped_shares(loop: SyntheticLoop) -> list[tuple[bool, float]]:
    """Per elision after the first rewrite: (at or after the onset, share of the work appended since the previous
    rewrite that it drops)."""
    out = []
    for c, change, last in rewrites(loop):
        appended, dropped = new_work(change, last)
        if last is not None and no_cycle_reason(change) == ELISION:
            out.append((loop.onset is not None and c.t >= loop.onset, dropped / appended if appended else 0.0))
    return out


def shares_table(loops: dict[str, list[SyntheticLoop]]) -> None:
    print("\n| family | elisions | share of the new work dropped: 0 / (0, 0.5) / [0.5, 1) / 1 | after the onset |")
    print("|---|---|---|---|")
    for family, runs in loops.items():
        shares = [x for loop in runs for x in dropped_shares(loop)]
        bins = Counter(0 if s == 0 else 1 if s < 0.5 else 2 if s < 1 else 3 for _, s in shares)
        after = [s for late, s in shares if late]
        print(f"| {family} | {len(shares)} | {' / '.join(str(bins.get(k, 0)) for k in range(4))} | "
              + (f"{len(after)} elisions, median share {sorted(after)[len(after) // 2]:.2f}" if after else "—") + " |")


if __name__ == "__main__":
    main()
