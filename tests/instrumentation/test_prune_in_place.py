"""A pruning that clears consumed tool results in place (ContextEditingMiddleware, ``clear_tool_uses``)
is applied under the default deferral mode: every pair stays whole, nothing unread changes, and the
report says what it cost. Any other in-place change of consumed messages waits, with a warning saying
why, and ``deferral="session_boundary"`` applies it."""

import json

from ctxwatch import ContextGuard

PLACEHOLDER = "[cleared]"


def openai_session(guard: ContextGuard, turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You read files for the user."}]
    for t in range(turns):
        msgs.append({"role": "user", "content": f"question {t}"})
        guard.observe(msgs)
        msgs.append({"role": "assistant", "tool_calls": [
            {"id": f"c{t}", "type": "function", "function": {"name": "read", "arguments": json.dumps({"n": t})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": f"file {t}: " + "x" * 2000})
        guard.observe(msgs)
        msgs.append({"role": "assistant", "content": f"answer {t}"})
    return msgs


def clear_tool_results(msgs: list[dict], upto: int) -> list[dict]:
    return [{**m, "content": PLACEHOLDER} if m["role"] == "tool" and i < upto else dict(m)
            for i, m in enumerate(msgs)]


def pairs_whole(msgs: list[dict]) -> bool:
    calls = [c["id"] for m in msgs for c in m.get("tool_calls", ())]
    return calls == [m["tool_call_id"] for m in msgs if m["role"] == "tool"]


def test_clearing_consumed_tool_results_in_place_is_applied_by_default():
    guard = ContextGuard("clear-openai")
    msgs = openai_session(guard, 20)
    proposal = clear_tool_results(msgs, len(msgs) // 2)
    report, context = guard.resolve(proposal, kind="prune")
    assert report.decision == "patch" and report.resolution == "in_place", report.explain()
    assert report.violations == [] and report.warnings == ["prefix_identity"]
    assert "clears 10 consumed tool results in place" in report.explain()
    assert context == proposal and pairs_whole(context)
    assert report.size_after < report.size_before * 0.6 and report.invalidated_chars > 0
    assert len(guard.deferred) == 0 and guard.messages == proposal
    # undeclared, the guard names it a prune and settles it the same way
    msgs = context + [{"role": "user", "content": "question 20"}]
    guard.observe(msgs)
    report, context = guard.resolve(clear_tool_results(msgs, len(msgs) - 4))
    assert report.kind == "prune" and report.resolution == "in_place", report.explain()


def test_clearing_tool_results_in_place_anthropic_shape():
    guard = ContextGuard("clear-anthropic", format="anthropic")
    msgs: list[dict] = []
    for t in range(9):
        msgs.append({"role": "user", "content": f"question {t}"} if t == 0 else
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{t - 1}",
                                                  "content": "row " * 500}, {"type": "text", "text": f"q{t}"}]})
        guard.observe({"system": "You query rows.", "messages": msgs})
        msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{t}", "name": "rows",
                                                       "input": {"n": t}}] if t < 8 else "done"})
    cleared = [{**m, "content": [{**b, "content": PLACEHOLDER} if b["type"] == "tool_result" else b
                                 for b in m["content"]]} if i < 8 and isinstance(m["content"], list) else m
               for i, m in enumerate(msgs)]
    report, context = guard.resolve({"system": "You query rows.", "messages": cleared}, kind="prune")
    assert report.decision == "patch" and report.resolution == "in_place", report.explain()
    assert context["messages"] == cleared


def test_a_clearing_that_reaches_what_the_model_has_not_read_waits_and_says_why():
    guard = ContextGuard("clear-unread")
    msgs = openai_session(guard, 6)
    guard.observe(msgs, boundary=10)                 # the model has read the first 10 messages only
    proposal = clear_tool_results(msgs, len(msgs))   # also clears results after the boundary
    report, context = guard.resolve(proposal, kind="prune")
    assert report.decision == "defer" and report.resolution is None
    assert context == msgs and len(guard.deferred) == 1
    assert "prefix_identity" in report.warnings
    assert ("whole-pair compaction was not possible: the rewrite drops no whole consumed unit (it clears a tool "
            "result the model has not read yet (message 11)") in report.explain()


def test_other_in_place_edits_of_consumed_messages_wait_unless_the_mode_applies_them_whole():
    guard = ContextGuard("edit-in-place")
    msgs = openai_session(guard, 4)
    edited = [dict(m) for m in msgs]
    edited[2]["tool_calls"] = [{**edited[2]["tool_calls"][0], "function": {"name": "read", "arguments": "{}"}}]
    # a consumed tool input cleared in place: its unit (the call and its result) is not dropped whole
    report, context = guard.resolve(edited, kind="prune")
    assert report.decision == "defer" and context == msgs
    assert "it changes message 2 in place beyond clearing tool-result outputs" in report.explain()
    assert "deferral=\"session_boundary\" applies it at once" in report.explain()
    grown = clear_tool_results(msgs, len(msgs))
    grown[3] = {**grown[3], "content": "x" * 5000}    # a "clearing" that makes an output larger
    assert guard.resolve(grown, kind="prune")[0].decision == "defer"
    queued = guard.resolve(clear_tool_results(msgs, 8), kind="prune", deferral="queue")[0]
    assert queued.decision == "defer" and queued.resolution is None
    report, context = guard.resolve(edited, kind="prune", deferral="session_boundary")
    assert report.decision == "patch" and report.resolution == "session_boundary" and context == edited


def test_a_long_conversation_with_a_tool_result_clearer_stays_bounded():
    """The clear_tool_uses pattern every few turns: each clearing applies, the context's size stays
    bounded by the uncleared window while the conversation grows."""
    guard = ContextGuard("clear-long")
    msgs = [{"role": "system", "content": "You read files."}]
    sizes = []
    for t in range(60):
        msgs.append({"role": "user", "content": f"question {t}"})
        guard.observe(msgs)
        msgs.append({"role": "assistant", "tool_calls": [
            {"id": f"c{t}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{t}", "content": f"file {t} " + "y" * 1000})
        guard.observe(msgs)
        msgs.append({"role": "assistant", "content": f"answer {t}"})
        if t % 5 == 4:
            report, msgs = guard.resolve(clear_tool_results(msgs, len(msgs) - 8), kind="prune")
            assert report.resolution == "in_place", report.explain()
            sizes.append(report.size_after)
    assert max(sizes) - min(sizes) < 2000 + 60 * 100   # the cleared history costs a placeholder per turn
    assert len(guard.deferred) == 0 and pairs_whole(msgs)
