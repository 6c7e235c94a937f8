"""The ``ctxwatch replay --json`` document: a stable, versioned schema (documented in docs/replay.md).

`SCHEMA` and `SCHEMA_VERSION` name it. Within a version, fields are only ever added, never renamed,
removed or retyped; a consumer should ignore fields it does not know. Sizes are characters of
readable message text; `line` is a 1-based line number of the session file (null for
single-document formats, which give `where` as a JSON path instead). A mutation that is no rewrite
cycle of the alarm (`MutationAudit.no_cycle`) has ``cycle``, ``hash_distance``, ``loss_rate`` and
``contraction`` null and says why in ``no_cycle``; an opaque one's ``literals.lost`` is null and
``literals.hidden`` counts the literals it took out of the readable context (both keys only on such
mutations, so a cycle's entry is as it always was).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..report import Finding
from .audit import MutationAudit, SessionAudit, ToolIdAt

SCHEMA = "ctxwatch.replay"
SCHEMA_VERSION = 1


def mutation_json(m: MutationAudit, fail_on_literal_loss: bool = False) -> dict[str, Any]:
    v = m.verdict
    c = m.messages
    literals: dict[str, Any] = {"before": m.literals_before, "lost": m.literals_lost, "lost_values": list(m.lost)}
    if m.hidden is not None:
        literals["hidden"] = m.hidden
    out = {
        "cycle": m.cycle,
        "kind": m.kind,
        "source": m.source,
        "step": m.step,
        "where": m.where,
        "line": m.line,
        "trigger": m.trigger,
        "pre_tokens": m.pre_tokens,
        "summary": None if m.summary_chars is None else {"line": m.summary_line, "chars": m.summary_chars},
        "messages": {"before": c.before, "after": c.after, "kept": c.kept, "dropped": c.dropped, "added": c.added,
                     "elided": c.elided, "rewritten": c.rewritten},
        "size": {"before": m.size_before, "after": m.size_after},
        "orphans": {"tool_use": list(m.orphaned_calls), "tool_result": list(m.orphaned_results)},
        "literals": literals,
        "hash_distance": None if v is None else round(v.d, 6),
        "loss_rate": None if v is None else round(v.r, 6),
        "contraction": None if v is None else {
            "state": v.state, "evidence": v.evidence, "shrinking": v.shrinking, "losing": v.losing,
            "below": v.below, "entered": v.entered, "left": v.left, "onset": v.onset},
        "findings": [finding_json(f) for f in m.findings(fail_on_literal_loss)],
        "details": dict(m.details),
        "in_flight_dropped": [tool_id_json(t) for t in m.in_flight],
    }
    if m.no_cycle is not None:
        out["no_cycle"] = m.no_cycle
    return out


def tool_id_json(t: ToolIdAt) -> dict[str, Any]:
    return {"where": t.where, "id": t.id, "kind": t.kind}


def finding_json(f: Finding) -> dict[str, Any]:
    return {"invariant": f.invariant, "action": f.action, "enforced": f.enforced, "message": f.message}


def session_json(a: SessionAudit, fail_on_literal_loss: bool = False) -> dict[str, Any]:
    entered = next((v for v in a.verdicts if v.entered), None)
    return {
        "path": a.path,
        "status": "ok" if a.readable else "unreadable",
        "error": a.error,
        "format": a.format,
        "loop_id": a.loop_id,
        "bytes": a.bytes,
        "records": a.records,
        "steps": a.steps,
        "messages": a.messages,
        "tool_pairs": {"paired": a.tool_pairs, "pending": a.pending,
                       "orphans_in_buffers": [tool_id_json(t) for t in a.buffer_orphans]},
        "skipped": [{"where": s.where, "line": s.line, "reason": s.reason} for s in a.skipped],
        "mutations": [mutation_json(m, fail_on_literal_loss) for m in a.mutations],
        "verdict": {"state": a.state, "entered_at": entered.cycle if entered else None,
                    "onset": entered.onset if entered else None, "explanation": a.explain()},
        "findings": len(a.findings(fail_on_literal_loss)),
        "session_findings": [finding_json(f) for f in a.session_findings()],
        "details": dict(a.facts),
    }


def document(audits: Sequence[SessionAudit], exit_code: int, version: str,
             fail_on_literal_loss: bool = False) -> dict[str, Any]:
    """The whole ``--json`` document."""
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "ctxwatch_version": version,
        "fail_on_literal_loss": fail_on_literal_loss,
        "sessions": [session_json(a, fail_on_literal_loss) for a in audits],
        "summary": {
            "sessions": len(audits),
            "unreadable": sum(not a.readable for a in audits),
            "with_findings": sum(bool(a.findings(fail_on_literal_loss)) for a in audits),
            "mutations": sum(len(a.mutations) for a in audits),
            "exit_code": exit_code,
        },
    }
