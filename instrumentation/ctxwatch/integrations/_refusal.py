"""What an integration does with the guard's decision on a framework's edit.

The guard decides; the integration carries it out in the framework's terms. ``patch``: the edit
stands (also when the guard settled it as it is: a pruning that clears consumed tool results in
place). ``defer``: what `ContextGuard.resolve` settles on (by default, for compactions and pruning, the
guard's whole-pair compaction of the edit with its elision marker, in the same attempt; for other
edits the current context, the edit queued for the next session boundary).
``abort`` / ``halt``: the guard's current context stays and, with ``on_refusal="raise"``, the
record's typed error is raised (its message names the invariant, the ids, the provider error it
avoids, and what to do); with ``on_refusal="keep"`` the refusal is only reported. In shadow mode the
edit always stands and nothing is raised; the span says what the guard would have done.
"""

from __future__ import annotations

from typing import Any

from ..decision import error_for
from ..guard import ContextGuard
from ..report import Report


def settle(guard: ContextGuard, proposal: Any, **options: Any) -> tuple[Report, Any | None]:
    """Check an edit the framework made: ``(report, kept)`` where `kept` is None when the edit stands
    (patch, in place or as the provider made it), else the context to use instead, in the caller's
    format (see `ContextGuard.resolve`)."""
    report, context = guard.resolve(proposal, **options)
    edit_stands = report.shadow or (report.decision == "patch"
                                    and report.resolution in (None, "in_place", "provider_compaction"))
    return report, None if edit_stands else context


def raise_refusal(report: Report, on_refusal: str) -> None:
    """Raise the record's typed error for an abort or halt when `on_refusal` is ``"raise"``."""
    if on_refusal == "raise" and report.decision in ("abort", "halt") and not report.shadow:
        raise error_for(report.findings, report.decision)(report.explain(), report)
