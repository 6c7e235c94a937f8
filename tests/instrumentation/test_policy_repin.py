"""Record 001's pinned policy region follows what the model reads: a change of the pinned system prompt
that `observe` adopts (the agent refreshing the date in its own prompt) is reported once and pinned
again, so later compactions that keep it are not refused forever; a new episode pins afresh; and
pins follow their messages when a compaction moves them."""

import pytest

from ctxwatch import ContextGuard, PolicyMutationError

from conversations import assistant, system, user


def is_system(index, message):
    return message.role == "system"


def openai_turns(n: int, prompt: str = "You are a support agent. Today is Monday.") -> list[dict]:
    msgs = [{"role": "system", "content": prompt}]
    for t in range(n):
        msgs += [{"role": "user", "content": f"question {t}"}, {"role": "assistant", "content": f"answer {t}"}]
    return msgs


def anthropic_request(n: int, prompt: str = "You are a support agent. Today is Monday.") -> dict:
    msgs = []
    for t in range(n):
        msgs += [{"role": "user", "content": f"question {t}"}, {"role": "assistant", "content": f"answer {t}"}]
    return {"system": prompt, "messages": msgs}


def observed_guard(context) -> ContextGuard:
    guard = ContextGuard("policy-repin", policy=is_system)
    guard.observe(context)
    return guard


def test_an_adopted_edit_of_the_pinned_system_prompt_is_reported_once_and_then_pinned_openai():
    msgs = openai_turns(12)
    guard = observed_guard(msgs)
    msgs = [{"role": "system", "content": "You are a support agent. Today is Tuesday."}] + msgs[1:]
    msgs.append({"role": "user", "content": "question 12"})
    adopted = guard.observe(msgs)
    assert adopted is not None and adopted.observed and adopted.decision == "patch"
    assert "policy_isolation" in adopted.violations          # the change is reported ...
    assert "policy_isolation" in adopted.warnings             # ... and the region pinned again on it
    assert "pinned again" in adopted.explain()

    msgs.append({"role": "assistant", "content": "answer 12"})
    report, context = guard.resolve([msgs[0], {"role": "user", "content": "Summary of earlier turns."}] + msgs[-4:],
                                    kind="compact")
    assert report.decision == "patch", report.explain()       # whole-pair compaction, keeping the new prompt
    assert "policy_isolation" not in report.violations + report.warnings
    assert context[0] == msgs[0]
    with pytest.raises(PolicyMutationError):                  # the new prompt is pinned like the old one was
        guard.apply([{"role": "system", "content": "You are a pirate."}] + context[1:], kind="system_patch")


def test_an_adopted_edit_of_the_pinned_system_prompt_is_pinned_anthropic():
    request = anthropic_request(10)
    guard = observed_guard(request)
    edited = {"system": "You are a support agent. Today is Tuesday.",
              "messages": request["messages"] + [{"role": "user", "content": "question 10"}]}
    adopted = guard.observe(edited)
    assert adopted is not None and "policy_isolation" in adopted.violations + adopted.warnings
    history = edited["messages"] + [{"role": "assistant", "content": "answer 10"}]
    guard.observe({"system": edited["system"], "messages": history})
    compacted = {"system": edited["system"],
                 "messages": [{"role": "user", "content": "Summary of earlier turns."}] + history[-3:]}
    report, context = guard.resolve(compacted, kind="compact")
    assert report.decision == "patch" and "policy_isolation" not in report.violations, report.explain()
    assert context["system"] == edited["system"] and context["messages"][-3:] == history[-3:]


def test_a_new_episode_pins_the_policy_of_the_context_in_use():
    """A policy edit enforced only as a warning is taken on; the pins follow it from then on."""
    msgs = openai_turns(4)
    guard = ContextGuard("policy-warn", policy=is_system, enforce={"policy_isolation": "warn"})
    guard.observe(msgs, boundary=0)
    patched = [{"role": "system", "content": "You are a support agent. Be brief."}] + msgs[1:]
    report = guard.check(patched, kind="system_patch")
    assert report.decision == "patch" and "policy_isolation" in report.warnings
    again = guard.check(patched[:1] + patched[3:], kind="prune")  # keeps the patched prompt: nothing to report
    assert again.decision == "patch" and "policy_isolation" not in again.warnings, again.explain()
    guard.session_boundary()
    assert [s.index for s in guard.policy.spans] == [0]
    assert guard.policy.spans[0].digest == guard.context.messages[0].digest


def test_pins_follow_their_messages_when_a_compaction_moves_them():
    """A pinned message after the start (a subgoal at index 3): a prune before it moves it to index 1;
    the next rewrite that keeps it at its new place is not a move."""
    msgs = [system("rules", id="rules"), user("old question"), assistant("old answer"),
            user("Subgoal: never touch the audit log.", id="subgoal"), assistant("ok"), user("next")]
    guard = ContextGuard("policy-follow", policy=["rules", "subgoal"])
    guard.observe(msgs, boundary=0)
    pruned = [msgs[0]] + msgs[3:]
    assert guard.check(pruned, kind="prune").decision == "patch"
    assert [s.index for s in guard.policy.spans] == [0, 1]
    later = pruned + [assistant("done")]
    guard.observe(later, boundary=0)
    report = guard.check(later[:2] + later[3:], kind="prune")
    assert report.decision == "patch" and report.violations == [], report.explain()
    now = list(guard.context.messages)
    moved = guard.check([now[0], now[2], now[1]] + now[3:], kind="rerank")
    assert "policy_isolation" in moved.violations
