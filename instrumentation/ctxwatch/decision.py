"""From findings to a decision: the enforcement table and record 000's precedence.

Each invariant has an action (defer, abort, halt, warn, or off to skip the check); the defaults
follow the records and every entry can be overridden per guard. The decision is the most severe
action among the findings: halt > abort > defer > patch. A finding its check already marked
`warn` (a pre-existing orphan, a tool never offered) stays a warning whatever the table says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import cast

from .errors import (
    ContextRewriteInvalidatesPlanError,
    ContractionRegimeError,
    NonIdempotentRewriteError,
    NonMonotonicRewriteError,
    OrphanedToolPairError,
    PassCapReachedError,
    PolicyMutationError,
)
from .report import INVARIANTS, Action, Decision, Finding, stricter

DEFAULT_ENFORCEMENT: dict[str, str] = {
    "prefix_identity": "defer",       # record 000: alters the consumed prefix, no pair straddles: defer
    "tool_pairing": "abort",          # record 000: would orphan a call or result
    "schema_version": "abort",        # record 000: drops a schema pending history references
    "rerender": "abort",              # record 000: re-render not byte-stable; a broken renderer is not deferrable
    "policy_isolation": "abort",      # record 001
    "pass_cap": "abort",              # record 001: rewrites in a row with no new turn (a runaway)
    "directive_colocation": "abort",  # record 003: a stop signal
    "literal_loss": "warn",           # record 003: measured on every rewrite and fed to the alarm; refusal is
                                      # targeted (plan references, policy referents) unless set to abort
    "order": "abort",                 # record 003: a non-rerank rewrite must keep relative order
    "idempotence": "abort",           # record 003: offline re-application test (ctxwatch check-idempotence);
                                      # no knob in the guard, which never runs it
    "plan_reference": "abort",        # record 004
    "barrier": "abort",               # record 004
    "contraction": "halt",            # record 003: the loop must be halted
}

# One knob per invariant, and only the values that change what the guard does. "halt" stops the loop
# until `new_episode()`, which only the contraction alarm does; "defer" queues the rewrite until a
# session boundary (or turns it into whole-pair compaction), which only makes sense where the
# rewrite may become acceptable later: once the consumed prefix is no longer consumed, or once the
# call or write in flight has finished.
ALLOWED_ACTIONS: dict[str, tuple[str, ...]] = {
    invariant: ("abort", "warn", "off") for invariant in DEFAULT_ENFORCEMENT
}
ALLOWED_ACTIONS.update({
    "prefix_identity": ("defer", "abort", "warn", "off"),
    "barrier": ("defer", "abort", "warn", "off"),
    "contraction": ("halt", "warn", "off"),
    "idempotence": (),
})

# The error a refusal raises, by the invariant that caused it (first enforced finding wins).
ERROR_FOR: dict[str, type[NonMonotonicRewriteError]] = {
    "prefix_identity": NonMonotonicRewriteError,
    "tool_pairing": OrphanedToolPairError,
    "schema_version": OrphanedToolPairError,
    "rerender": NonMonotonicRewriteError,
    "policy_isolation": PolicyMutationError,
    "pass_cap": PassCapReachedError,
    "directive_colocation": NonIdempotentRewriteError,
    "literal_loss": NonIdempotentRewriteError,
    "order": NonIdempotentRewriteError,
    "idempotence": NonIdempotentRewriteError,
    "plan_reference": ContextRewriteInvalidatesPlanError,
    "barrier": ContextRewriteInvalidatesPlanError,
    "contraction": ContractionRegimeError,
}


def enforcement_table(overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The default table with `overrides` applied; unknown invariants or actions are rejected."""
    table = dict(DEFAULT_ENFORCEMENT)
    for invariant, action in (overrides or {}).items():
        if invariant not in INVARIANTS:
            raise ValueError(f"enforce: unknown invariant {invariant!r} (known: {', '.join(INVARIANTS)})")
        allowed = ALLOWED_ACTIONS[invariant]
        if not allowed:
            raise ValueError(f"enforce[{invariant!r}]: the guard does not run this check (it is the offline "
                             "`ctxwatch check-idempotence`), so no action can be set for it")
        if action not in allowed:
            raise ValueError(f"enforce[{invariant!r}]: {action!r} is not an action of this invariant "
                             f"(allowed: {', '.join(allowed)})")
        table[invariant] = action
    return table


def apply_table(findings: list[Finding], table: Mapping[str, str]) -> list[Finding]:
    """Give each finding its table action. The table sets the floor: a check that asked for more
    (an untrusted self-edit aborts where a prefix change would defer; a failed check aborts) keeps
    it; "warn" relaxes a finding to a warning; a check's own warnings stay warnings."""
    out = []
    for f in findings:
        action = table.get(f.invariant, "abort")
        if action == "off":
            continue
        if f.action != "warn":
            wanted = cast(Action, "warn" if action == "warn" else stricter(cast(Decision, action), f.action))
            if wanted != f.action:
                f = replace(f, action=wanted)
        out.append(f)
    return out


def decide(findings: list[Finding]) -> Decision:
    decision: Decision = "patch"
    for f in findings:
        if f.action != "warn":
            decision = stricter(decision, f.action)
    return decision


def error_for(findings: list[Finding], decision: Decision) -> type[NonMonotonicRewriteError]:
    """The record's error class for a refusal: that of the first finding carrying the decision."""
    for f in findings:
        if f.action == decision:
            return ERROR_FOR.get(f.invariant, NonMonotonicRewriteError)
    return NonMonotonicRewriteError
