"""Review F3: a loop that builds a new list each turn and passes no `current=`. The guard reads the unread
turns from the proposal (`unobserved.read_tail`): the caller's own objects and the tool ids it saw tell the
messages it observed from the others, a call or result it never saw is a turn appended since. It never
loses, moves or rewrites such a turn it can tell, never takes an orphan for one, and where it cannot tell
it takes none and warns, naming current=. Each list style a user writes: the same
objects in a new list (``messages + [reply]``), copied dicts (``[dict(m) for m in messages]``), deep copies,
and LangChain's message objects."""

from __future__ import annotations

import copy
import logging
import random

import pytest

from ctxwatch import ContextGuard, OrphanedToolPairError
from ctxwatch.formats import FormatBridge
from ctxwatch.validity import provider_problems

STYLES = {"rebuilt": list, "copied": lambda ms: [dict(m) for m in ms], "deep": copy.deepcopy}
SYSTEM = {"role": "system", "content": "You are a helpful agent."}


def call(call_id: str, name: str, arguments: str = "{}") -> dict:
    return {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function",
                                                 "function": {"name": name, "arguments": arguments}}]}


def tool(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def order_history() -> list[dict]:
    return [dict(SYSTEM), {"role": "user", "content": "find order ORD-1"}, call("c1", "find"),
            tool("c1", "order ORD-1 is in /srv/orders/1.json"), {"role": "assistant", "content": "Found it."},
            {"role": "user", "content": "ok, now cancel it"}]


UNREAD = [call("c2", "cancel", '{"id": "ORD-1"}'), tool("c2", "cancelled ORD-1")]


def rebuilding(guard: ContextGuard, style, history: list, unread: list) -> list:
    """The loop observes its history in two steps, each time a list built anew in `style` (so the guard
    knows it rebuilds), then builds the list it has now: the history followed by the `unread` turns."""
    half = len(history) - 1
    guard.observe(style(history[:half]))
    seen = style(history[:half]) + style(history[half:])
    guard.observe(seen)
    return style(seen) + style(unread)


def valid(context, fmt: str | None = None) -> bool:
    return not provider_problems(FormatBridge(fmt).to_model(context), fmt)


# the rewrites of review F3 (repro_3): each alters or drops the last message the model read
OPENAI_REWRITES = {
    "prune-drops-last-observed": ("prune", lambda now: now[:5] + now[6:], "patch"),
    "compact-folds-last-observed": ("compact", lambda now: [now[0], {"role": "user", "content": "Earlier: found "
                                                                      "ORD-1, asked to cancel"}] + now[6:], "patch"),
    "rewrite-edits-last-observed": ("rewrite", lambda now: now[:5] + [{"role": "user", "content": "cancel it"}]
                                    + now[6:], "defer"),
}


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("case", OPENAI_REWRITES)
def test_openai_the_unread_call_and_result_come_back_verbatim_without_current(style, case):
    kind, rewrite, decision = OPENAI_REWRITES[case]
    guard = ContextGuard(f"f3-{style}-{case}", format="openai_chat")
    now = rebuilding(guard, STYLES[style], order_history(), UNREAD)
    report, context = guard.resolve(rewrite(now), kind=kind)
    assert report.decision == decision, report.explain()
    assert context[-2:] == UNREAD and valid(context, "openai_chat")
    assert not any("cancelled ORD-1" in str(m.get("content")) for m in context[:-1])  # not folded into a note
    if style == "rebuilt":
        assert context[-1] is now[-1]  # the caller's own objects


def anthropic_history() -> list[dict]:
    return [{"role": "user", "content": "find order ORD-1"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "find", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "in /srv/1"},
                                         {"type": "text", "text": "and cancel it"}]}]


ANTHROPIC_UNREAD = [
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_2", "name": "cancel", "input": {"id": 1}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "cancelled ORD-1"}]}]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("kind", ["compact", "prune"])
def test_anthropic_a_rewrite_folding_the_last_observed_turn_keeps_the_unread_pair(style, kind):
    guard = ContextGuard(f"f3-anthropic-{style}-{kind}", format="anthropic")
    now = rebuilding(guard, STYLES[style], anthropic_history(), ANTHROPIC_UNREAD)
    folded = [{"role": "user", "content": "Earlier: ORD-1 is in /srv/1; cancel it"}] + now[3:]
    report, context = guard.resolve(folded, kind=kind)
    assert report.decision == "patch", report.explain()
    assert context[-2:] == ANTHROPIC_UNREAD and valid(context, "anthropic")
    assert "cancelled ORD-1" not in str(context[:-1])


def test_langchain_message_objects_in_a_rebuilt_list_keep_the_unread_call():
    messages = pytest.importorskip("langchain_core.messages")
    history = [messages.SystemMessage("You are a helpful agent."), messages.HumanMessage("find order ORD-1"),
               messages.AIMessage("", tool_calls=[{"id": "c1", "name": "find", "args": {}}]),
               messages.ToolMessage("in /srv/1", tool_call_id="c1"), messages.AIMessage("Found it."),
               messages.HumanMessage("ok, now cancel it")]
    unread = [messages.AIMessage("", tool_calls=[{"id": "c2", "name": "cancel", "args": {"id": 1}}]),
              messages.ToolMessage("cancelled ORD-1", tool_call_id="c2")]
    for style in (list, lambda ms: [m.model_copy() for m in ms]):
        guard = ContextGuard("f3-langchain", format="langchain")
        now = rebuilding(guard, style, history, unread)
        report, context = guard.resolve(now[:5] + now[6:], kind="prune")
        assert report.decision == "patch", report.explain()
        assert [m.content for m in context[-2:]] == ["", "cancelled ORD-1"] and context[-2].tool_calls[0]["id"] == "c2"
        assert valid(context, "langchain")


def test_a_text_turn_the_guard_cannot_tell_from_the_rewrites_is_one_warning_naming_current(caplog):
    """The unread turn is a plain answer and the rewrite dropped the last observed message: the answer may
    be the rewrite's or the model's. It is taken as the rewrite's (the documented reading; raising here
    stopped loops that observe and compact at once), with one warning naming current= and no message text;
    with current= the same call keeps the answer."""
    guard = ContextGuard("f3-unknown", format="openai_chat")
    answer = {"role": "assistant", "content": "Cancelled ORD-1."}
    now = rebuilding(guard, list, order_history(), [answer])
    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        guard.resolve(now[:5] + now[6:], kind="prune")
    (record,) = [r for r in caplog.records if "current=" in r.getMessage()]
    message = record.getMessage()
    assert "\n" not in message and "f3-unknown" in message and "Cancelled" not in message
    guard = ContextGuard("f3-unknown-current", format="openai_chat")
    now = rebuilding(guard, list, order_history(), [answer])
    report, context = guard.resolve(now[:5] + now[6:], kind="prune", current=now)
    assert report.decision == "patch" and context[-1] is answer


def test_a_loop_that_extends_its_list_in_place_is_never_asked_for_current():
    guard = ContextGuard("f3-in-place", format="openai_chat")
    messages = order_history()
    guard.observe(messages[:4])
    guard.observe(messages)  # the same list, grown
    report, context = guard.resolve(messages[:5], kind="prune")  # drops the last observed message
    assert report.decision == "patch" and valid(context, "openai_chat")


def test_an_orphaned_result_after_the_last_observed_message_is_refused_not_taken_as_a_new_turn():
    """On main the result without a call (after the last observed message) was taken as an unread turn,
    and the orphan it leaves was let through as already there."""
    guard = ContextGuard("f3-orphan", format="openai_chat")
    history = order_history()[:5]
    guard.observe(history)
    proposal = [copy.deepcopy(m) for m in history[:2] + history[4:]] + [tool("c9", "cancelled ORD-1")]
    with pytest.raises(OrphanedToolPairError):
        guard.apply(proposal, kind="prune")


def test_a_compaction_keeping_an_output_without_its_call_is_never_let_through_from_a_rebuilding_loop():
    """The OpenAI Agents SDK's orphaning compaction, from a store that hands back new objects each read:
    the rewrite's own orphaned output is never taken as a new turn: the guard refuses it, with current= or
    without."""
    user = {"role": "user", "content": "Where is A1?"}
    items = [user, {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_1", "output": "shipped, tracking TRK-1001"},
             {"role": "assistant", "content": "A1 has shipped."}]
    orphaning = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is A1?"}]},
                 {"type": "function_call_output", "call_id": "call_1", "output": "shipped"},
                 {"type": "compaction", "id": "cmp_item_1", "encrypted_content": "opaque-summary"}]
    guard = ContextGuard("f3-agents", format="openai_responses", enforce={"prefix_identity": "warn"})
    now = rebuilding(guard, copy.deepcopy, items, [])
    before = guard.context
    with pytest.raises(OrphanedToolPairError):
        guard.apply(copy.deepcopy(orphaning), kind="compact")
    assert guard.context == before
    with pytest.raises(OrphanedToolPairError, match=r"tool_result_without_use \[call_1"):
        guard.apply(copy.deepcopy(orphaning), kind="compact", current=now)


def openai_turn(rng: random.Random, first: int) -> list[dict]:
    ids = [f"call_{first + i}" for i in range(rng.randint(1, 4))]
    reply = {"role": "assistant", "content": None, "tool_calls": [
        {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}} for i in ids]}
    return [reply] + [tool(i, rng.choice(["ok", "[]", "ok"])) for i in ids]


def summaries(messages: list, rng: random.Random) -> list:
    """docs/guard.md's naive summarizer (the oldest 60% after the system prompt, pairs whole), or one that
    folds everything before the newest call (the last observed message with it)."""
    body = messages[1:]
    if rng.random() < 0.5:
        cut = int(len(body) * 0.6)
        while cut < len(body) and body[cut]["role"] == "tool":
            cut += 1
    else:
        cut = max(i for i, m in enumerate(body) if m.get("tool_calls"))
    note = "Earlier: " + "; ".join(str(m["content"]) for m in body[:cut] if m["role"] == "tool")
    return [messages[0], {"role": "user", "content": note}] + body[cut:]


@pytest.mark.parametrize("style", ["rebuilt", "copied"])
def test_the_documented_openai_loop_rebuilding_its_list_without_current_keeps_every_unread_turn(style):
    rebuild, rng = STYLES[style], random.Random(3)
    guard = ContextGuard(f"f3-loop-{style}", enforce={"contraction": "warn"})
    messages, made, shrunk = [dict(SYSTEM)], 0, 0
    for task in range(60):
        messages = rebuild(messages) + [{"role": "user", "content": f"task {task}"}]
        for _ in range(rng.randint(1, 3)):
            guard.observe(messages)
            turn = openai_turn(rng, made)
            made += len(turn) - 1
            messages = rebuild(messages) + turn
            if len(messages) > 30:
                size = len(messages)
                messages = guard.apply(summaries(messages, rng), kind="compact")
                assert messages[-len(turn):] == turn and valid(messages)
                shrunk += len(messages) < size
        guard.observe(messages)
        messages = rebuild(messages) + [{"role": "assistant", "content": "Done."}]
    assert shrunk >= 10


def anthropic_turn(rng: random.Random, first: int) -> list[dict]:
    ids = [f"toolu_{first + i}" for i in range(rng.randint(1, 4))]
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "lookup", "input": {}}
                                              for i in ids]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": rng.choice(["ok", "[]"])}
                                         for i in ids]}]


def anthropic_summaries(messages: list, rng: random.Random) -> list:
    """docs/guard.md's Anthropic summarizer (the oldest 60% becomes a user note, the rest starts at an
    assistant turn), or one that folds everything before the newest call."""
    if rng.random() < 0.5:
        cut = int(len(messages) * 0.6)
        while cut < len(messages) and messages[cut]["role"] != "assistant":
            cut += 1
    else:
        cut = len(messages) - 2
    results = [b["content"] for m in messages[:cut] if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"]
    return [{"role": "user", "content": "Earlier: " + "; ".join(results)}] + messages[cut:]


@pytest.mark.parametrize("style", ["rebuilt", "copied"])
def test_the_documented_anthropic_loop_rebuilding_its_list_without_current_keeps_every_unread_turn(style):
    rebuild, rng = STYLES[style], random.Random(5)
    guard = ContextGuard(f"f3-anthropic-loop-{style}", format="anthropic", enforce={"contraction": "warn"})
    messages, made, shrunk = [], 0, 0
    for task in range(60):
        messages = rebuild(messages) + [{"role": "user", "content": f"task {task}"}]
        for _ in range(rng.randint(1, 3)):
            guard.observe(messages)
            turn = anthropic_turn(rng, made)
            made += len(turn[0]["content"])
            messages = rebuild(messages) + turn
            if len(messages) > 30:
                size = len(messages)
                messages = guard.apply(anthropic_summaries(messages, rng), kind="compact")
                assert messages[-2:] == turn and valid(messages, "anthropic")
                shrunk += len(messages) < size
        guard.observe(messages)
        messages = rebuild(messages) + [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]
    assert shrunk >= 10
