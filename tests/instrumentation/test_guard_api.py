"""ContextGuard's public surface: apply in the caller's format, the decorator form, check's
bookkeeping, and the provenance of what was applied."""

import copy

import pytest

from ctxwatch import ContextGuard, NonMonotonicRewriteError, OrphanedToolPairError

from conversations import in_format, record_000_session, system, user


def openai_session():
    return in_format(record_000_session(), "openai_chat")


def test_apply_returns_the_callers_own_objects_in_the_callers_format():
    msgs = openai_session()
    guard = ContextGuard("api-1")
    guard.observe(msgs, boundary=0)
    summary = {"role": "user", "content": "Summary: customer 4411 placed 17 orders (call_7f3a); two refunds."}
    proposal = msgs[:1] + [summary] + msgs[6:]
    snapshot = copy.deepcopy(proposal)
    out = guard.apply(proposal, kind="compact")
    assert out == proposal and out is not proposal
    assert all(a is b for a, b in zip(out, proposal, strict=True))
    assert proposal == snapshot
    assert guard.messages == proposal


def test_the_decorator_guards_an_existing_compaction_function():
    guard = ContextGuard("api-2")

    @guard.guarded(kind="compact")
    def careless(messages):
        return messages[:1] + messages[5:]          # drops call_7f3a's call, keeps its result

    msgs = openai_session()
    with pytest.raises(OrphanedToolPairError):
        careless(msgs)
    assert guard.messages == msgs

    keeping = ContextGuard("api-3")

    @keeping.guarded(kind="compact", on_refusal="keep")
    def careless_too(messages):
        return messages[:1] + messages[5:]

    assert careless_too(msgs) == msgs


def test_the_decorator_passes_a_sound_compaction_through():
    guard = ContextGuard("api-4")

    @guard.guarded(kind="compact")
    def sound(messages):
        return messages[:1] + [{"role": "user", "content": "Summary: Ada Park, customer 4411."}] + messages[6:]

    msgs = openai_session()
    guard.observe(msgs, boundary=0)
    out = sound(msgs)
    assert out[1]["content"].startswith("Summary") and len(out) == len(msgs) - 4


def test_check_is_an_attempt_patch_moves_the_guard_abort_does_not():
    msgs = record_000_session()
    guard = ContextGuard("api-5")
    guard.observe(msgs, boundary=0)
    assert guard.check(msgs[:1] + msgs[5:], kind="compact").decision == "abort"
    assert list(guard.context.messages) == msgs and guard.passes_used == 0
    extended = msgs + [user("and in April?")]
    report = guard.check(extended, kind="append")
    assert report.decision == "patch" and guard.passes_used == 0       # appends are not rewrite passes
    assert list(guard.context.messages) == extended
    report = guard.check(extended[:1] + extended[6:], kind="compact")
    assert report.decision == "patch" and guard.passes_used == 1
    assert len(guard.provenance) == 5 and guard.provenance.verify()      # one entry per removed span


def test_an_unguarded_change_seen_by_observe_is_reported_and_adopted():
    msgs = record_000_session()
    guard = ContextGuard("api-6")
    guard.observe(msgs)
    report = guard.observe(msgs[:1] + msgs[5:])
    assert report is not None and "tool_pairing" in report.violations
    assert report.observed and report.decision == "patch"       # found already made: reported, not refused
    assert list(guard.context.messages) == msgs[:1] + msgs[5:]


def test_resolve_applies_a_deferred_compaction_in_whole_pairs_in_one_attempt():
    msgs = record_000_session()
    guard = ContextGuard("api-7")
    guard.observe(msgs)
    report, context = guard.resolve(msgs[:1] + [user("Summary: Ada Park, customer 4411.")] + msgs[4:],
                                    kind="compact")
    assert report.decision == "patch" and report.resolution == "whole_pairs"
    assert "prefix_identity" in report.warnings and report.violations == []
    assert context[-1].text.startswith("[ctxwatch] earlier turns were elided") and len(guard.deferred) == 0
    report, context = guard.resolve([system("You are brief.")] + list(guard.context.messages[1:]),
                                    kind="system_patch")
    assert report.decision == "defer" and len(guard.deferred) == 1          # other kinds wait for the boundary


def test_an_anthropic_request_dict_keeps_its_shape_through_the_guard():
    """{"system": ..., "messages": [...]}: what the guard hands back has the same shape."""
    msgs = in_format(record_000_session(), "anthropic")
    request = {"system": "You are a support agent.", "messages": msgs}
    guard = ContextGuard("api-anthropic")
    guard.observe(request)
    assert guard.messages == request and guard.messages["messages"] is not msgs
    summary = {"role": "user", "content": "Summary: customer 4411 is Ada Park."}
    compacted = {"system": request["system"], "messages": [summary] + msgs[3:]}
    out = guard.apply(compacted, kind="compact")            # deferred: compacted in whole pairs
    assert out["system"] == request["system"]
    # the history now starts with the assistant's call, so the marker opens it (Anthropic: user first)
    assert "[ctxwatch] earlier turns were elided" in str(out["messages"][0]["content"])
    assert out["messages"][1:] == msgs[3:]
    with pytest.raises(NonMonotonicRewriteError):            # the system prompt was consumed
        guard.self_edit("You are a support agent. Be brief.")

    fresh = ContextGuard("api-anthropic-fresh")
    fresh.observe(request, boundary=0)
    edited = fresh.self_edit("You are a support agent. Be brief.")
    assert edited["system"] == "You are a support agent. Be brief." and edited["messages"] == msgs
