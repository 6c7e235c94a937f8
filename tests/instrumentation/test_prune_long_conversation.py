"""Record 000's deferral and record 003's cycles in one long conversation (no session boundary): a
pair-dropping pruning proposed after appending alters the consumed prefix, so it is deferred and
settled as whole-pair compaction. In the Anthropic shape no turn of its own fits the elision marker
(every unit boundary is a user turn before an assistant turn), so the marker closes the nearest
consumed user turn; before, the pruning waited for a session boundary that never came (review F2's
side observation). An elision writes nothing of its own, so it is no rewrite cycle of the alarm: the
healthy loop of review F2 (docs/guard.md's loop and summarizer, tools that do not echo their input),
with its prunings now applied, is never halted (with the prunings counted as cycles, 11 of its 12 seeds
halted)."""

from __future__ import annotations

import json
import random
import re

import pytest
from provider_rules import anthropic_problems, openai_problems

from ctxwatch import ContextGuard, Message, TextPart, ToolCall, ToolResult, semconv
from ctxwatch.deferral import elides_only, elision_marker
from ctxwatch.diff import Change
from ctxwatch.errors import ContractionRegimeError
from ctxwatch.model import Context
from ctxwatch.simulate.loops import converging_loop

STEPS = 300  # what review F2's repro runs
TOOLS = [{"name": "lookup", "description": "Units in stock for a SKU.",
          "input_schema": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}]


# --- the loop: docs/guard.md's agent loop with tools that do not echo their input (review F2) ------------
class Conversation:
    """One long conversation in `fmt` ("anthropic" or "openai_chat"): each step the model answers with
    text and 0-4 parallel lookups (a text-only answer gets a user nudge), appended in place after the
    guard observed the context."""

    def __init__(self, seed: int, fmt: str) -> None:
        self.rng, self.fmt, self.calls = random.Random(seed), fmt, 0
        task = {"role": "user", "content": "Count every SKU in the warehouse, one by one."}
        self.messages: list[dict] = [task] if fmt == "anthropic" else [
            {"role": "system", "content": "You count stock with the lookup tool."}, task]

    def step(self, turn: int) -> list[dict]:
        rng = self.rng
        k = rng.choice([0, 1, 1, 1, 2, 3, 4])
        text = rng.choice(["Checking.", "Next batch.", "OK.", f"Looking at batch {turn}."]) \
            if rng.random() < 0.6 or k == 0 else None
        calls = []  # (id, the SKU asked for, what the tool answers: never the SKU)
        for _ in range(k):
            self.calls += 1
            cid = f"toolu_{self.calls:06d}"
            answer = rng.choice(["ok", "[]", f"{cid}: {rng.randrange(999)} units"])
            calls.append((cid, f"SKU-{self.calls % 100:05d}", answer))
        nudge = {"role": "user", "content": rng.choice(["continue", "go on"])}
        if self.fmt == "anthropic":
            blocks = ([{"type": "text", "text": text}] if text else []) + [
                {"type": "tool_use", "id": c, "name": "lookup", "input": {"sku": s}} for c, s, _ in calls]
            new = [{"role": "assistant", "content": blocks}, {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c, "content": o} for c, _, o in calls]} if calls else nudge]
        else:
            new = [{"role": "assistant", "content": text, **({"tool_calls": [
                {"id": c, "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"sku": s})}}
                for c, s, _ in calls]} if calls else {})}]
            new += [{"role": "tool", "tool_call_id": c, "content": o} for c, _, o in calls] if calls else [nudge]
        self.messages.extend(new)
        return new

    def problems(self, messages: list[dict]) -> list[str]:
        return (anthropic_problems if self.fmt == "anthropic" else openai_problems)(messages)


def makes_calls(message: dict) -> bool:
    return message["role"] == "assistant" and bool(message.get("tool_calls") or isinstance(
        message["content"], list) and any(b["type"] == "tool_use" for b in message["content"]))


def carries_results(message: dict) -> bool:
    return message["role"] == "tool" or message["role"] == "user" and isinstance(message["content"], list) \
        and any(b["type"] == "tool_result" for b in message["content"])


def without_oldest_call(messages: list[dict], keep: int) -> list[dict] | None:
    """A pair-dropping pruner: the oldest assistant turn with calls and the results that answer it, among
    all but the last `keep` messages (None: there is none)."""
    start = next((i for i, m in enumerate(messages[:-keep]) if makes_calls(m)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(messages) and carries_results(messages[end]):
        end += 1
    return messages[:start] + messages[end:]


def summarize(messages: list[dict]) -> list[dict]:
    """docs/guard.md's naive summarizer: the oldest 60% become one note of their tool results."""
    lead = 0 if messages[0]["role"] != "system" else 1
    cut = int(len(messages) * 0.6)
    while cut < len(messages) and messages[cut]["role"] != "assistant":
        cut += 1
    results = [m["content"] for m in messages[lead:cut] if m["role"] == "tool"] + [
        b["content"] for m in messages[lead:cut] if isinstance(m["content"], list)
        for b in m["content"] if b["type"] == "tool_result"]
    return messages[:lead] + [{"role": "user", "content": "Earlier: " + "; ".join(results)}] + messages[cut:]


def run(seed: int, fmt: str, *, summaries: bool) -> tuple[list[tuple[str, object, list[dict], list[dict]]], int]:
    """The loop through a guard with every default: after appending and before observing, once over 30
    messages, a pruning at every step (with `summaries`: at one step in two, one time in three a pruning
    and else the docs' summary). (kind, report, context handed back, unread turns) of each rewrite, and
    the length the conversation would have without them."""
    guard = ContextGuard(f"long-{fmt}-{seed}", agent="inv", format=fmt, tools=TOOLS if fmt == "anthropic" else None)
    loop, out = Conversation(seed, fmt), []
    unpruned = len(loop.messages)
    for turn in range(STEPS):
        guard.observe(loop.messages)
        unread = loop.step(turn)
        unpruned += len(unread)
        if len(loop.messages) > 30 and (not summaries or loop.rng.random() < 0.5):
            prune = not summaries or loop.rng.random() < 1 / 3
            kind, proposal = ("prune", without_oldest_call(loop.messages, len(unread))) if prune else \
                ("compact", summarize(loop.messages))
            if proposal is None:
                continue
            report, context = guard.resolve(proposal, kind=kind)
            out.append((kind, report, list(context), unread))
            loop.messages = context
    return out, unpruned


@pytest.mark.parametrize("fmt", ["anthropic", "openai_chat"])
def test_a_deferred_pruning_in_one_long_conversation_is_applied_and_every_context_is_valid(fmt):
    """On main the Anthropic shape kept every pruning deferred (decision defer, no resolution): the
    context only grew. Now each one is applied as whole-pair compaction at once. The pruner keeps every
    text turn; every marker the guard wrote and the pruner dropped with its turn is folded into the next,
    so the markers' counts add up to one unit per pruning so far (`test_markers_on_turns_the_pruner_keeps`)."""
    rewrites, unpruned = run(4, fmt, summaries=False)
    assert len(rewrites) > 200
    for number, (_, report, context, unread) in enumerate(rewrites, start=1):
        assert report.decision == "patch" and report.resolution == "whole_pairs", report.explain()
        markers = markers_in(context)
        assert markers[-1][0] == number and sum(units for _, units in markers) == number, (markers, report.explain())
        assert not Conversation(0, fmt).problems(context), (Conversation(0, fmt).problems(context), report.explain())
        assert context[-len(unread):] == unread  # what the model has not read comes back last, verbatim
        assert report.messages_after < report.messages_before + len(unread)
    final = rewrites[-1][2]
    assert len(final) < 0.5 * unpruned  # every pair of calls and results but the unread ones was dropped
    assert not any(makes_calls(m) for m in final[:-len(rewrites[-1][3])])
    marked = [m for m in final if "earlier turns were elided" in json.dumps(m)]
    assert marked and {m["role"] for m in marked} == {"user"}


def markers_in(context: list[dict]) -> list[tuple[int, int]]:
    """(number, units) of every elision marker in `context`."""
    return [(int(number), int(units)) for number, units in re.findall(
        r"elided \(elision (\d+)\): \d+ messages in (\d+) whole units", json.dumps(context))]


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic"])
def test_markers_on_turns_the_pruner_keeps_are_folded_into_one(fmt):
    """The loop above: before, each pruning added a marker the pruner never dropped (the OpenAI context ended
    with 261 of them in 342 messages; 37 Anthropic nudge turns carried up to a dozen each). Now every context
    carries one, the newest, counting one unit per pruning. In the Anthropic shape a marker that closes a
    turn the pruner keeps (a nudge, when no turn of tool results is left to close) is taken off again when
    the next one folds it (an elision: docs/alarm.md, "What is a cycle")."""
    rewrites, _ = run(4, fmt, summaries=False)
    for number, (_, report, context, _) in enumerate(rewrites, start=1):
        assert markers_in(context) == [(number, number)], (markers_in(context), report.explain())


@pytest.mark.parametrize("seed", range(1, 13))
def test_the_healthy_long_loop_with_its_prunings_applied_is_never_halted(seed):
    """Review F2's loop (seeds 1-12, 300 steps): summaries and prunings, every one applied, no contraction
    and no halt; the prunings' reports carry no hash distance, so the monitor's detector is not fed them
    either (`semconv.feeds_detector`), while every summary is a cycle."""
    rewrites, _ = run(seed, "anthropic", summaries=True)
    kinds = {kind for kind, *_ in rewrites}
    assert kinds == {"prune", "compact"}
    for kind, report, context, unread in rewrites:
        assert report.decision == "patch", report.explain()
        assert report.contraction_state == "healthy" and "contraction" not in report.violations + report.warnings
        assert not anthropic_problems(context) and context[-len(unread):] == unread
        fed = semconv.feeds_detector(report.kind, report.decision, report.hash_distance)
        assert fed == (kind == "compact"), report.explain()
    assert len(rewrites[-1][2]) < 60  # the context stays bounded (it grew without bound once halted)


def test_a_change_elides_only_when_it_writes_nothing_of_its_own():
    call = Message("assistant", [ToolCall("t1", "lookup", '{"sku": "SKU-00001"}')])
    result = Message("user", [ToolResult("t1", "ok 45 units")])
    question = Message("user", [TextPart("How many of SKU-00001?")])
    before = Context((question, Message("assistant", [TextPart("Looking.")]), call, result,
                      Message("assistant", [TextPart("45.")])))
    plain = elision_marker("user", 2, 1, "", 1)
    carrying = elision_marker("user", 2, 1, "the lookup said 45", 1)

    def elides(*after: Message) -> bool:
        return elides_only(Change.between(before, after, "prune"))

    head, tail = before.messages[:2], before.messages[4:]
    assert elides(*head, *tail)  # the pair dropped
    assert elides(*head, plain, *tail)  # with a plain marker of its own
    closed = Message("user", [*question.parts, *plain.parts])
    assert elides(closed, before.messages[1], *tail)  # the marker closing a consumed turn
    assert elides(*head, call, Message("user", [ToolResult("t1", "[cleared]")]), *tail)  # cleared in place
    assert not elides(*head, carrying, *tail)  # the marker carries a rewrite's text: a rewrite
    assert not elides(Message("user", [TextPart("Earlier: ok 45 units")]), *tail)  # a summary
    assert not elides(Message("user", [*question.parts, *carrying.parts]), before.messages[1], *tail)
    assert not elides(*head, call, Message("user", [ToolResult("t1", "ok 45 units, all counted")]), *tail)
    assert not elides(*before.messages, Message("user", [TextPart("next")]))  # an append removes nothing
    assert not elides(before.messages[0], before.messages[4], before.messages[1])  # a re-rank that also drops


def test_a_loop_halted_for_contraction_still_elides_and_its_rewrites_stay_refused():
    """The halt is the alarm's, and an elision is no cycle of it: once a converging summary chain has
    halted the guard, a pruning that drops a consumed tool pair is applied (the context stays bounded),
    while a summary is still refused."""
    loop = converging_loop(0)
    guard = ContextGuard("halted-elides")
    with pytest.raises(ContractionRegimeError):
        for cycle in loop.cycles:
            guard.observe(list(cycle.pre), boundary=1)
            guard.apply(list(cycle.post), kind="compact")
    messages = list(guard.messages)
    for n in range(3):
        messages += [Message("assistant", [ToolCall(f"c{n}", "lookup", json.dumps({"sku": f"SKU-0000{n}"}))]),
                     Message("tool", [ToolResult(f"c{n}", "ok")]), Message("assistant", [TextPart("Counted.")])]
    guard.observe(messages)
    pair = next(i for i, m in enumerate(messages) if m.call_ids)
    report, context = guard.resolve(messages[:pair] + messages[pair + 2:], kind="prune")
    assert report.decision == "patch" and report.hash_distance is None, report.explain()
    calls = [c for m in context for c in m.call_ids]
    assert calls == ["c1", "c2"] and context[:pair] == messages[:pair]  # c0's pair elided, the rest kept
    guard.observe(context)
    report, _ = guard.resolve([context[0], Message("user", [TextPart("Earlier: counted.")])], kind="compact")
    assert report.decision == "halt", report.explain()
