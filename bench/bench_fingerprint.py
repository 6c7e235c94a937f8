"""Benchmark and scale of the buffer fingerprint (ctxwatch.fingerprint), against a MinHash comparator.

Prints, for a 500-message context of ~100k words with 5 messages changed:
  cold  — a fresh Fingerprinter and fresh messages: fingerprint the whole buffer
  warm  — the guard's path: update the previous fingerprint with the 5 removed/added messages
          and compute the distance; and the same found by digest diff (`buffer(new, base=old)`)
beside the same run's floor: xxh3-128 of the canonical bytes of all 500 messages.
Then the scale: mean distance (and spread) against the fraction of words replaced, and against
the fraction of messages removed, for the chosen fingerprint and for 128-permutation MinHash
over word 3-shingles (Jaccard), with the number of seeds whose curve is monotone.

    /work/devvenv/bin/python bench/bench_fingerprint.py [--reps 30] [--seeds 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Sequence

import xxhash

from ctxwatch.fingerprint import Fingerprinter, distance
from ctxwatch.model import Message
from ctxwatch.simulate.text import VOCABULARY, TextGen

FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
REMOVED = (0.1, 0.25, 0.5, 0.75, 0.9)
MINHASH_PERMUTATIONS = 128
_M64 = (1 << 64) - 1
OURS = "simhash-projection 512 lanes, 2-gr"
MINHASH = "minhash-128, 3-shingle Jaccard"


def _texts(seed: int, n: int, sentences: int) -> list[tuple[str, str]]:
    gen = TextGen(seed)
    return [("user" if i % 2 else "assistant", gen.paragraph(sentences, 0.3)) for i in range(n)]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def _row(label: str, samples: Sequence[float], floor: float) -> str:
    med = statistics.median(samples)
    return (f"{label:<44} min {min(samples):8.3f}  median {med:8.3f}  max {max(samples):8.3f} ms"
            f"   {med / floor:7.1f}x floor")


def bench_cost(reps: int) -> None:
    texts = _texts(42, 500, 16)
    words = sum(len(t.split()) for _, t in texts)
    changed_at = (7, 120, 250, 380, 499)
    replacement = _texts(43, 5, 16)
    floors, colds, warm_update, warm_base = [], [], [], []
    for _ in range(reps):
        msgs = [Message(role, text) for role, text in texts]
        canon = [m.canonical() for m in msgs]
        floors.append(_timed(lambda canon=canon: [xxhash.xxh3_128_intdigest(b) for b in canon]))
        fpr = Fingerprinter()
        holder: dict[str, object] = {}
        colds.append(_timed(lambda fpr=fpr, msgs=msgs, h=holder: h.update(fp=fpr.buffer(msgs))))
        old = holder["fp"]
        old.vector  # noqa: B018 — decoded by the previous cycle's distance in a running guard
        for samples, incremental in ((warm_update, False), (warm_base, True)):
            new = list(msgs)  # fresh objects: the 5 new messages are hashed and projected in the timing
            for i, (role, text) in zip(changed_at, replacement, strict=True):
                new[i] = Message(role, text)
            fpr.clear()
            if incremental:
                samples.append(_timed(lambda old=old, f=fpr, new=new: distance(old, f.buffer(new, base=old))))
            else:
                removed, added = [msgs[i] for i in changed_at], [new[i] for i in changed_at]
                samples.append(_timed(lambda old=old, r=removed, a=added: distance(old, old.updated(r, a))))
    floor = statistics.median(floors)
    print(f"context: 500 messages, {words} words, 5 messages changed; {reps} repetitions")
    print(_row("floor: xxh3-128 of all 500 messages", floors, floor))
    print(_row("cold: fingerprint the whole buffer", colds, floor))
    print(_row("warm: updated(5 removed, 5 added) + distance", warm_update, floor))
    print(_row("warm: buffer(new, base=old) + distance", warm_base, floor))


def _replace_words(text: str, fraction: float, rng: random.Random) -> str:
    words = text.split()
    for i in rng.sample(range(len(words)), round(fraction * len(words))):
        words[i] = rng.choice(VOCABULARY) if rng.random() < 0.5 else f"w{rng.getrandbits(32):x}"
    return " ".join(words)


def _minhash(texts: Sequence[str]) -> list[int]:
    shingles = set()
    for text in texts:
        w = text.lower().split()
        shingles.update(map(" ".join, zip(w, w[1:], w[2:], strict=False)))
    hashes = [xxhash.xxh3_64_intdigest(s) for s in shingles] or [0]
    return [min(((h ^ salt) * 0x9E3779B97F4A7C15) & _M64 for h in hashes)
            for salt in (xxhash.xxh3_64_intdigest(str(p)) for p in range(MINHASH_PERMUTATIONS))]


def _jaccard_distance(a: list[int], b: list[int]) -> float:
    return sum(x != y for x, y in zip(a, b, strict=True)) / len(a)


Texts = list[tuple[str, str]]


def _curves(seeds: int, variants: Callable[[Texts, random.Random], list[Texts]]
            ) -> tuple[list[list[float]], list[list[float]]]:
    ours, minh = [], []
    fpr = Fingerprinter()
    for seed in range(seeds):
        base = _texts(seed, 25, 16)
        rng = random.Random(seed)
        fp0, mh0 = fpr.buffer([Message(r, t) for r, t in base]), _minhash([t for _, t in base])
        row_ours, row_mh = [], []
        for variant in variants(base, rng):
            row_ours.append(distance(fp0, fpr.buffer([Message(r, t) for r, t in variant])))
            row_mh.append(_jaccard_distance(mh0, _minhash([t for _, t in variant])))
        ours.append(row_ours)
        minh.append(row_mh)
    return ours, minh


def _print_curves(title: str, xs: Sequence[float], curves: dict[str, list[list[float]]]) -> None:
    print(f"\n{title}")
    print(f"{'fingerprint':<34}" + "".join(f"{x:>8.2f}" for x in xs) + "   monotone seeds")
    for name, rows in curves.items():
        means = [statistics.mean(r[i] for r in rows) for i in range(len(xs))]
        spread = [statistics.pstdev(r[i] for r in rows) for i in range(len(xs))]
        mono = sum(all(a <= b for a, b in zip(r, r[1:], strict=False)) for r in rows)
        print(f"{name + ' (mean)':<34}" + "".join(f"{m:8.3f}" for m in means) + f"   {mono}/{len(rows)}")
        print(f"{name + ' (sd)':<34}" + "".join(f"{s:8.3f}" for s in spread))


def bench_scale(seeds: int) -> None:
    def replaced(base, rng):
        return [[(r, _replace_words(t, f, rng)) for r, t in base] for f in FRACTIONS]

    def removed(base, rng):
        return [rng.sample(base, len(base) - round(g * len(base))) for g in REMOVED]

    ours, minh = _curves(seeds, replaced)
    _print_curves(f"distance vs fraction of words replaced ({seeds} seeds, 25 messages ~4,800 words)",
                  FRACTIONS, {OURS: ours, MINHASH: minh})
    ours, minh = _curves(seeds, removed)
    _print_curves(f"distance vs fraction of messages removed ({seeds} seeds)", REMOVED,
                  {OURS: ours, MINHASH: minh})
    texts = [t for _, t in _texts(42, 500, 16)]
    msgs = [Message("user", t) for t in texts]
    cost_ours = _timed(lambda: Fingerprinter().buffer(msgs))
    cost_mh = _timed(lambda: [_minhash([t]) for t in texts])
    print(f"\ncold cost on 500 messages: simhash-projection {cost_ours:.1f} ms (exact add/remove per "
          f"message); minhash per-message signatures {cost_mh:.1f} ms (removal needs a re-scan of every "
          "remaining message)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=30)
    args = parser.parse_args()
    bench_cost(args.reps)
    bench_scale(args.seeds)


if __name__ == "__main__":
    main()
