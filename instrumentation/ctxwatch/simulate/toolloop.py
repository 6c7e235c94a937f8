"""Small tool-using agent loops folded by a really naive summarizer, in provider shape.

The shape of issue 13's long-running loops: every turn the model calls a `lookup` tool for one
stock item and the tool answers (every few turns the model answers in text and the user asks for
the next item instead); every few turns the loop folds the oldest 60% of the history, after the
messages it always keeps, into one user turn saying only how many messages it covers — every
literal of what it folds is gone — while new work keeps arriving. Healthy: lossy, bounded, and
nothing converges.

Two ways to run such a loop, both giving a `SyntheticLoop` whose cycles hold the buffers as
ctxwatch Messages:

- `folding_tool_loop(seed, fmt)`: the caller's proposal is the rewrite (P_t, Q_t = the fold);
- `guarded_tool_loop(seed, fmt)`: the loop runs through a real `ContextGuard` with its defaults,
  compacting at the awkward point (after appending, before observing), so Q_t is what the guard
  returns (its whole-pair conversion of the fold). The contraction check only warns here, so the
  loop runs to its end whatever the alarm says; the calibration then feeds every configuration's
  detector the same cycles.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from functools import partial
from typing import Any

from ..adapters import to_messages
from .loops import Cycle, SyntheticLoop

FORMATS = ("openai_chat", "anthropic")
FOLD = 0.6
SYSTEM = "You are an inventory agent. Look every item up before you answer."


class StockAgent:
    """Seeded turns of a stock-lookup agent in `fmt`'s own message shape (dicts)."""

    def __init__(self, seed: int, fmt: str) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
        rng = random.Random(seed)
        self.fmt, self.answer_every = fmt, rng.randint(3, 6)
        self.base, self.turn = rng.randint(0, 90000), 0

    @property
    def keep_first(self) -> int:
        """Messages at the head a summarizer never folds (the system prompt in OpenAI Chat)."""
        return 1 if self.fmt == "openai_chat" else 0

    def sku(self, n: int) -> str:
        return f"SKU-{self.base + n:05d}"

    def opening(self) -> list[dict]:
        task = {"role": "user", "content": f"Check {self.sku(0)} and the items after it."}
        return [{"role": "system", "content": SYSTEM}, task] if self.fmt == "openai_chat" else [task]

    def next_turn(self) -> list[dict]:
        """The model's turn and what answers it: a lookup and its result, or an answer and the next question."""
        n, self.turn = self.turn, self.turn + 1
        if n % self.answer_every == self.answer_every - 1:
            answer = f"Item {self.sku(n)} is in aisle {n % 17}."
            return [{"role": "assistant", "content": answer if self.fmt == "openai_chat"
                     else [{"type": "text", "text": answer}]},
                    {"role": "user", "content": f"Now check {self.sku(n + 1)}."}]
        call_id, result = f"call_{n:04d}", f"{self.sku(n)}: {n * 7 % 400} units"
        if self.fmt == "openai_chat":
            return [{"role": "assistant", "content": None, "tool_calls": [{
                        "id": call_id, "type": "function",
                        "function": {"name": "lookup", "arguments": json.dumps({"sku": self.sku(n)})}}]},
                    {"role": "tool", "tool_call_id": call_id, "content": result}]
        return [{"role": "assistant", "content": [
                    {"type": "text", "text": "Looking it up."},
                    {"type": "tool_use", "id": call_id, "name": "lookup", "input": {"sku": self.sku(n)}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}]}]

    def fold(self, messages: list[dict]) -> list[dict]:
        """The really naive summarizer: the oldest 60% after `keep_first` become one user turn naming nothing
        but how far it goes (a new note each fold: one that repeated the last word for word would only
        delete what follows it, an elision, no rewrite cycle of the alarm)."""
        head, body = messages[:self.keep_first], messages[self.keep_first:]
        cut = fold_cut(body, self.fmt)
        return head + [{"role": "user", "content": f"{count_note(cut)} (to turn {self.turn})"}] + body[cut:]


def fold_cut(body: list[dict], fmt: str) -> int:
    """Where a naive fold of `body` (messages of `fmt`) ends: its oldest 60%, moved on to a message the
    summary's user turn may stand right before (no pair split; Anthropic: roles alternate)."""
    cut = int(len(body) * FOLD)
    while cut < len(body) and (body[cut]["role"] != "assistant" if fmt == "anthropic" else body[cut]["role"] == "tool"):
        cut += 1
    return cut


def count_note(cut: int) -> str:
    """The naive summary that names nothing: how many messages it folded."""
    return f"Summary of {cut} earlier messages: the agent looked up stock levels."


def _loop_params(seed: int) -> tuple[int, int]:
    rng = random.Random(seed * 7919 + 1)
    return rng.randint(3, 6), rng.randint(40, 70)  # turns between folds, folds


def _run(family: str, seed: int, fmt: str, compact: Any, folds: int | None) -> SyntheticLoop:
    agent, (every, seeded_folds) = StockAgent(seed, fmt), _loop_params(seed)
    folds = folds or seeded_folds
    messages, cycles = agent.opening(), []
    for t in range(1, folds + 1):
        for _ in range(every):
            messages = compact.observe(messages) + agent.next_turn()
        after = compact(agent, messages)
        cycles.append(Cycle(t, tuple(to_messages(messages, fmt)), tuple(to_messages(after, fmt))))
        messages = after
    return SyntheticLoop(family, seed, tuple(cycles), None, {"format": fmt, "every": every, "folds": folds,
                                                            "answer_every": agent.answer_every})


class _Unguarded:
    """The caller's fold is the rewrite."""

    @staticmethod
    def observe(messages: list[dict]) -> list[dict]:
        return messages

    def __call__(self, agent: StockAgent, messages: list[dict]) -> list[dict]:
        return agent.fold(messages)


class _Guarded:
    """The fold goes through a real ContextGuard (defaults; the contraction check only warns)."""

    def __init__(self) -> None:
        from ..guard import ContextGuard  # the guard imports the detector; keep `simulate` light to import
        self.guard = ContextGuard("calibration", enforce={"contraction": "warn"})

    def observe(self, messages: list[dict]) -> list[dict]:
        self.guard.observe(messages)
        return messages

    def __call__(self, agent: StockAgent, messages: list[dict]) -> list[dict]:
        return list(self.guard.apply(agent.fold(messages), kind="compact"))


def folding_tool_loop(seed: int, fmt: str = "openai_chat", folds: int | None = None) -> SyntheticLoop:
    """The naive fold as the caller proposes it, measured as the guard measures a rewrite (`folds` folds;
    default: seeded, 40-70)."""
    return _run(f"naive folding, {fmt}", seed, fmt, _Unguarded(), folds)


def guarded_tool_loop(seed: int, fmt: str = "openai_chat", folds: int | None = None) -> SyntheticLoop:
    """The naive fold through a real ContextGuard: the cycles are what the guard applied."""
    return _run(f"naive folding through the guard, {fmt}", seed, fmt, _Guarded(), folds)


TOOL_LOOP_FAMILIES: dict[str, Callable[[int], SyntheticLoop]] = {
    **{f"naive folding, {fmt}": partial(folding_tool_loop, fmt=fmt) for fmt in FORMATS},
    **{f"naive folding through the guard, {fmt}": partial(guarded_tool_loop, fmt=fmt) for fmt in FORMATS},
}
