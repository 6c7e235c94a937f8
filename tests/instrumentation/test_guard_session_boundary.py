"""session_boundary() and the context the caller continues with (review defect D12).

A rewrite waiting in the queue (deferral="queue", or a system patch under the default mode) is
applied at the next session boundary; the loop then continues with `guard.messages`, so the next
observe() sees the applied rewrite and not the caller's old list. A rewrite queued while turns were
appended but not yet observed is applied too, with those turns at its end.
"""

from __future__ import annotations

from ctxwatch import ContextGuard


def history(turns: int) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "v1"}]
    for i in range(turns):
        out += [{"role": "user", "content": f"u{i}"}, {"role": "assistant", "content": f"a{i}"}]
    return out


def test_d12_a_queued_system_patch_reaches_the_model_through_guard_messages():
    guard = ContextGuard("d12-system")
    messages = history(3)
    guard.observe(messages)
    messages = guard.apply([{"role": "system", "content": "v2 (patched)"}] + messages[1:], kind="system_patch")
    assert messages[0]["content"] == "v1" and len(guard.deferred) == 1  # waits for the boundary
    messages.append({"role": "user", "content": "last question"})
    guard.observe(messages)
    messages.append({"role": "assistant", "content": "last answer"})  # not observed yet
    report = guard.session_boundary()
    assert report is not None and report.decision == "patch"
    messages = guard.messages
    assert messages[0]["content"] == "v2 (patched)" and messages[-1]["content"] == "last answer"
    messages.append({"role": "user", "content": "next task"})
    assert guard.observe(messages) is None  # an append, not a change made outside the guard
    assert guard.context.messages[0].text == "v2 (patched)"


def test_d12_a_rewrite_queued_over_unobserved_turns_is_applied_at_the_boundary_with_them_at_the_end():
    guard = ContextGuard("d12-queue", deferral="queue")
    messages = history(6)
    guard.observe(messages)
    messages += [{"role": "user", "content": "one more"}, {"role": "assistant", "content": "OK."}]  # unread
    compacted = [messages[0], {"role": "user", "content": "Summary of u0-u3."}] + messages[9:]
    report, messages = guard.resolve(compacted, kind="compact")
    assert report.decision == "defer" and messages[-2:] == compacted[-2:] and len(guard.deferred) == 1
    messages.append({"role": "user", "content": "and another"})  # still not observed: the task ends here
    assert guard.session_boundary() is not None
    messages = guard.messages
    assert [m["content"] for m in messages] == ["v1", "Summary of u0-u3.", "u4", "a4", "u5", "a5", "one more",
                                                "OK.", "and another"]
    assert len(guard.deferred) == 0


def test_deferral_session_boundary_applies_a_compaction_at_once_with_the_turns_appended_since():
    """Review F7 (session 7): the step goes on after observe() (a tool call and its result appended) and the
    compactor's proposal is made from the observed list. deferral="session_boundary" applies it at once as
    the start of a new session, the appended turns at its end (the caller's own objects), as "auto" and
    "whole_pairs" keep them; it was queued until the next boundary and the context came back unchanged."""
    observed = history(8) + [{"role": "user", "content": "And SKU-00099?"}]
    appended = [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_99", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_99", "content": "693 units"}]
    compacted = [observed[0], {"role": "user", "content": "Earlier: 8 questions answered."}] + observed[-3:]
    guard = ContextGuard("f7-session-boundary", deferral="session_boundary")
    guard.observe(observed)
    report, out = guard.resolve(compacted, kind="compact", current=observed + appended)
    assert (report.decision, report.resolution) == ("patch", "session_boundary"), report.explain()
    assert [m["content"] for m in out[:-2]] == [m["content"] for m in compacted]
    assert out[-2] is appended[0] and out[-1] is appended[1]
    assert not guard.deferred
