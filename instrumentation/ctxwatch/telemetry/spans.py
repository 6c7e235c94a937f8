"""What goes on the mutation span: the attributes the caller gave at start, the report's, and the status.

Span status: a refusal is the guard doing its job, so only the outcomes that end the mutation
attempt in an error the agent sees are errors. `abort` and `halt` set status ERROR, `error.type`
(the class name of the error the guard raises) and a description made of invariant ids only.
`patch` and `defer` leave the status UNSET: a deferral is a handled outcome (the rewrite is
queued and applied later), which OpenTelemetry's error-recording guidance says not to record as
an error. The decision itself is always in ``ctxwatch.decision``.
"""

from __future__ import annotations

from typing import Any

from .. import semconv
from ..decision import error_for
from ..report import Report

_REFUSED_WITH_ERROR = frozenset({"abort", "halt"})


def start_attributes(names: semconv.GenAINames, *, loop_id: str | None, kind: str, pass_number: int,
                     pass_cap: int | None, agent: str | None, conversation_id: str | None,
                     service: str | None, agent_version: str | None = None) -> dict[str, Any]:
    """The attributes the caller gives when the attempt starts (known before the checks run)."""
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
    if agent_version:
        attrs[names.agent_version] = agent_version
    return attrs


def report_attributes(attrs: dict[str, Any], names: semconv.GenAINames, report: Report, violations: list[str],
                      warnings: list[str], error_type: str | None) -> dict[str, Any]:
    """Add every attribute the report carries (counts, sizes, ids of invariants; never content) to
    `attrs`, the start attributes; the report's kind, pass number and cap replace what the caller said."""
    attrs[semconv.DECISION] = report.decision
    attrs[semconv.LITERALS_BEFORE] = report.literals_before
    if report.literals_hidden is None:
        attrs[semconv.LITERALS_LOST] = report.literals_lost
    else:  # an opaque rewrite: its loss is unknown, so no count of lost literals (docs/telemetry.md)
        attrs[semconv.LITERALS_HIDDEN] = report.literals_hidden
    attrs[semconv.ORPHANS_TOOL_USE] = report.orphans_tool_use
    attrs[semconv.ORPHANS_TOOL_RESULT] = report.orphans_tool_result
    attrs[semconv.VIOLATIONS] = violations
    attrs[semconv.WARNINGS] = warnings
    attrs[semconv.CONTRACTION_STATE] = report.contraction_state
    attrs[semconv.MESSAGES_BEFORE] = report.messages_before
    attrs[semconv.MESSAGES_AFTER] = report.messages_after
    attrs[semconv.SIZE_BEFORE] = report.size_before
    attrs[semconv.SIZE_AFTER] = report.size_after
    if report.tokens_before is not None:
        attrs[semconv.TOKENS_BEFORE] = report.tokens_before
    attrs[semconv.CACHE_INVALIDATED_CHARS] = report.invalidated_chars
    attrs[semconv.CACHE_INVALIDATED_TOKENS] = report.invalidated_tokens
    if report.cache_read_tokens is not None:
        attrs[semconv.CACHE_READ_TOKENS] = report.cache_read_tokens
    if report.cache_creation_tokens is not None:
        attrs[semconv.CACHE_CREATION_TOKENS] = report.cache_creation_tokens
    attrs[semconv.MUTATION_KIND] = semconv.bounded_kind(report.kind)
    attrs[semconv.PASS_NUMBER] = report.pass_number
    if report.pass_cap is not None:
        attrs[semconv.PASS_CAP] = report.pass_cap
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
    if report.shadow:
        attrs[semconv.SHADOW] = True
    if report.episode:
        attrs[semconv.EPISODE] = report.episode
    if report.decision == "patch" and report.kind in semconv.COMPACTION_KINDS:
        attrs[names.conversation_compacted] = True
    if error_type is not None:
        attrs[names.error_type] = error_type
    return attrs


def error_type(report: Report) -> str | None:
    """The class name of the error the guard raises for this report (abort, halt), else None (also in
    shadow mode, where nothing is raised: the decision alone says what would have happened)."""
    if report.decision not in _REFUSED_WITH_ERROR or report.shadow:
        return None
    return error_for(report.findings, report.decision).__name__


def status_description(decision: str, violations: list[str]) -> str:
    """The ERROR status description: the decision and invariant ids (no content, bounded)."""
    return f"{decision}: {', '.join(violations) or 'no invariant named'}"
