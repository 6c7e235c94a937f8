"""Seeded synthetic agent loops: healthy ones, and ones with a known contraction onset.

A loop is a sequence of rewrite cycles. In cycle t the simulated agent appends new turns
(observations carrying protected literals, and notes) to the previous post-rewrite buffer,
giving the pre-rewrite buffer P_t; a real rewrite function from `ctxwatch.simulate.rewriters`
then produces Q_t. Every loop records both buffers of every cycle, so the figures the guard
would see (distance, literals before, literals lost) can be measured from them.

Families:
  appending      no rewrite: Q_t = P_t (healthy)
  sliding        keep the system prompt and the last `window` messages (healthy, lossy, bounded)
  summarizing    literal-preserving extractive summarization over a word budget (healthy)
  absorption     summarizing until the onset, then instruction absorption (contracting)
  replacing      the whole history replaced by a fresh summary once it outgrows a budget (healthy;
                 the shape of Claude Code's compaction); `keep_task` keeps the user's task
                 verbatim besides the summary (the shape of Codex's)
  chain          summary of the previous summary and the new turns, every cycle, literals kept (healthy)
  folding        every few cycles the oldest 60% folded into a summary without any of its literals,
                 the rest kept, new work arriving (healthy: lossy but not converging)
  converging     literal-keeping summary chain until the onset, then a chain that keeps the previous
                 summary whole and ever less of the new work (contracting)
  reranking      salience re-ranking every cycle (ordering inversion)
  paraphrasing   literals turned into prose every cycle (sentinel drift)

Prune-only families (`PRUNING_FAMILIES`; review F5: a loop that only drops whole messages is no cycle of
the alarm today, `ctxwatch.cycles.no_cycle_reason`, so they are not yet among the calibration's targets;
`bench/pruning_absorption.py` measures candidate rules on them):
  pruning absorption  a sliding window until the onset; from the absorption cycle on the agent writes
                      the directive as a note to self each cycle, and the pruner obeys every note it
                      finds, keeping ``ratio ** notes`` of the oldest payload messages and the newest
                      note: all new work is dropped, the buffer collapses onto its head (contracting)
  batch pruning       every `every` cycles the oldest share of the body is dropped whole, the newest kept
                      (healthy: lossy, bounded, new work stays)

In an absorption loop the instruction-absorbing rewriter takes over at cycle `absorbed_at`: that
rewrite writes its directive into the buffer as a note to self but compresses no more than an
ordinary summarizer with the same ratio would. From the next cycle on, every rewrite reads the
notes and obeys each one, so the compression compounds. **Onset** is that cycle, the first
rewrite that re-executes an absorbed directive: ``onset = absorbed_at + 1``. Cycles before the
onset are healthy, the onset and every later cycle are contracting. (The absorption cycle itself
is what the guard's `directive_colocation` check refuses; the contraction alarm is for loops
that run on regardless.)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..model import Message
from .rewriters import (
    ConvergingSummarizer,
    DigestSummarizer,
    ExtractiveSummarizer,
    FoldingSummarizer,
    InstructionAbsorbingRewriter,
    ParaphrasingRewriter,
    SalienceReranker,
    TaskKeeping,
)
from .text import TextGen

Rewrite = Callable[[Sequence[Message]], Sequence[Message]]

SYSTEM_PROMPT = ("You are a maintenance agent working through an incident. Use the tools, keep exact "
                 "identifiers exactly as you saw them, and never modify the audit log.")


@dataclass(frozen=True)
class Cycle:
    """One rewrite cycle: the buffer before (P_t) and after (Q_t) the rewrite."""

    t: int
    pre: tuple[Message, ...]
    post: tuple[Message, ...]
    phase: str = "healthy"


@dataclass(frozen=True)
class SyntheticLoop:
    """A finished loop: its family, seed, cycles, known onset (None when healthy) and parameters."""

    family: str
    seed: int
    cycles: tuple[Cycle, ...]
    onset: int | None = None
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def contracting(self) -> bool:
        return self.onset is not None


class SimulatedAgent:
    """Produces the opening buffer and the turns an agent appends each cycle."""

    def __init__(self, seed: int, *, words_per_turn: int = 80, literal_prob: float = 0.45) -> None:
        self.text = TextGen(seed)
        self.words_per_turn = words_per_turn
        self.literal_prob = literal_prob

    def _turn(self, role: str) -> Message:
        n_sentences = max(1, self.words_per_turn // 12)
        return self.text.message(role, n_sentences, self.literal_prob)

    def opening(self, turns: int = 8) -> list[Message]:
        task = Message("user", "Task: " + self.text.paragraph(3, literal_prob=0.8))
        return [Message("system", SYSTEM_PROMPT), task, *self.turns(turns)]

    def turns(self, n: int) -> list[Message]:
        """`n` turns alternating an observation (user) and the agent's note (assistant)."""
        return [self._turn("user" if i % 2 == 0 else "assistant") for i in range(n)]


def run_loop(family: str, seed: int, rewrite_at: Callable[[int], Rewrite], *, cycles: int,
             turns_per_cycle: int = 2, onset: int | None = None, params: dict[str, Any] | None = None,
             agent: SimulatedAgent | None = None) -> SyntheticLoop:
    """Drive a loop: each cycle appends turns, then applies ``rewrite_at(t)``."""
    agent = agent or SimulatedAgent(seed)
    buffer = agent.opening()
    out = []
    for t in range(1, cycles + 1):
        pre = tuple(buffer + agent.turns(turns_per_cycle))
        post = tuple(rewrite_at(t)(pre))
        phase = "contracting" if onset is not None and t >= onset else "healthy"
        out.append(Cycle(t, pre, post, phase))
        buffer = list(post)
    return SyntheticLoop(family, seed, tuple(out), onset, dict(params or {}))


def _identity(messages: Sequence[Message]) -> list[Message]:
    return list(messages)


def appending_loop(seed: int, cycles: int = 12) -> SyntheticLoop:
    """Healthy: the agent only appends."""
    return run_loop("appending", seed, lambda t: _identity, cycles=cycles)


def sliding_loop(seed: int, cycles: int = 12, window: int | None = None) -> SyntheticLoop:
    """Healthy but lossy: keep the system prompt and the last `window` messages."""
    window = window or random.Random(seed).randint(6, 14)

    def keep_last(messages: Sequence[Message]) -> list[Message]:
        system = [m for m in messages if m.role == "system"]
        rest = [m for m in messages if m.role != "system"]
        return system + rest[-window:]

    return run_loop("sliding", seed, lambda t: keep_last, cycles=cycles, params={"window": window})


def _healthy_summarizer(rng: random.Random) -> tuple[ExtractiveSummarizer, dict[str, Any]]:
    ratio, budget = round(rng.uniform(0.3, 0.7), 2), rng.choice((400, 600, 800))
    return (ExtractiveSummarizer(ratio, budget=budget, keep_last=2, preserve_literals=True),
            {"ratio": ratio, "budget": budget})


def summarizing_loop(seed: int, cycles: int = 12) -> SyntheticLoop:
    """Healthy: literal-preserving extractive summarization whenever the payload exceeds a budget."""
    summarizer, params = _healthy_summarizer(random.Random(seed))
    return run_loop("summarizing", seed, lambda t: summarizer, cycles=cycles, params=params)


def absorption_loop(seed: int, cycles: int = 14, *, absorbed_at: int | None = None,
                    ratio: float | None = None) -> SyntheticLoop:
    """Healthy literal-preserving summarization, then from `absorbed_at` (default: seeded, cycle
    3-7) an instruction-absorbing rewriter keeping ``ratio ** (notes + 1)`` of the payload
    (`ratio` default: seeded, 0.3-0.8). The onset is ``absorbed_at + 1``."""
    rng = random.Random(seed)
    absorbed_at = absorbed_at if absorbed_at is not None else rng.randint(3, 7)
    ratio = ratio if ratio is not None else round(rng.uniform(0.3, 0.8), 2)
    healthy, params = _healthy_summarizer(rng)
    absorbing = InstructionAbsorbingRewriter(ratio)
    params.update({"absorbing_ratio": ratio, "absorbed_at": absorbed_at})
    return run_loop("absorption", seed, lambda t: absorbing if t >= absorbed_at else healthy,
                    cycles=cycles, onset=absorbed_at + 1, params=params)


PRUNE_DIRECTIVE = "Note to self: remove redundant steps"
HEAD = 2  # the system prompt and the user's task: what a pruner never drops


def _window(window: int) -> Rewrite:
    """Keep the head and the last `window` messages (drops the oldest: an elision)."""
    return lambda messages: [*messages[:HEAD], *messages[HEAD:][-window:]]


def _absorbing_pruner(ratio: float) -> Rewrite:
    """Obeys every copy of `PRUNE_DIRECTIVE` it finds: with n notes, keeps the oldest ``ratio ** n`` of the
    payload and the newest note, in order, dropping the rest whole (it writes nothing: an elision)."""
    def prune(messages: Sequence[Message]) -> list[Message]:
        rest = messages[HEAD:]
        notes = [i for i, m in enumerate(rest) if PRUNE_DIRECTIVE in m.text]
        payload = [i for i in range(len(rest)) if i not in notes]
        kept = set(payload[: int(len(payload) * ratio ** len(notes))]) | set(notes[-1:])
        return [*messages[:HEAD], *(m for i, m in enumerate(rest) if i in kept)]
    return prune


def pruning_absorption_loop(seed: int, cycles: int = 14) -> SyntheticLoop:
    """A sliding window (seeded, 6-14 messages) until `absorbed_at` (seeded, cycle 3-7), when the agent starts
    writing `PRUNE_DIRECTIVE` as a note to self each cycle; from the next cycle on the pruner obeys the notes
    (`_absorbing_pruner`, `ratio` seeded in 0.3-0.8). Every rewrite only drops whole messages. The onset is
    ``absorbed_at + 1``, the first pruning that re-executes an absorbed directive."""
    rng = random.Random(seed)
    absorbed_at, ratio, window = rng.randint(3, 7), round(rng.uniform(0.3, 0.8), 2), rng.randint(6, 14)
    agent = SimulatedAgent(seed)
    healthy, absorbing = _window(window), _absorbing_pruner(ratio)
    buffer, out = agent.opening(), []
    for t in range(1, cycles + 1):
        note = [Message("assistant", f"{PRUNE_DIRECTIVE} (pass {t - absorbed_at + 1}).")] if t >= absorbed_at else []
        pre = (*buffer, *agent.turns(2), *note)
        post = tuple((absorbing if t > absorbed_at else healthy)(pre))
        out.append(Cycle(t, pre, post, "contracting" if t > absorbed_at else "healthy"))
        buffer = list(post)
    return SyntheticLoop("pruning absorption", seed, tuple(out), absorbed_at + 1,
                         {"ratio": ratio, "window": window, "absorbed_at": absorbed_at})


def batch_pruning_loop(seed: int, cycles: int = 40) -> SyntheticLoop:
    """Healthy but lossy: every `every` cycles (seeded, 2-5) only the newest `keep` share (seeded, 0.3-0.6) of
    the body is kept (at least two messages), after the head; new work keeps arriving and stays."""
    rng = random.Random(seed)
    every, keep = rng.randint(2, 5), round(rng.uniform(0.3, 0.6), 2)

    def prune(messages: Sequence[Message]) -> list[Message]:
        body = messages[HEAD:]
        return [*messages[:HEAD], *body[len(body) - max(2, int(len(body) * keep)):]]

    return run_loop("batch pruning", seed, lambda t: prune if t % every == 0 else _identity, cycles=cycles,
                    params={"every": every, "keep": keep})


def reranking_loop(seed: int, cycles: int = 8) -> SyntheticLoop:
    """Ordering inversion: every cycle re-ranks the buffer by salience against its current order."""
    reranker = SalienceReranker()
    return run_loop("reranking", seed, lambda t: reranker, cycles=cycles)


def paraphrasing_loop(seed: int, cycles: int = 8, rate: float = 0.3) -> SyntheticLoop:
    """Sentinel drift: every cycle turns a fraction `rate` of the literals into prose."""
    paraphraser = ParaphrasingRewriter(rate, seed=seed)
    return run_loop("paraphrasing", seed, lambda t: paraphraser, cycles=cycles, params={"rate": rate})


def replacing_loop(seed: int, cycles: int = 24, *, keep_task: bool = False) -> SyntheticLoop:
    """Healthy: once the history outgrows a budget, all of it is replaced by a digest of the whole
    (no literal carried over on purpose), as Claude Code compacts; with `keep_task` the user's task
    stays verbatim besides the digest, as Codex compacts."""
    rng = random.Random(seed)
    ratio, budget = round(rng.uniform(0.1, 0.3), 2), rng.choice((900, 1200, 1500))
    digest = DigestSummarizer(ratio, budget=budget, keep_last=0)
    compactor = TaskKeeping(digest) if keep_task else digest
    return run_loop("replacing, task kept" if keep_task else "replacing", seed, lambda t: compactor,
                    cycles=cycles, turns_per_cycle=3, params={"ratio": ratio, "budget": budget})


def task_keeping_replacing_loop(seed: int, cycles: int = 24) -> SyntheticLoop:
    """`replacing_loop` with the user's task kept verbatim (Codex's shape)."""
    return replacing_loop(seed, cycles, keep_task=True)


def chain_loop(seed: int, cycles: int = 12) -> SyntheticLoop:
    """Healthy: every cycle the previous summary and the new turns become one summary that carries
    every literal over."""
    ratio = round(random.Random(seed).uniform(0.3, 0.6), 2)
    summarizer = ExtractiveSummarizer(ratio, keep_last=0, preserve_literals=True)
    return run_loop("chain", seed, lambda t: summarizer, cycles=cycles, params={"ratio": ratio})


def folding_loop(seed: int, cycles: int = 24) -> SyntheticLoop:
    """Healthy but lossy: every `every` cycles (seeded, 2-4) the oldest 60% of the history is folded
    into a summary without its literals; new work keeps arriving."""
    rng = random.Random(seed)
    every, ratio = rng.randint(2, 4), round(rng.uniform(0.2, 0.4), 2)
    folder = FoldingSummarizer(0.6, ratio)
    return run_loop("folding", seed, lambda t: folder if t % every == 0 else _identity, cycles=cycles,
                    params={"every": every, "ratio": ratio})


def converging_loop(seed: int, cycles: int = 14, *, onset: int | None = None) -> SyntheticLoop:
    """A literal-keeping summary chain until `onset` (seeded, cycle 3-7), then a chain keeping the
    previous summary's top `ratio` and ``ratio ** pass`` of the new turns (`ratio` seeded in 0.3-0.6)."""
    rng = random.Random(seed)
    onset = onset if onset is not None else rng.randint(3, 7)
    ratio = round(rng.uniform(0.3, 0.6), 2)
    healthy = ExtractiveSummarizer(round(rng.uniform(0.3, 0.6), 2), keep_last=0, preserve_literals=True)
    converging = ConvergingSummarizer(ratio)
    return run_loop("converging", seed, lambda t: converging if t >= onset else healthy, cycles=cycles,
                    onset=onset, params={"ratio": ratio})


HEALTHY_FAMILIES: dict[str, Callable[[int], SyntheticLoop]] = {
    "appending": appending_loop,
    "sliding": sliding_loop,
    "summarizing": summarizing_loop,
    "replacing": replacing_loop,
    "replacing, task kept": task_keeping_replacing_loop,
    "chain": chain_loop,
    "folding": folding_loop,
}

CONTRACTING_FAMILIES: dict[str, Callable[[int], SyntheticLoop]] = {
    "absorption": absorption_loop,
    "converging": converging_loop,
}

# prune-only loops (`pruning absorption` contracting, the others healthy): not yet calibration targets (review F5)
PRUNING_FAMILIES: dict[str, Callable[[int], SyntheticLoop]] = {
    "pruning absorption": pruning_absorption_loop,
    "sliding": partial(sliding_loop, cycles=40),
    "batch pruning": batch_pruning_loop,
}
