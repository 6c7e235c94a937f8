"""Calibration of the contraction alarm (ctxwatch.contraction) — the evidence table in docs/alarm.md.

1. Onset delay over seeded instruction-absorption loops with varied compression ratios
   (ctxwatch.simulate.loops.absorption_loop; onset = the first rewrite that re-executes an
   absorbed directive). Delay = cycle the detector entered ``contracting`` − onset.
2. False alarms over seeded healthy loops: appending, literal-preserving summarization, and a
   sliding window (lossy but bounded); plus, for information, sentinel-drift and re-ranking loops.
3. The verdict and its d/r series on each real session in the corpus, audited as `ctxwatch replay`
   does (ctxwatch.replay.audit_session: every recorded mutation — compaction, pruning, rewind — is
   one rewrite cycle).

Each table is printed for the default DetectorConfig and for the strict reading of "d shrinking"
(shrink_ratio 1.0), so the cost of the relaxation is visible.

    /work/devvenv/bin/python bench/calibrate_alarm.py [--loops 120] [--healthy 60] [--corpus DIR]
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ctxwatch.contraction import DetectorConfig
from ctxwatch.model import Message
from ctxwatch.replay import audit_session
from ctxwatch.simulate.loops import (
    HEALTHY_FAMILIES,
    SyntheticLoop,
    absorption_loop,
    paraphrasing_loop,
    reranking_loop,
)
from ctxwatch.simulate.meter import judge

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CONFIGS = {"default": DetectorConfig(), "strict (shrink_ratio=1.0)": DetectorConfig(shrink_ratio=1.0)}
RATIO_BANDS = ((0.30, 0.45), (0.45, 0.60), (0.60, 0.81))


Pairs = Iterable[tuple[Sequence[Message], Sequence[Message]]]


def entered_at(pairs: Pairs, config: DetectorConfig) -> int | None:
    """The first cycle at which the detector entered ``contracting`` (None: never)."""
    return next((v.cycle for _, v in judge(pairs, config) if v.entered), None)


def _pairs(loop: SyntheticLoop) -> list[tuple[tuple[Message, ...], tuple[Message, ...]]]:
    return [(c.pre, c.post) for c in loop.cycles]


def onset_table(n: int) -> None:
    loops = [absorption_loop(seed) for seed in range(n)]
    print(f"\n## 1. Onset delay: {n} instruction-absorption loops (seeds 0-{n - 1}), "
          "absorbing ratio 0.30-0.80")
    print("| setting | within 2 cycles | delay 0 / 1 / 2 / 3 / 4+ | early (before onset) | missed | "
          + " | ".join(f"within 2, ratio {lo:.2f}-{hi:.2f}" for lo, hi in RATIO_BANDS) + " |")
    print("|---|---|---|---|---|" + "---|" * len(RATIO_BANDS))
    for name, config in CONFIGS.items():
        delays: list[int | None] = [None if (e := entered_at(_pairs(lp), config)) is None else e - lp.onset
                                    for lp in loops]
        hist = Counter(min(d, 4) for d in delays if d is not None and d >= 0)
        within = [d is not None and 0 <= d <= 2 for d in delays]
        bands = []
        for lo, hi in RATIO_BANDS:
            sel = [w for w, lp in zip(within, loops, strict=True) if lo <= lp.params["absorbing_ratio"] < hi]
            bands.append(f"{sum(sel)}/{len(sel)}")
        print(f"| {name} | {sum(within)}/{n} ({sum(within) / n:.1%}) | "
              f"{' / '.join(str(hist.get(k, 0)) for k in range(5))} | "
              f"{sum(1 for d in delays if d is not None and d < 0)} | {delays.count(None)} | "
              + " | ".join(bands) + " |")


def false_alarm_table(n: int) -> None:
    families: dict[str, Callable[[int], SyntheticLoop]] = dict(HEALTHY_FAMILIES)
    informational = {"sentinel drift (paraphrasing, rate 0.3)": paraphrasing_loop,
                     "ordering inversion (re-ranking)": reranking_loop}
    print(f"\n## 2. False alarms: healthy loops ({n} per family, seeds 1000-{999 + n}, 12 cycles each)")
    print("| family | " + " | ".join(f"alarms, {name}" for name in CONFIGS) + " | median d | median r |")
    print("|---|" + "---|" * (len(CONFIGS) + 2))
    for label, make in [*families.items(), *informational.items()]:
        count = n if label in families else 20
        loops = [make(1000 + seed) for seed in range(count)]
        cells = [f"{sum(entered_at(_pairs(lp), cfg) is not None for lp in loops)}/{count}"
                 for cfg in CONFIGS.values()]
        series = [(v.d, v.r) for lp in loops for _, v in judge(_pairs(lp))]
        note = "" if label in families else " (not healthy; shown for information)"
        med_d, med_r = statistics.median(d for d, _ in series), statistics.median(r for _, r in series)
        print(f"| {label}{note} | " + " | ".join(cells) + f" | {med_d:.3f} | {med_r:.3f} |")


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def corpus_table(corpus: Path) -> None:
    print(f"\n## 3. Real sessions ({corpus})")
    strict_config = CONFIGS["strict (shrink_ratio=1.0)"]
    for path in sorted(p for p in corpus.iterdir() if p.suffix != ".md"):
        audit = audit_session(path)
        if not audit.readable:
            print(f"\n### {path.name}: {audit.error}")
            continue
        print(f"\n### {path.name} ({audit.format}, {len(audit.mutations)} rewrite cycle(s))")
        if audit.mutations:
            print("| cycle | mutation | messages | d | literals before | lost | r | shrinking | losing | d<r "
                  "| state |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
        for m in audit.mutations:
            v = m.verdict
            print(f"| {v.cycle} | {m.kind} ({m.source}, step {m.step}) | {m.messages.before} -> {m.messages.after} | "
                  f"{v.d:.3f} | {v.literals_before} | {v.literals_lost} | {v.r:.3f} | "
                  f"{_yes(v.shrinking)} | {_yes(v.losing)} | {_yes(v.below)} | {v.state} |")
        print(f"\nverdict (default): {audit.explain()}")
        print(f"verdict (strict):  {audit_session(path, config=strict_config).explain()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=120, help="instruction-absorption loops (>= 50)")
    parser.add_argument("--healthy", type=int, default=60, help="healthy loops per family (>= 50)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    cfg = DetectorConfig()
    print(f"# contraction alarm calibration — DetectorConfig defaults: enter_cycles={cfg.enter_cycles}, "
          f"exit_cycles={cfg.exit_cycles}, window={cfg.window}, shrink_ratio={cfg.shrink_ratio}, "
          f"min_literals={cfg.min_literals}, min_lost={cfg.min_lost}, exit_margin={cfg.exit_margin}")
    onset_table(args.loops)
    false_alarm_table(args.healthy)
    corpus_table(args.corpus)


if __name__ == "__main__":
    main()
