"""Turns the caller appended since its last observe() (review defects D10, D11, D8 and L5).

The agent observes its list, the model answers (a tool call, its result, a short "OK."), those turns
are appended to the same list, and then the agent rewrites its history. Whatever the guard decides,
what it hands back ends with those turns verbatim: the model has not read them. They are found by
position in the list the caller extended, so a rewrite that drops the last observed message, or an
appended answer that repeats an earlier one byte for byte, changes nothing about them.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwatch import ContextGuard, NonMonotonicRewriteError

SYSTEM = {"role": "system", "content": "You are a helpful agent."}


def call(call_id: str, name: str) -> dict:
    return {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
                                                 "function": {"name": name, "arguments": "{}"}}]}


def order_history() -> list[dict]:
    return [copy.deepcopy(SYSTEM), {"role": "user", "content": "find order ORD-1"}, call("c1", "find"),
            {"role": "tool", "tool_call_id": "c1", "content": "order ORD-1 is in /srv/orders/1.json"},
            {"role": "assistant", "content": "Found it."}, {"role": "user", "content": "ok, now cancel it"}]


UNREAD = [call("c2", "cancel"), {"role": "tool", "tool_call_id": "c2", "content": "cancelled ORD-1"}]


@pytest.mark.parametrize(("kind", "rewrite", "decision"), [
    ("rewrite", lambda m: m[:5] + [{"role": "user", "content": "cancel it"}] + m[6:], "defer"),
    ("rewrite", lambda m: m[:5] + m[6:], "defer"),
    ("prune", lambda m: m[:5] + m[6:], "patch"),
    ("rewrite", lambda m: m[:4] + [{"role": "assistant", "content": "Found."}] + m[5:], "defer"),
], ids=["edit-last-observed", "drop-last-observed", "drop-last-observed-prune", "control-keep-last"])
def test_d10_a_rewrite_of_the_last_observed_message_keeps_the_unread_call_and_result(kind, rewrite, decision):
    guard = ContextGuard("d10", format="openai_chat")
    messages = order_history()
    guard.observe(messages)
    messages += copy.deepcopy(UNREAD)  # the model's call and its result, not read back yet
    report, context = guard.resolve(rewrite(messages), kind=kind)
    assert report.decision == decision, report.explain()
    assert context[-2:] == UNREAD
    assert not any("cancelled ORD-1" in str(m.get("content")) for m in context[:-1])  # not folded into a note


def test_d10_swe_agent_old_environment_output_keeps_every_new_tool_result():
    """SWE-agent's history processor (corpus swe-agent__marshmallow-1867): after each new tool result every
    earlier output becomes "Old environment output: (N lines omitted)", so each rewrite touches the output
    the model read last — the newest call and result must come back every time."""
    guard = ContextGuard("swe-history", format="openai_chat")
    messages = [{"role": "system", "content": "You are a software engineer."},
                {"role": "user", "content": "Fix the bug in marshmallow/fields.py"}]
    for step in range(6):
        guard.observe(messages)
        messages.append(call(f"call_{step}", "bash"))
        messages.append({"role": "tool", "tool_call_id": f"call_{step}",
                         "content": "\n".join(f"line {k} of output {step}" for k in range(30))})
        newest = copy.deepcopy(messages[-2:])
        elided = copy.deepcopy(messages)
        for m in [m for m in elided if m["role"] == "tool"][:-1]:
            if not m["content"].startswith("Old environment output"):
                m["content"] = f"Old environment output: ({m['content'].count(chr(10)) + 1} lines omitted)"
        report, context = guard.resolve(elided, kind="prune")
        assert context[-2:] == newest, (step, report.explain())
        messages = context


def short_answers() -> list[dict]:
    out = [{"role": "system", "content": "sys"}]
    for i in range(8):
        out += [{"role": "user", "content": f"step {i}"}, {"role": "assistant", "content": "OK."}]
    return out + [{"role": "user", "content": "step 8"}]


def compact_keeping_newest(messages: list[dict]) -> list[dict]:
    body = messages[1:]
    return [messages[0], {"role": "user", "content": "Summary: steps 0-4 done."}] + body[int(len(body) * 0.6):]


@pytest.mark.parametrize("answer", ["OK.", "OK, step 8 done."], ids=["repeats-an-earlier-answer", "new-text"])
def test_d11_an_unread_answer_that_repeats_an_earlier_one_is_kept_and_the_compaction_applied(answer):
    guard = ContextGuard("d11", format="openai_chat")
    messages = short_answers()
    guard.observe(messages)
    messages.append({"role": "assistant", "content": answer})
    report, context = guard.resolve(compact_keeping_newest(messages), kind="compact")
    assert (report.decision, report.resolution, report.violations) == ("patch", "whole_pairs", []), report.explain()
    assert context[-1] == {"role": "assistant", "content": answer} and len(context) < len(messages)


def test_d11_apply_does_not_refuse_a_healthy_compaction_for_order():
    guard = ContextGuard("d11-apply", format="openai_chat")
    messages = short_answers()
    guard.observe(messages)
    messages.append({"role": "assistant", "content": "OK."})
    context = guard.apply(compact_keeping_newest(messages), kind="compact")
    assert context[-1] == {"role": "assistant", "content": "OK."} and len(context) < len(messages)
    assert {"role": "user", "content": "step 8"} in context[:-1]


def test_d8_guard_messages_after_a_refusal_hold_the_unread_turns():
    guard = ContextGuard("d8", format="openai_chat")
    messages = order_history()
    guard.observe(messages)
    messages += copy.deepcopy(UNREAD)
    orphaning = [messages[0], messages[1], messages[3]] + messages[4:]  # drops call c1, keeps its result
    with pytest.raises(NonMonotonicRewriteError):
        guard.apply(orphaning, kind="prune")
    assert guard.messages == messages
    assert len(guard.context.messages) == 6  # the guard's own context: what was observed


@pytest.mark.parametrize(("kind", "rewrite"), [
    ("prune", lambda m: m[:6]),
    ("compact", lambda m: [m[0], {"role": "user", "content": "Summary: found and cancelled ORD-1."}]),
], ids=["drops-the-unread-turns", "folds-everything"])
def test_l5_a_proposal_without_the_unread_turns_at_its_end_gets_them_back(kind, rewrite):
    """The documented case: the proposal itself drops (or folds) the turns appended since observe(). The
    guard treats that like a rewrite of the consumed prefix: a prefix_identity finding, and the context
    handed back (deferred, or whole-pair compaction) ends with the unread turns verbatim."""
    guard = ContextGuard("l5", format="openai_chat")
    messages = order_history()
    guard.observe(messages)
    messages += copy.deepcopy(UNREAD)
    report, context = guard.resolve(rewrite(messages), kind=kind)
    assert report.decision in ("defer", "patch") and context[-2:] == UNREAD, report.explain()
    assert "prefix_identity" in report.violations + report.warnings


def test_d10_anthropic_request_shape_keeps_the_unread_tool_use_and_result():
    guard = ContextGuard("d10-anthropic", format="anthropic")
    request = {"system": "You are a helpful agent.", "messages": [
        {"role": "user", "content": "find order ORD-1"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "find", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "in 1.json"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Found it. Cancel it?"}]},
        {"role": "user", "content": "yes"}]}
    guard.observe(request)
    unread = [{"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "cancel", "input": {}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "cancelled"}]}]
    request["messages"] += copy.deepcopy(unread)
    proposal = {"system": request["system"], "messages": request["messages"][:3]
                + [{"role": "assistant", "content": [{"type": "text", "text": "Found."}]},
                   {"role": "user", "content": "yes, cancel"}] + request["messages"][5:]}
    report, context = guard.resolve(proposal, kind="rewrite")
    assert report.decision == "defer" and context["messages"][-2:] == unread, report.explain()
    assert guard.messages["messages"] == request["messages"]


# --- the property: the docs' pattern over a tiny vocabulary (duplicates everywhere) -------------------
USER_TEXTS = ["continue", "next", "ok", "go on"]
ASSISTANT_TEXTS = ["OK.", "Done.", "Sure."]


def text(fmt: str, role: str, words: str) -> dict:
    return {"role": role, "content": [{"type": "text", "text": words}] if fmt == "anthropic" else words}


@st.composite
def tail_scenarios(draw):
    fmt = draw(st.sampled_from(["openai_chat", "anthropic"]))
    turns = draw(st.integers(3, 14))
    appended = draw(st.integers(1, 4))
    roles = ["user", "assistant"] * ((turns + appended) // 2 + 1)
    body = [text(fmt, role, draw(st.sampled_from(USER_TEXTS if role == "user" else ASSISTANT_TEXTS)))
            for role in roles[: turns + appended]]
    head = [] if fmt == "anthropic" else [{"role": "system", "content": "sys"}]
    observed, tail = head + body[:turns], body[turns:]
    keep = [m for m in observed[len(head):] if draw(st.booleans())]
    summary = [text(fmt, "user", "Summary.")] if draw(st.booleans()) else []
    proposal = copy.deepcopy(head + summary + keep + tail)
    return fmt, observed, tail, proposal, draw(st.sampled_from(["compact", "prune", "rewrite"]))


@settings(max_examples=300, deadline=None)
@given(tail_scenarios())
def test_appended_turns_come_back_at_the_end_and_the_decision_is_as_if_observed(scenario):
    fmt, observed, tail, proposal, kind = scenario
    guard = ContextGuard("tail", format=fmt)
    messages = copy.deepcopy(observed)
    guard.observe(messages)
    messages += copy.deepcopy(tail)
    report, context = guard.resolve(copy.deepcopy(proposal), kind=kind)
    assert context[-len(tail):] == tail, report.explain()
    assert guard.messages[-len(tail):] == tail

    everything = ContextGuard("all-observed", format=fmt)
    everything.observe(copy.deepcopy(observed) + copy.deepcopy(tail))
    alike, _ = everything.resolve(copy.deepcopy(proposal), kind=kind)
    assert "order" not in report.violations
    if report.decision != alike.decision and proposal[: len(observed)] == observed:
        # the proposal starts with every observed message: what the model read is intact, the context is the
        # proposal (the messages it dropped are, by content, as well the first appended ones as observed ones)
        assert (report.decision, report.violations, context) == ("patch", [], proposal), report.explain()
    elif report.decision != alike.decision:
        # the other difference by design: observed, the elision marker may go after those turns; unread, it
        # must go before them (the context ends with what the model has not read). Where the provider allows
        # no place on one side (Anthropic: roles alternate), that rewrite waits, its context kept as it is
        patched, waiting = (report, alike) if report.decision == "patch" else (alike, report)
        assert (fmt, patched.resolution, waiting.decision) == ("anthropic", "whole_pairs", "defer"), report.explain()
        assert "whole-pair compaction was not possible" in waiting.explain()


def test_reading_guard_messages_often_never_hides_the_list_that_was_observed():
    guard = ContextGuard("many-reads", format="openai_chat")
    messages = order_history()
    guard.observe(messages)
    for _ in range(10):
        assert guard.messages == messages  # each read hands back a new list
    messages += copy.deepcopy(UNREAD)
    report, context = guard.resolve(messages[:5] + messages[6:], kind="prune")
    assert report.decision == "patch" and context[-2:] == UNREAD, report.explain()


def responses_history() -> tuple[list, list]:
    items = [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "find ORD-1"},
             {"type": "function_call", "call_id": "c1", "name": "find", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "in 1.json"},
             {"role": "assistant", "content": "Found it."}, {"role": "user", "content": "cancel it"}]
    return items, [{"type": "function_call", "call_id": "c2", "name": "cancel", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c2", "output": "cancelled"}]


def langchain_history() -> tuple[list, list]:
    messages = pytest.importorskip("langchain_core.messages")
    history = [messages.SystemMessage("s"), messages.HumanMessage("find ORD-1"),
               messages.AIMessage("", tool_calls=[{"id": "c1", "name": "find", "args": {}}]),
               messages.ToolMessage("in 1.json", tool_call_id="c1"), messages.AIMessage("Found it."),
               messages.HumanMessage("cancel it")]
    return history, [messages.AIMessage("", tool_calls=[{"id": "c2", "name": "cancel", "args": {}}]),
                     messages.ToolMessage("cancelled", tool_call_id="c2")]


@pytest.mark.parametrize(("fmt", "history"), [("openai_responses", responses_history),
                                              ("langchain", langchain_history)])
def test_d10_dropping_the_last_observed_message_keeps_the_unread_pair_in_every_format(fmt, history):
    observed, unread = history()
    guard = ContextGuard(f"d10-{fmt}", format=fmt)
    guard.observe(observed)
    observed += unread
    report, context = guard.resolve(observed[:5] + observed[6:], kind="prune")
    assert (report.decision, report.resolution) == ("patch", "whole_pairs") and context[-2:] == unread
