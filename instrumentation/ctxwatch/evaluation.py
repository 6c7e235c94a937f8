"""`Evaluation`: everything one check of a proposed context computed, as one immutable value.

`ContextGuard` evaluates a proposal against its `ConsumedState` without side effects: the change,
the tool pairs after it, the orphans it introduces, the literal-set diff, the buffer fingerprint
after it and its distance d, the contraction alarm's preview, the residual pressure at the pass
cap, the findings and the decision. The decision is taken from it; only then does the guard's one
commit step advance its state (context, detector, pass count, provenance) from the same value.
`report` turns it into the `Report` the caller and telemetry read.
"""

from __future__ import annotations

from dataclasses import dataclass

from .contraction import CycleVerdict
from .diff import Change
from .fingerprint import BufferFingerprint
from .invariants.pairing import PairIndex
from .report import Decision, Finding, Report
from .state import ConsumedState


@dataclass(frozen=True)
class Evaluation:
    base: ConsumedState           # the state the proposal was evaluated against (advanced only by the commit)
    change: Change
    rewrite: bool                 # anything but growth with the same tools
    pairs_after: PairIndex
    orphans: tuple[tuple[str, ...], tuple[str, ...]]  # (calls without result, results without call)
    literals_before: int
    lost: frozenset[str]
    fp_after: BufferFingerprint | None
    distance: float | None
    verdict: CycleVerdict | None  # the contraction alarm's preview, when it was consulted
    pressure: int | None
    findings: tuple[Finding, ...]
    decision: Decision
    # an opaque rewrite (`ctxwatch.cycles`): the literals it hid, on the basis `literals_before` and `lost` count
    # (the alarm's downstream literals when the rewrite was measured, else every protected literal the
    # literal_loss check saw: `CycleFigures.hidden`, `LiteralDiff.hidden`); None: not one
    hidden: int | None = None
    cycle: bool = False           # a rewrite cycle of the alarm (`cycles.no_cycle_reason`)

    @property
    def halts_for_contraction(self) -> bool:
        """The alarm's own halt (not the reminder that the loop was halted earlier)."""
        return self.verdict is not None and any(
            f.invariant == "contraction" and f.action == "halt" for f in self.findings)

    def report(self, *, loop_id: str, agent: str | None, conversation_id: str | None, pass_number: int,
               pass_cap: int | None, contraction_state: str, episode: int) -> Report:
        change, base = self.change, self.base
        return Report(
            loop_id=loop_id, kind=change.kind, decision=self.decision, findings=list(self.findings),
            messages_before=len(base.context), messages_after=len(change.after),
            pass_number=pass_number, pass_cap=pass_cap, agent=agent, conversation_id=conversation_id,
            size_before=base.size,
            size_after=size_after(base, change),
            hash_distance=self.distance, literals_before=self.literals_before, literals_lost=len(self.lost),
            lost_literals=self.lost, orphans_tool_use=len(self.orphans[0]),
            orphans_tool_result=len(self.orphans[1]), contraction_state=contraction_state,
            residual_pressure=self.pressure, episode=episode, literals_hidden=self.hidden,
        )


def size_after(base: ConsumedState, change: Change) -> int:
    """The size of the proposal (`Message.size` summed), from the consumed size and what the change moves."""
    return base.size - sum(m.size for m in change.removed_messages) + sum(m.size for m in change.added_messages)
