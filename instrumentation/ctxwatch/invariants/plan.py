"""Record 004: pending plan steps, the symbols they reference, and the rewrite barrier.

A plan is a list of steps; each pending step references symbols (given explicitly, or read from
its text). Before a rewrite is applied, the symbols it would alter are intersected with the
symbols pending steps reference; a non-empty intersection refuses the rewrite, naming the
dangling symbols and the steps that use them, with two ways out: pin the symbols (keep their
defining lines verbatim) or invalidate the steps and rebuild the plan.

The barrier: no rewrite while a tool call is in flight or a write is pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..literals import LiteralRegistry
from ..model import Message
from ..redaction import shown
from ..report import Finding
from .references import SymbolIndex, extract_symbols

StepStatus = Literal["pending", "done", "invalidated"]


@dataclass(frozen=True)
class PlanStep:
    """One step of the agent's plan. `refs` are the symbols it consumes; read from `text` when omitted."""

    id: str
    text: str = ""
    refs: frozenset[str] | None = None
    status: StepStatus = "pending"


@dataclass
class Plan:
    """The agent's plan as the guard tracks it."""

    literals: LiteralRegistry
    steps: list[PlanStep] = field(default_factory=list)

    def set(self, steps: Iterable[PlanStep | str]) -> None:
        """Replace the plan; plain strings become steps numbered from 1."""
        self.steps = [s if isinstance(s, PlanStep) else PlanStep(id=str(i), text=s)
                      for i, s in enumerate(steps, 1)]
        self.steps = [s if s.refs is not None else replace(s, refs=extract_symbols(s.text, self.literals))
                      for s in self.steps]
        ids = [s.id for s in self.steps]
        if len(ids) != len(set(ids)):
            raise ValueError(f"plan step ids must be unique, got {ids}")

    def _mark(self, step_ids: Iterable[str], status: StepStatus) -> None:
        wanted = set(step_ids)
        unknown = wanted - {s.id for s in self.steps}
        if unknown:
            raise KeyError(f"no plan step with id {sorted(unknown)}")
        self.steps = [replace(s, status=status) if s.id in wanted else s for s in self.steps]

    def complete(self, *step_ids: str) -> None:
        self._mark(step_ids, "done")

    def invalidate(self, *step_ids: str) -> None:
        """Mark steps invalidated: their references no longer hold a rewrite back; rebuild them."""
        self._mark(step_ids, "invalidated")

    def live_refs(self) -> dict[str, list[str]]:
        """symbol -> ids of the pending steps that reference it."""
        out: dict[str, list[str]] = {}
        for s in self.steps:
            if s.status == "pending":
                for ref in s.refs or ():
                    out.setdefault(ref, []).append(s.id)
        return out


def check_plan(plan: Plan, index: SymbolIndex, removed: Sequence[Message],
               added: Sequence[Message]) -> list[Finding]:
    """A finding naming the dangling symbols and their steps, if the rewrite alters any live reference."""
    refs = plan.live_refs()
    if not refs or not removed:
        return []
    dangling = index.dangling(list(refs), removed, added, literals=plan.literals)
    if not dangling:
        return []
    steps = sorted({sid for s in dangling for sid in refs[s]})

    def message(quoted: bool) -> str:
        named = "; ".join(f"{shown(s, quoted=quoted)} ({why.text(quoted)}; used by step "
                          f"{', '.join(refs[s])})" for s, why in sorted(dangling.items()))
        return (f"the rewrite alters {len(dangling)} symbols pending plan steps reference: {named}. Pin them "
                "(guard.pin_symbols(proposed, error.dangling) keeps their defining lines verbatim) or "
                f"invalidate steps {steps} (guard.plan.invalidate(...)) and rebuild the plan before resuming.")

    return [Finding("plan_reference", message(False), details={"symbols": sorted(dangling), "steps": steps},
                    values=message(True))]


def check_barrier(pending_calls: Iterable[str], in_flight: Sequence[str], is_append: bool) -> list[Finding]:
    """A finding when a non-append rewrite is attempted while a call or a write is in flight."""
    pending = sorted(pending_calls)
    if is_append or not (pending or in_flight):
        return []
    what = []
    if pending:
        what.append(f"tool calls awaiting results {pending}")
    if in_flight:
        what.append(f"operations in flight {list(in_flight)}")
    return [Finding(
        "barrier",
        "no rewrite while a plan step is executing: " + " and ".join(what)
        + ". Append the results (or finish the writes) first, then rewrite.",
        details={"pending_calls": pending, "in_flight": list(in_flight)},
    )]


def pin_lines(removed: Sequence[Message], symbols: Iterable[str]) -> list[str]:
    """The lines of removed messages that mention each symbol, verbatim, in first-seen order."""
    wanted = list(symbols)
    lines: list[str] = []
    seen: set[str] = set()
    for m in removed:
        for line in m.text.splitlines():
            if line not in seen and any(s in line for s in wanted):
                seen.add(line)
                lines.append(line)
    return lines
