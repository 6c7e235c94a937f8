"""Opt-in content capture: what leaves the process only when the operator asks for it.

Off by default. It follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``,
``SPAN_ONLY`` or ``SPAN_AND_EVENT``; ctxwatch has no log events, so ``EVENT_ONLY`` captures
nothing). When on, the span additionally carries:

- ``ctxwatch.literals.lost_values``: the protected literals the rewrite would drop, sorted, at
  most `semconv.MAX_CAPTURED_LITERALS` of them;
- one ``ctxwatch.guard.finding`` span event per finding, with the invariant id, the action and
  the guard's message quoting the values it describes (symbols, literal values).

Message text, tool arguments and tool results are never captured, with capture on or off.
"""

from __future__ import annotations

from typing import Any

from .. import semconv
from ..report import Report


def lost_literal_attributes(report: Report) -> dict[str, Any]:
    """The captured lost literal values (empty when none were lost)."""
    if not report.lost_literals:
        return {}
    return {semconv.LOST_LITERAL_VALUES: sorted(report.lost_literals)[: semconv.MAX_CAPTURED_LITERALS]}


def add_finding_events(span: Any, report: Report) -> None:
    """One span event per finding: invariant id, action, and the guard's message."""
    for finding in report.findings:
        span.add_event(semconv.FINDING_EVENT, {
            semconv.FINDING_INVARIANT: finding.invariant,
            semconv.FINDING_ACTION: finding.action,
            semconv.FINDING_MESSAGE: finding.text(values=True),
        })
