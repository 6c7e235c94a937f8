"""`ContextGuard.adopt(..., trusted=True)`: the caller's own edit of what the model reads (a system prompt
the application sets per call) is taken on as made; its prefix and policy findings are warnings, and the
pinned policy is the new prompt. Every other check still refuses."""

from __future__ import annotations

import pytest

from ctxwatch import ContextGuard, PolicyMutationError

RULES = {"role": "system", "content": "Refunds over 100 EUR need approval. Today is 2026-12-01."}


def conversation() -> list:
    return [RULES, {"role": "user", "content": "Refund order A1?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "A1: 40 EUR"}]


def pinned_guard(**options) -> ContextGuard:
    guard = ContextGuard("trusted", policy=lambda i, m: m.role == "system", **options)
    guard.observe(conversation())
    return guard


def test_a_trusted_prompt_edit_is_taken_on_with_warnings_and_pinned():
    guard = pinned_guard()
    refreshed = {"role": "system", "content": "Refunds over 100 EUR need approval. Today is 2026-12-02."}
    report = guard.adopt([refreshed, *conversation()[1:]], kind="system_patch", trusted=True)
    assert (report.decision, report.observed, report.violations) == ("patch", True, [])
    assert {"prefix_identity", "policy_isolation"} <= set(report.warnings)
    assert guard.messages[0] is refreshed
    # the agent's own paraphrase of the prompt now in use is still refused: the pin moved to it
    with pytest.raises(PolicyMutationError):
        guard.apply([{"role": "system", "content": "Refunds need approval."}, *conversation()[1:]],
                    kind="system_patch")


def test_the_same_edit_untrusted_is_refused_as_a_policy_edit():
    guard = pinned_guard()
    refreshed = {"role": "system", "content": "Refunds over 100 EUR need approval. Today is 2026-12-02."}
    report = guard.adopt([refreshed, *conversation()[1:]], kind="system_patch")
    assert report.decision == "abort" and "policy_isolation" in report.violations
    assert guard.messages[0] is RULES


def test_a_trusted_edit_that_orphans_a_tool_result_is_still_refused():
    guard = pinned_guard()
    orphaning = [RULES, conversation()[1], conversation()[3]]
    report = guard.adopt(orphaning, trusted=True)
    assert report.decision == "abort" and report.violations == ["tool_pairing"]
    assert len(guard.messages) == 4


def test_an_invariant_switched_off_stays_off_for_a_trusted_edit():
    guard = pinned_guard(enforce={"prefix_identity": "off"})
    refreshed = {"role": "system", "content": "Refunds over 200 EUR need approval."}
    report = guard.adopt([refreshed, *conversation()[1:]], kind="system_patch", trusted=True)
    assert report.decision == "patch" and "prefix_identity" not in report.warnings + report.violations
