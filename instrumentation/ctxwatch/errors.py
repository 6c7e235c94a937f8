"""The error hierarchy the design records name, and errors for unusable input.

`NonMonotonicRewriteError` is the root of every refusal; each subclass keeps the name its record
gave it. A refusal carries the guard's full report, so a caller that catches it can read which
invariant failed, on which ids, spans or symbols, and what to do next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .report import Report


class NonMonotonicRewriteError(RuntimeError):
    """A rewrite was refused: it would alter the consumed prefix or break an invariant."""

    def __init__(self, message: str, report: Report | None = None) -> None:
        super().__init__(message)
        self.report = report


class OrphanedToolPairError(NonMonotonicRewriteError):
    """The rewrite would drop a tool_use or tool_result without its partner (record 000)."""


class PolicyMutationError(NonMonotonicRewriteError):
    """The rewrite touches, moves or paraphrases the pinned policy region, or the pass cap is reached (record 001)."""


class PassCapReachedError(PolicyMutationError):
    """The pinned pass cap is reached: the loop rewrote its context again and again with no new turn in
    between (record 001's runaway). Not a problem with the system prompt: stop compacting until new work
    arrives, give the context more room, or start a new episode."""

    @property
    def residual_pressure(self) -> int | None:
        """Characters over the budget when the cap was reached (None when no budget was given)."""
        return self.report.residual_pressure if self.report is not None else None


class NonIdempotentRewriteError(NonMonotonicRewriteError):
    """The rewrite loses protected literals, absorbs its directive, reorders what it keeps, or is not
    stable under re-application (record 003)."""


class ContextRewriteInvalidatesPlanError(NonMonotonicRewriteError):
    """The rewrite alters symbols a pending plan step references, or runs while a call is in flight (record 004)."""

    @property
    def dangling(self) -> list[str]:
        """The symbols the rewrite would leave dangling."""
        if self.report is None:
            return []
        return sorted({s for f in self.report.findings if f.invariant == "plan_reference"
                       for s in f.details.get("symbols", [])})


class ContractionRegimeError(NonMonotonicRewriteError):
    """The loop is in the contraction regime: consecutive rewrites converge while literals are lost (record 003)."""


class InvalidContextError(ValueError):
    """Input that cannot be read as a context: names the message index and field that is wrong."""

    def __init__(self, reason: str, *, index: int | None = None, field: str | None = None,
                 source: str | None = None) -> None:
        where = []
        if source:
            where.append(source)
        if index is not None:
            where.append(f"message {index}")
        if field:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)
        self.reason = reason
        self.index = index
        self.field = field
        self.source = source
