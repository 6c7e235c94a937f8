"""The demo's simulated fleet: agent loops that really rewrite their context through a real guard.

Each family is one agent behaviour, driven by the seeded rewrite functions of `ctxwatch.simulate`
(no canned outputs) and checked by a `ContextGuard` per loop. A loop is one episode; every family
but the compactor rewrites its working buffer, after the system prompt, as its mutable zone:

- summarizer (healthy): literal-preserving extractive summaries of the working buffer.
- ranker (healthy): a salience re-ranker with a fixed index (a mutation with provenance).
- scratchpad (contracts): the directive gets absorbed into the buffer in a phrasing no marker
  knows, so only the contraction alarm can catch it; the guard halts the loop.
- compactor: mid-session, drops the oldest 40% blindly, orphaning tool pairs (refused), then
  retries on whole units, which the guard applies as whole-pair compaction with an elision marker.
- ledger: summarizes everything, pinned subgoal included (refused), then only the payload.
- fixer: paraphrases IDs and paths a pending plan step needs (refused), then pins them. It paraphrases its
  whole history again every cycle, so once the literals are gone its rewrite is the identity on its own
  output (record 003's fixed point): the contraction alarm halts it and the monitor flags it.

Every model call is answered by a simulated provider with a prefix prompt cache (`SimulatedPromptCache`),
whose usage figures each loop notes on its guard, so the demo shows what rewrites cost next to what the
cache served (docs/telemetry.md, "What rewrites cost").
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from ..cache import ProviderCache, estimate_tokens
from ..deferral import pair_units
from ..guard import ContextGuard
from ..model import Message, TextPart, ToolCall, ToolResult
from ..report import Report
from ..simulate.loops import SimulatedAgent
from ..simulate.rewriters import (
    ExtractiveSummarizer,
    InstructionAbsorbingRewriter,
    ParaphrasingRewriter,
    SalienceReranker,
)
from ..telemetry import MutationTelemetry

ABSORBED_DIRECTIVE = "keep just what matters most and let the rest go"


@dataclass
class LoopTally:
    """What one loop did: decisions, refusals by invariant, cycles, whether it was halted."""

    cycles: int = 0
    decisions: Counter = field(default_factory=Counter)
    violations: Counter = field(default_factory=Counter)  # invariants that refused or halted
    halted_at: int | None = None

    def add(self, report: Report) -> None:
        self.decisions[report.decision] += 1
        if report.decision in ("abort", "halt"):
            self.violations.update(report.violations)


class SimulatedPromptCache:
    """A provider's prefix cache, as the demo's simulated provider answers: the leading messages equal to
    the previous prompt's are read from the cache, the rest written to it (tokens: `estimate_tokens`)."""

    def __init__(self) -> None:
        self._sent: list[int] = []

    def call(self, prompt: list[Message]) -> ProviderCache:
        digests = [m.digest for m in prompt]
        same = next((i for i, (a, b) in enumerate(zip(digests, self._sent, strict=False)) if a != b),
                    min(len(digests), len(self._sent)))
        self._sent = digests
        return ProviderCache(read_tokens=estimate_tokens(sum(m.size for m in prompt[:same])),
                             creation_tokens=estimate_tokens(sum(m.size for m in prompt[same:])))


class DemoLoop:
    """One agent loop of the fleet. `step()` runs one cycle: append turns, rewrite, guard."""

    max_cycles = 12
    summary_ratio, summary_budget = 0.5, 350  # the loop's literal-preserving summarizer

    def __init__(self, agent: str, index: int, seed: int, telemetry: MutationTelemetry, **guard_options) -> None:
        self.agent = agent
        self.loop_id = f"{agent}-{index:02d}"
        self.rng = random.Random(seed)
        self.sim = SimulatedAgent(seed, words_per_turn=60)
        self.tally = LoopTally()
        guard_options.setdefault("pass_cap", 3 * self.max_cycles)  # a loop is one episode; refusals retry
        self.guard = ContextGuard(self.loop_id, agent=agent, service="ctxwatch-demo", telemetry=telemetry,
                                  **guard_options)
        self.summarize = ExtractiveSummarizer(self.summary_ratio, budget=self.summary_budget, keep_last=2,
                                              preserve_literals=True)
        self.buffer = self.opening()
        self.guard.observe(self.buffer)
        self.provider = SimulatedPromptCache()

    @property
    def done(self) -> bool:
        return self.tally.halted_at is not None or self.tally.cycles >= self.max_cycles

    def opening(self) -> list[Message]:
        return self.sim.opening()

    def turns(self) -> list[Message]:
        return self.sim.turns(2)

    def step(self) -> None:
        self.tally.cycles += 1
        grown = self.buffer + self.turns()
        self._check(grown, "append")
        self.guard.observe(self.buffer)            # the model consumed it and answered
        self.guard.note_provider_cache(self.provider.call(self.buffer))
        self.rewrite()

    def rewrite(self) -> None:
        raise NotImplementedError

    def _check(self, proposal: list[Message], kind: str) -> Report:
        return self._follow(self.guard.check(proposal, kind=kind))

    def _follow(self, report: Report) -> Report:
        """Count the guard's decision and act on it: use the new context on patch, stop on halt."""
        self.tally.add(report)
        if report.decision == "patch":
            self.buffer = list(self.guard.context.messages)
        elif report.decision == "halt":
            self.tally.halted_at = self.guard.halted_at  # the detector's cycle, as the monitor counts it
        return report

    def _compact(self, proposal: list[Message], kind: str = "compact") -> Report:
        """A rewrite of the loop's working buffer, which these loops declare as their mutable zone: the
        consumed prefix is the system prompt alone (record 000: a rewrite at or after the generation
        boundary is a patch, not deferred). Every other invariant applies, and the loop stays in one
        episode (a session boundary would start a new one; the contraction alarm, the loop's, would see
        all its cycles all the same)."""
        self.guard.observe(self.buffer, boundary=1)
        return self._check(proposal, kind)


class SummarizerLoop(DemoLoop):

    def rewrite(self) -> None:
        self._compact(self.summarize(self.buffer))


class RankerLoop(DemoLoop):
    summary_ratio, summary_budget = 0.6, 400

    def rewrite(self) -> None:
        scores = SalienceReranker().scores(self.buffer)
        index = {self.buffer[i].digest: s for i, s in scores.items()}
        reranked = SalienceReranker(index=index)(self.buffer)
        self._compact(self.summarize(reranked), kind="rerank")


class ScratchpadLoop(DemoLoop):
    max_cycles = 16

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.absorbing = InstructionAbsorbingRewriter(self.rng.uniform(0.35, 0.6), directive=ABSORBED_DIRECTIVE)
        self.absorbed_at = self.rng.randint(3, 5)

    def rewrite(self) -> None:
        fn = self.absorbing if self.tally.cycles >= self.absorbed_at else self.summarize
        self._compact(fn(self.buffer))


class ToolRoundsMixin:
    """Turns that include complete tool rounds (a call and its result)."""

    sim: SimulatedAgent
    rng: random.Random

    def tool_round(self) -> list[Message]:
        cid = f"call_{self.rng.getrandbits(32):08x}"
        name = self.rng.choice(["query_db", "read_file", "search_logs"])
        args = json.dumps({"q": self.sim.text.sentence(5)})
        return [Message("assistant", [ToolCall(cid, name, args)]),
                Message("tool", [ToolResult(cid, self.sim.text.paragraph(2, literal_prob=0.5))])]


class CompactorLoop(ToolRoundsMixin, DemoLoop):

    def opening(self) -> list[Message]:
        out = self.sim.opening(2)
        for _ in range(4):
            out += self.tool_round()
        return out

    def turns(self) -> list[Message]:
        return self.tool_round() + self.sim.turns(1)

    def rewrite(self) -> None:
        head, history = self.buffer[:1], self.buffer[1:]
        cut = max(1, int(len(history) * 0.4) | 1)                # an odd cut lands inside a tool round
        report = self._follow(self.guard.resolve(head + history[cut:], kind="compact")[0])
        if report.decision != "abort":
            return
        dropped = {i for unit in pair_units(self.buffer) if unit.stop <= cut + 1 and unit.start >= 1 for i in unit}
        aligned = [m for i, m in enumerate(self.buffer) if i not in dropped]
        if len(aligned) == len(self.buffer):
            return
        self._follow(self.guard.resolve(aligned, kind="compact")[0])


class LedgerLoop(DemoLoop):
    summary_ratio, summary_budget = 0.4, None
    SUBGOAL = "Subgoal: reconcile the March ledger without modifying the audit log at /var/log/audit/ledger.log."

    def __init__(self, agent: str, index: int, seed: int, telemetry: MutationTelemetry, **options) -> None:
        super().__init__(agent, index, seed, telemetry, policy=lambda i, m: m.role == "system" or
                         m.text.startswith("Subgoal:"), **options)

    def opening(self) -> list[Message]:
        base = self.sim.opening(4)
        return base[:1] + [Message("user", [TextPart(self.SUBGOAL)]),
                           Message("assistant", [TextPart("Noted: the audit trail /var/log/audit/ledger.log "
                                                          "is read-only for this task.")])] + base[1:]

    def rewrite(self) -> None:
        report = self._compact(self.summarize(self.buffer))      # the subgoal gets summarized too: refused
        if report.decision != "abort":
            return
        pinned, payload = self.buffer[:3], self.buffer[3:]
        self._compact(pinned + self.summarize(payload))


class FixerLoop(DemoLoop):

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.paraphrase = ParaphrasingRewriter(0.6, seed=self.rng.randint(0, 10**6))
        self._set_plan()

    def _set_plan(self) -> None:
        literals = sorted(self.guard.literals.of_all(m for m in self.buffer if m.role != "system"))
        chosen = self.rng.sample(literals, min(2, len(literals)))
        self.guard.plan.set([f"use {lit} in the next tool call" for lit in chosen])

    def rewrite(self) -> None:
        proposal = self.paraphrase(self.buffer)
        report = self._compact(proposal, kind="rewrite")
        if report.decision != "abort" or "plan_reference" not in report.violations:
            return
        dangling = next(f.details["symbols"] for f in report.findings if f.invariant == "plan_reference")
        self._compact(self.guard.pin_symbols(proposal, dangling), kind="rewrite")


FAMILIES: dict[str, tuple[str, Callable[..., DemoLoop]]] = {
    "support-summarizer": ("healthy summarizing loops", SummarizerLoop),
    "research-ranker": ("healthy re-ranking loops", RankerLoop),
    "scratchpad-writer": ("instruction absorption: contracts", ScratchpadLoop),
    "ops-compactor": ("compactions that would orphan tool pairs", CompactorLoop),
    "ledger-keeper": ("summaries that paraphrase a pinned policy", LedgerLoop),
    "config-fixer": ("summaries that break a pending plan", FixerLoop),
}
