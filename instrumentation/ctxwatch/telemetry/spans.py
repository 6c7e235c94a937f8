"""What goes on the mutation span: attributes at start, attributes and status from the report.

Span status: a refusal is the guard doing its job, so only the outcomes that end the mutation
attempt in an error the agent sees are errors. `abort` and `halt` set status ERROR, `error.type`
(the class name of the error the guard raises) and a description made of invariant ids only.
`patch` and `defer` leave the status UNSET: a deferral is a handled outcome (the rewrite is
queued and applied later), which OpenTelemetry's error-recording guidance says not to record as
an error. The decision itself is always in ``ctxwatch.decision``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import semconv
from ..decision import error_for
from ..report import Report

_REFUSED_WITH_ERROR = frozenset({"abort", "halt"})


def start_attributes(names: semconv.GenAINames, *, loop_id: str | None, kind: str, pass_number: int,
                     pass_cap: int | None, agent: str | None, conversation_id: str | None,
                     service: str | None) -> dict[str, Any]:
    """The attributes known before the checks run (set at span start, visible to samplers)."""
    attrs: dict[str, Any] = {semconv.MUTATION_KIND: kind, semconv.PASS_NUMBER: pass_number}
    if loop_id:
        attrs[semconv.LOOP_ID] = loop_id
    if pass_cap is not None:
        attrs[semconv.PASS_CAP] = pass_cap
    if service:
        attrs[semconv.SERVICE_NAME] = service
    if agent:
        attrs[names.agent_name] = agent
    if conversation_id:
        attrs[names.conversation_id] = conversation_id
    return attrs


def end_attributes(names: semconv.GenAINames, report: Report, error_type: str | None,
                   started: Mapping[str, Any]) -> dict[str, Any]:
    """Every attribute the report carries (counts, sizes, ids of invariants; never content).
    Kind, pass number and cap are set again only where the report differs from `started`."""
    findings = bool(report.findings)
    attrs: dict[str, Any] = {
        semconv.DECISION: report.decision,
        semconv.LITERALS_BEFORE: report.literals_before,
        semconv.LITERALS_LOST: report.literals_lost,
        semconv.ORPHANS_TOOL_USE: report.orphans_tool_use,
        semconv.ORPHANS_TOOL_RESULT: report.orphans_tool_result,
        semconv.VIOLATIONS: report.violations if findings else [],
        semconv.WARNINGS: report.warnings if findings else [],
        semconv.CONTRACTION_STATE: report.contraction_state,
        semconv.MESSAGES_BEFORE: report.messages_before,
        semconv.MESSAGES_AFTER: report.messages_after,
        semconv.SIZE_BEFORE: report.size_before,
        semconv.SIZE_AFTER: report.size_after,
    }
    for key, value in ((semconv.MUTATION_KIND, semconv.bounded_kind(report.kind)),
                       (semconv.PASS_NUMBER, report.pass_number), (semconv.PASS_CAP, report.pass_cap)):
        if value is not None and started.get(key) != value:
            attrs[key] = value
    if report.hash_distance is not None:
        attrs[semconv.HASH_DISTANCE] = float(report.hash_distance)
    if report.residual_pressure is not None:
        attrs[semconv.RESIDUAL_PRESSURE] = report.residual_pressure
    if report.deferred_id is not None and report.decision == "defer":
        attrs[semconv.DEFERRAL_ID] = report.deferred_id
    if report.resolution is not None:
        attrs[semconv.DEFERRAL_RESOLUTION] = report.resolution
    if report.observed:
        attrs[semconv.OBSERVED] = True
    if report.decision == "patch" and report.kind in semconv.COMPACTION_KINDS:
        attrs[names.conversation_compacted] = True
    if error_type is not None:
        attrs[names.error_type] = error_type
    return attrs


def error_type(report: Report) -> str | None:
    """The class name of the error the guard raises for this report (abort, halt), else None."""
    if report.decision not in _REFUSED_WITH_ERROR:
        return None
    return error_for(report.findings, report.decision).__name__


def status_description(decision: str, violations: list[str]) -> str:
    """The ERROR status description: the decision and invariant ids (no content, bounded)."""
    return f"{decision}: {', '.join(violations) or 'no invariant named'}"
