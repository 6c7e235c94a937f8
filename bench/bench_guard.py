"""Guard overhead per mutation on a 500-message, ~100k-word context with 5 messages changed.

Prints the full check (every invariant, literal diff, fingerprint, contraction detector, the
provenance entry of an applied rewrite; telemetry through the OpenTelemetry API with no SDK) warm
and cold, beside the floor measured in the same run: hashing all 500 messages with xxh3; then each
of issue 12's targets as met or MISS with its figure.

    .venv/bin/python bench/bench_guard.py [--repeat 200] [--cold 15]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stats import Timing, measure  # noqa: E402

from ctxwatch import ContextGuard, Message, TextPart, ToolCall, ToolResult  # noqa: E402

WORDS = [
    "the", "ledger", "invoice", "row", "total", "march", "export", "customer", "order", "refund", "check",
    "account", "balance", "payment", "status", "pending", "review", "approve", "reject", "update", "config",
    "timeout", "retry", "service",
]


def sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < 0.3:
        words.append(f"INV-{rng.randint(10000, 99999)}")
    if rng.random() < 0.2:
        words.append(f"/srv/app/{rng.choice(WORDS)}/{rng.randint(1, 999)}.py")
    return " ".join(words)


def build_context(seed: int, n: int = 500, words_per_message: int = 235) -> list[Message]:
    rng = random.Random(seed)
    out = [Message("system", [TextPart(sentence(rng, 60))])]
    call = 0
    while len(out) < n:
        if rng.random() < 0.2 and len(out) < n - 1:
            call += 1
            cid = f"call_{call:05d}"
            out.append(Message("assistant", [ToolCall(cid, "search", json.dumps({"q": rng.choice(WORDS)}))]))
            out.append(Message("tool", [ToolResult(cid, sentence(rng, words_per_message))]))
        else:
            out.append(Message(rng.choice(["user", "assistant"]), [TextPart(sentence(rng, words_per_message))]))
    return out[:n]


def fresh_copy(messages: list[Message]) -> list[Message]:
    """New objects with the same content: nothing cached on them."""
    return [Message(m.role, m.parts, id=m.id, name=m.name) for m in messages]


def proposals(base: list[Message], count: int, changed: int, seed: int) -> list[list[Message]]:
    """`count` successive proposals, each rewriting `changed` text messages of the one before it (the
    first: of `base`), with new content in new objects — so every check sees exactly `changed`
    messages replaced relative to the context the guard holds."""
    rng = random.Random(seed)
    text_positions = [i for i, m in enumerate(base) if i > 0 and m.role in ("user", "assistant") and not m.call_ids]
    out = []
    current = list(base)
    for _ in range(count):
        current = list(current)
        for i in rng.sample(text_positions, changed):
            current[i] = Message(base[i].role, [TextPart(sentence(rng, 150) + f" (condensed {len(out)})")])
        out.append(current)
    return out


def timed(label: str, fn: Callable[[], object], repeat: int,
          setup: Callable[[], object] | None = None) -> tuple[Timing, Timing]:
    """Wall time of `fn` (`measure`), and the CPU time of this process in the same runs: on a loaded
    machine the wall time also counts the time spent waiting for a core."""
    cpu: list[float] = []

    def run() -> None:
        started = time.process_time()
        fn()
        cpu.append(time.process_time() - started)

    return measure(label, run, repeat, setup=setup), Timing(f"  CPU time of the same {repeat} runs", cpu)


def cold_first_check(base: list[Message], repeat: int, seed: int,
                     enforce: dict | None = None) -> tuple[Timing, Timing]:
    """A new guard observing fresh message objects (nothing cached), then its first check."""
    runs = iter([(fresh_copy(base), fresh_copy(proposals(base, 1, 5, seed=seed + k)[0])) for k in range(repeat)])
    state: dict = {}

    def setup() -> None:
        state["ctx"], state["prop"] = next(runs)
        state["guard"] = ContextGuard("bench-cold", pass_cap=None, enforce={"contraction": "warn", **(enforce or {})})

    def first_check() -> None:
        state["guard"].observe(state["ctx"], boundary=0)
        state["guard"].check(state["prop"], kind="compact")

    which = " (structural)" if enforce else " (every invariant)"
    return timed("cold: observe + first check" + which, first_check, repeat, setup=setup)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--cold", type=int, default=15)
    args = ap.parse_args()

    base = build_context(7)
    words = sum(len(m.text.split()) for m in base)
    print(f"context: {len(base)} messages, {words} words, {sum(len(m.canonical()) for m in base)} bytes; "
          f"5 messages changed per mutation\n")

    encoded = [m.canonical() for m in base]
    floor = measure("floor: xxh3 of all 500 messages", lambda: [xxhash.xxh3_128_intdigest(b) for b in encoded],
                    args.repeat)

    guard = ContextGuard("bench", pass_cap=None, enforce={"contraction": "warn"})
    guard.observe(base, boundary=0)
    todo = iter(proposals(base, args.repeat + 1, 5, seed=11))
    guard.check(next(todo), kind="compact")  # warm-up: the unchanged messages' caches are filled
    warm, warm_cpu = timed("full check warm (every invariant)", lambda: guard.check(next(todo), kind="compact"),
                           args.repeat)

    structural_only = {inv: "off" for inv in ("policy_isolation", "pass_cap", "directive_colocation",
                                              "literal_loss", "order", "contraction")}
    sguard = ContextGuard("bench-structural", pass_cap=None, enforce=structural_only)
    sguard.observe(base, boundary=0)
    todo = iter(proposals(base, args.repeat + 1, 5, seed=12))
    sguard.check(next(todo), kind="compact")
    structural = measure("structural checks only (records 000, 004)", lambda: sguard.check(next(todo), kind="compact"),
                         args.repeat)

    cold, cold_cpu = cold_first_check(base, args.cold, seed=13)
    cold_structural, cold_structural_cpu = cold_first_check(base, args.cold, seed=14, enforce=structural_only)

    print(floor.row("ms"))
    print(structural.row("ms", baseline=floor))
    for wall, cpu in ((warm, warm_cpu), (cold_structural, cold_structural_cpu), (cold, cold_cpu)):
        print(wall.row("ms", baseline=floor))
        print(cpu.row("ms", baseline=floor))
    print("\ntargets (issue 12; medians):")
    for target in targets(floor, structural, warm, cold_structural, cold):
        print(f"  {target}")


def targets(floor: Timing, structural: Timing, warm: Timing, cold_structural: Timing, cold: Timing) -> list[str]:
    """Each target as a line that names it, its figure and whether it was met ("MISS" when not)."""
    checks = [
        ("warm full check (every invariant) <= 1.5 ms", warm.median * 1e3, 1.5, "ms"),
        ("structural checks <= 6x the same-run xxh3 floor", structural.median / floor.median, 6.0, "x"),
        ("cold observe + first check (every invariant) <= 60 ms", cold.median * 1e3, 60.0, "ms"),
        ("cold observe + first check (structural) <= 60 ms", cold_structural.median * 1e3, 60.0, "ms"),
    ]
    return [f"{'met ' if value <= limit else 'MISS'}  {name}: {value:.3f} {unit}"
            for name, value, limit, unit in checks]


if __name__ == "__main__":
    main()
