"""Adapter conversion cost on a 500-message, ~100k-word context, per format.

For each format: cold conversion (a fresh `Converter`, every message read) and warm conversion
(the same converter, the same list with 5 of its 500 messages replaced by new objects, as an
agent resends its context), min / median / max over the runs, beside the baseline measured in
the same run: iterating the list once (what any per-message work must at least cost) and
hashing all 500 messages with xxh3 (the guard's floor).

    /work/devvenv/bin/python bench/bench_adapters.py [--runs 200]
"""

from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import xxhash

from ctxwatch.adapters import Converter

WORDS = ["alpha", "beta", "gamma", "delta", "orders", "customer", "invoice", "refund", "ledger", "query", "table",
         "index", "path", "config", "/srv/app/config.yaml", "ERR_TIMEOUT", "call_7f3a", "3f9a2c1b", "retry", "budget"]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def chat(rng: random.Random, n: int) -> list[Any]:
    out: list[Any] = [{"role": "system", "content": text(rng, 200)}]
    while len(out) < n:
        i = len(out)
        out.append({"role": "user", "content": text(rng, 200)})
        out.append({"role": "assistant", "content": text(rng, 60), "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "query_db", "arguments": '{"q": 1}'}}]})
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": text(rng, 340)})
    return out[:n]


def responses(rng: random.Random, n: int) -> list[Any]:
    out: list[Any] = [{"type": "message", "role": "developer", "content": [{"type": "input_text",
                                                                            "text": text(rng, 200)}]}]
    while len(out) < n:
        i = len(out)
        out.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text(rng, 200)}]})
        out.append({"type": "function_call", "call_id": f"call_{i}", "name": "sh", "arguments": '{"cmd": "ls"}'})
        out.append({"type": "function_call_output", "call_id": f"call_{i}", "output": text(rng, 400)})
    return out[:n]


def anthropic(rng: random.Random, n: int) -> list[Any]:
    out: list[Any] = []
    while len(out) < n:
        i = len(out)
        out.append({"role": "user", "content": text(rng, 200)})
        out.append({"role": "assistant", "content": [{"type": "text", "text": text(rng, 60)},
                                                     {"type": "tool_use", "id": f"toolu_{i}", "name": "query_db",
                                                      "input": {"table": "orders", "limit": 10}}]})
        out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                 "content": text(rng, 340)}]})
    return out[:n]


def langchain(rng: random.Random, n: int) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    out: list[Any] = [SystemMessage(text(rng, 200))]
    while len(out) < n:
        i = len(out)
        out.append(HumanMessage(text(rng, 200)))
        out.append(AIMessage(text(rng, 60), tool_calls=[{"name": "query_db", "args": {"q": 1}, "id": f"call_{i}"}]))
        out.append(ToolMessage(text(rng, 340), tool_call_id=f"call_{i}"))
    return out[:n]


def changed(data: list[Any], rng: random.Random, k: int = 5) -> list[Any]:
    """The same list with `k` messages replaced by edited copies (new objects)."""
    out = list(data)
    for i in rng.sample(range(1, len(data)), k):
        item = copy.deepcopy(data[i])
        if isinstance(item, dict):
            item["edited"] = True
        else:
            item.id = f"edited-{i}"
        out[i] = item
    return out


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def row(label: str, ms: list[float], base: float) -> str:
    med = statistics.median(ms)
    return (f"  {label:<28} min {min(ms):8.3f}  median {med:8.3f}  max {max(ms):8.3f} ms"
            f"   x{med / base:7.1f} of iteration")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200, help="warm runs per format (cold: a tenth)")
    args = parser.parse_args()
    rng = random.Random(7)
    for name, build in (("openai_chat", chat), ("openai_responses", responses), ("anthropic", anthropic),
                        ("langchain", langchain)):
        try:
            data = build(rng, 500)
        except ImportError:
            print(f"{name}: skipped (langchain-core not installed)")
            continue
        words = sum(len(str(getattr(m, "content", m)).split()) for m in data)
        iterate = timed(lambda d=data: [None for _ in d], args.runs)
        base = statistics.median(iterate)
        messages = Converter(name).to_messages(data)
        hashing = timed(lambda ms=messages: [xxhash.xxh3_128_intdigest(m.canonical()) for m in ms], args.runs)
        cold = timed(lambda d=data, n=name: Converter(n).to_messages(d), max(args.runs // 10, 5))
        conv = Converter(name)
        conv.to_messages(data)
        variants = [changed(data, rng) for _ in range(args.runs)]
        pending = iter(variants)
        warm = timed(lambda c=conv, it=pending: c.to_messages(next(it)), args.runs)
        print(f"{name}: 500 messages, ~{words // 1000}k words, {args.runs} warm runs")
        print(row("baseline: iterate the list", iterate, base))
        print(row("floor: xxh3 of 500 messages", hashing, base))
        print(row("cold: fresh Converter", cold, base))
        print(row("warm: 5 of 500 changed", warm, base))
        print(f"  warm/cold median ratio {statistics.median(warm) / statistics.median(cold):.3f}; "
              f"warm/xxh3-floor {statistics.median(warm) / statistics.median(hashing):.2f}")


if __name__ == "__main__":
    main()
