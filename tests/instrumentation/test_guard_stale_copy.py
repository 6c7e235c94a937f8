"""A rewrite computed on a stale copy (review F4): the summarizer copied the context after the model's
tool call arrived and before its result was appended. docs/guard.md, "Turns appended since observe()":
such a proposal is settled like a rewrite of the consumed prefix (a prefix_identity finding, deferred or
settled by the mode) and what comes back ends with the unread turns, unchanged — never an abort for the
call whose result is among them. A proposal that breaks a pair the model read is still refused."""

from __future__ import annotations

import random

import pytest

from ctxwatch import ContextGuard, OrphanedToolPairError
from ctxwatch.invariants.pairing import index_pairs


def call(n: int) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"sku": {n}}}'}}]}


def result(n: int) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": f"SKU-{n:05d}: {n * 7} units"}


def summarize(messages: list) -> list:
    """docs/guard.md's summarizer: the turns before the newest question become one note."""
    asked = max(i for i, m in enumerate(messages) if m["role"] == "user")
    note = "Earlier: " + "; ".join(m["content"] for m in messages[1:asked] if m["role"] == "tool")
    return [messages[0], {"role": "user", "content": note}] + messages[asked:]


def history(calls: int) -> list:
    messages = [{"role": "system", "content": "You are an inventory agent."},
                {"role": "user", "content": f"How many of SKU-00001..SKU-{calls + 1:05d}?"}]
    for n in range(1, calls + 1):
        messages = messages + [call(n), result(n)]
    return messages + [{"role": "assistant", "content": f"Looked up {calls}."},
                       {"role": "user", "content": f"And SKU-{calls + 1:05d}?"}]


def assert_paired(guard: ContextGuard, context: list) -> None:
    pairs = index_pairs(guard.bridge.to_model(context))
    assert not (pairs.orphan_calls or pairs.orphan_results or pairs.pending or pairs.duplicate_calls
                or pairs.duplicate_results), context


def stale_case(in_place: bool) -> tuple[ContextGuard, list, list]:
    """The repro's loop: observe, the model's call appended, the summarizer's copy, the result appended."""
    guard = ContextGuard("stale", agent="inventory")
    messages = history(11)
    guard.observe(messages)
    if in_place:
        messages.append(call(12))
        stale = list(messages)
        messages.append(result(12))
    else:
        messages = messages + [call(12)]
        stale = list(messages)
        messages = messages + [result(12)]
    return guard, messages, stale


@pytest.mark.parametrize("in_place", [False, True], ids=["rebuilt-list-current", "in-place-list"])
def test_a_summary_of_a_stale_copy_is_settled_and_ends_with_the_unread_call_and_result(in_place):
    guard, messages, stale = stale_case(in_place)
    report, context = guard.resolve(summarize(stale), kind="compact", current=None if in_place else messages)
    assert (report.decision, report.resolution, report.violations) == ("patch", "whole_pairs", []), report.explain()
    assert "prefix_identity" in report.warnings and "tool_pairing" not in report.warnings
    assert context[-2] is messages[-2] and context[-1] is messages[-1]  # the caller's own objects, unchanged
    assert context[-2:] == [call(12), result(12)] and len(context) < len(messages)
    assert_paired(guard, context)
    assert guard.messages == context


@pytest.mark.parametrize("in_place", [False, True], ids=["rebuilt-list-current", "in-place-list"])
def test_apply_of_a_stale_summary_does_not_raise(in_place):
    guard, messages, stale = stale_case(in_place)
    context = guard.apply(summarize(stale), kind="compact", current=None if in_place else messages)
    assert context[-2:] == [call(12), result(12)]
    assert_paired(guard, context)


def test_a_queued_stale_summary_is_applied_at_the_boundary_ending_with_the_unread_turns():
    guard, messages, stale = stale_case(in_place=False)
    report, context = guard.resolve(summarize(stale), kind="compact", current=messages, deferral="queue")
    assert (report.decision, report.violations) == ("defer", ["prefix_identity"]), report.explain()
    assert context == messages  # deferred: the context as it is
    answer = {"role": "assistant", "content": "SKU-00012: 84 units."}
    boundary = guard.session_boundary(current=messages + [answer])
    assert boundary is not None and boundary.decision == "patch", boundary.explain()
    assert guard.messages == summarize(stale) + [result(12), answer]
    assert_paired(guard, guard.messages)


@pytest.mark.parametrize("in_place", [False, True], ids=["rebuilt-list-current", "in-place-list"])
def test_a_stale_summary_that_also_breaks_a_read_pair_is_still_refused(in_place):
    guard, messages, stale = stale_case(in_place)
    summary = summarize(stale)
    breaking = summary[:2] + [call(5)] + summary[2:]  # call 5 without its result (the model read both)
    with pytest.raises(OrphanedToolPairError) as refused:
        guard.apply(breaking, kind="compact", current=None if in_place else messages)
    (pairing,) = [f for f in refused.value.report.findings if f.invariant == "tool_pairing"]
    assert pairing.details["tool_use_without_result"] == ["call_5"]  # not call 12: its result is kept
    assert guard.messages == messages


def test_a_summary_that_shortens_the_unread_result_is_settled_keeping_it_unchanged():
    """The proposal's own (changed) copy of the unread pair is whole as written: deferred or settled as
    before the fix, and what comes back holds the result as it was appended."""
    guard, messages, _ = stale_case(in_place=False)
    summary = summarize(messages)
    summary[-1] = {"role": "tool", "tool_call_id": "call_12", "content": "84"}
    report, context = guard.resolve(summary, kind="compact", current=messages)
    assert report.decision == "patch" and "tool_pairing" not in report.violations + report.warnings, \
        report.explain()
    assert context[-2:] == [call(12), result(12)]
    assert_paired(guard, context)


def test_anthropic_a_stale_copy_ending_with_the_tool_use_is_not_refused():
    guard = ContextGuard("stale-anthropic", format="anthropic")
    messages = [{"role": "user", "content": "Stock of SKU-00001?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup",
                                                   "input": {"sku": 1}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "7 units"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "7 units."}]},
                {"role": "user", "content": "And SKU-00002?"}]
    guard.observe(messages)
    use = {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "lookup", "input": {"sku": 2}}]}
    answer = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "14 units"}]}
    messages.append(use)
    stale = list(messages)
    messages.append(answer)
    summary = [{"role": "user", "content": "Earlier: SKU-00001 has 7 units. And SKU-00002?"}, stale[-1]]
    report, context = guard.resolve(summary, kind="compact")
    assert report.decision in ("patch", "defer") and "tool_pairing" not in report.violations, report.explain()
    assert "prefix_identity" in report.violations + report.warnings
    assert context[-2:] == [use, answer]
    assert_paired(guard, context)


def run_loop(steps: int, in_place: bool, seed: int) -> tuple[int, int]:
    """The docs' loop for `steps` model calls: each answer is a call, its result appended after it; every
    other call a summary is applied, half the time one computed on the copy taken before the result.
    Returns how many summaries were applied, and how many of them were stale."""
    rng = random.Random(seed)
    guard = ContextGuard(f"stale-loop-{seed}", agent="inventory")
    messages = [{"role": "system", "content": "You are an inventory agent."},
                {"role": "user", "content": "Look every SKU up."}]
    applied = stale_applied = 0
    for n in range(1, steps + 1):
        guard.observe(messages)
        stale = None
        if in_place:
            messages.append(call(n))
            if rng.random() < 0.5:
                stale = list(messages)
            messages.append(result(n))
        else:
            messages = messages + [call(n)]
            if rng.random() < 0.5:
                stale = list(messages)
            messages = messages + [result(n)]
        if n % 7 == 0:
            messages = messages + [{"role": "user", "content": f"Next: SKU-{n + 1:05d}."}]
        if n % 2 == 0 and n % 7 != 0:
            proposal = summarize(stale if stale is not None else messages)
            context = guard.apply(proposal, kind="compact", current=None if in_place else messages)
            assert context[-2:] == [call(n), result(n)], n
            assert_paired(guard, context)
            applied += 1
            stale_applied += stale is not None
            messages = context
    assert_paired(guard, messages)
    return applied, stale_applied


@pytest.mark.parametrize("in_place", [False, True], ids=["rebuilt-list-current", "in-place-list"])
def test_a_long_loop_with_half_its_summaries_stale_never_raises(in_place):
    applied, stale = run_loop(400, in_place, seed=4)
    assert applied > 150 and applied / 3 < stale < applied * 2 / 3
