"""What a guard check found: the findings of each invariant, the decision, and the figures.

A `Report` is the single value that leaves the guard for every mutation attempt. The agent
reads `.decision` and `.violations`; telemetry reads the counts and figures (never the text).

A finding's `message` never quotes a literal value or message text: it names invariants, message
indices, tool-call ids and counts, and describes literals by kind and length (``path, 29 chars``),
so it is safe in logs, exceptions and spans. `values` is the same message with the values, shown
only on request (`Report.explain(values=True)`) or with content capture on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["patch", "defer", "abort", "halt"]
DECISIONS: tuple[str, ...] = ("patch", "defer", "abort", "halt")
_SEVERITY = {"patch": 0, "defer": 1, "abort": 2, "halt": 3}

MUTATION_KINDS: tuple[str, ...] = (
    "append", "compact", "prune", "rewrite", "rerank", "system_patch", "schema_change", "self_edit",
)

# The kinds that shrink history: an applied one marks the conversation compacted (telemetry) and is the
# kind a deferral may carry out as whole-pair compaction (config, deferral "auto").
COMPACTION_KINDS: frozenset[str] = frozenset({"compact", "prune"})

INVARIANTS: tuple[str, ...] = (
    "prefix_identity", "tool_pairing", "schema_version", "rerender", "policy_isolation", "pass_cap",
    "directive_colocation", "literal_loss", "order", "idempotence", "plan_reference", "barrier",
    "contraction",
)

# What a finding does to the decision: refuse by deferring, refuse by aborting, halt the loop,
# or only report (the mutation goes ahead; the finding is counted and visible).
Action = Literal["defer", "abort", "halt", "warn"]


def stricter(a: Decision, b: Decision) -> Decision:
    """The more severe of two decisions (patch < defer < abort < halt)."""
    return a if _SEVERITY[a] >= _SEVERITY[b] else b


@dataclass(frozen=True)
class Finding:
    """One invariant's verdict on one mutation: which invariant, what it saw, and what it does."""

    invariant: str
    message: str
    action: Action = "abort"
    details: dict[str, Any] = field(default_factory=dict)
    values: str | None = None  # the message quoting the values it describes (None: `message` quotes none)

    def text(self, values: bool = False) -> str:
        """The message, with the values it describes when `values` is true."""
        return self.values if values and self.values is not None else self.message

    @property
    def enforced(self) -> bool:
        return self.action != "warn"


@dataclass
class Report:
    """The outcome of `ContextGuard.check` for one proposed mutation."""

    loop_id: str
    kind: str
    decision: Decision
    findings: list[Finding]
    messages_before: int
    messages_after: int
    pass_number: int
    pass_cap: int | None
    agent: str | None = None
    conversation_id: str | None = None
    size_before: int = 0
    size_after: int = 0
    hash_distance: float | None = None
    literals_before: int = 0
    literals_lost: int = 0
    lost_literals: frozenset[str] = frozenset()
    # an opaque rewrite (a provider compaction the guard cannot read): the downstream literals it took out of
    # view, unknown rather than lost (literals_lost 0, no hash distance, not a detector cycle); None: not one
    literals_hidden: int | None = None
    orphans_tool_use: int = 0
    orphans_tool_result: int = 0
    contraction_state: str = "healthy"
    residual_pressure: int | None = None
    deferred_id: int | None = None
    resolution: str | None = None   # how a deferred rewrite was settled: "whole_pairs" (applied as whole-pair
                                    # compaction), "in_place" (a pruning that only clears consumed tool
                                    # results, applied as it is), "provider_compaction" (consumed messages
                                    # replaced by an opaque provider compaction, applied as it is) or
                                    # "session_boundary" (applied whole, a new episode begun)
    shadow: bool = False            # report-only mode: the decision is what the guard would have done
    observed: bool = False          # a change the guard found already made (observe): reported, not refused
    episode: int = 0                # how many episodes the guard started (session boundaries, new_episode)
    detector_run: int = 0           # how many times `ContextGuard.new_episode` started the detector afresh
    duration_s: float = 0.0
    # what the change the agent now uses cost the provider's prompt cache (`ctxwatch.cache`): consumed
    # characters from its first difference to the boundary, and their estimated tokens; 0 when not applied
    invalidated_chars: int = 0
    invalidated_tokens: int = 0
    # the provider's own figures for the response observed before this report (None: not reported)
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    # the agent's own count of its context's tokens before the mutation, when its session file records it
    # (Claude Code's preTokens; set by replay --otlp and ctxwatch watch)
    tokens_before: int | None = None

    @property
    def violations(self) -> list[str]:
        """Invariant ids whose findings refused or halted this mutation, in a stable order."""
        return _ordered_ids(f.invariant for f in self.findings if f.enforced)

    @property
    def warnings(self) -> list[str]:
        """Invariant ids that were found but only reported (the mutation was not refused for them)."""
        return _ordered_ids(f.invariant for f in self.findings if not f.enforced)

    def explain(self, values: bool = False) -> str:
        """One human-readable paragraph: the decision, then each finding's message. Literal values
        are described by kind and length unless `values` is true."""
        would = "would " if self.shadow else ""
        head = f"ctxwatch {would}{self.decision}: {self.kind} on loop {self.loop_id}"
        if self.shadow:
            head += " (shadow mode: nothing was changed or refused)"
        if not self.findings:
            return head + " (no findings)"
        lines = [head] + [f"  [{f.invariant}/{f.action}] {f.text(values)}" for f in self.findings]
        return "\n".join(lines)


def _ordered_ids(ids) -> list[str]:
    seen = set(ids)
    return [i for i in INVARIANTS if i in seen]
