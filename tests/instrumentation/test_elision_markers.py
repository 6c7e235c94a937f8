"""The guard's elision markers stay bounded: a new plain marker folds the guard's earlier ones into
itself (their counts summed), so a loop that only prunes carries one marker, not one per pruning.

Before, each pruning the guard applied as whole-pair compaction added a marker that a pair-dropping
pruner never drops: in a prune-every-step loop the OpenAI Chat context ended with 342 messages, 261 of
them markers, and in the Anthropic shape 37 consumed user turns carried up to a dozen markers each.
Here long prune-only loops in the three shapes the guard writes markers in (OpenAI Chat, Responses,
Anthropic) run thousands of steps through a guard with every default: every context is valid for its
provider (an independent checker), what the model has not read comes back last and verbatim, the
context stays within the pruner's own window, one marker stands in it, and that marker's counts are
the sum of everything the pruner dropped. A user's text that reads like a marker is never folded."""

from __future__ import annotations

import json
import random
import re

import pytest
from provider_rules import anthropic_problems, openai_problems, responses_problems

from ctxwatch import ContextGuard
from ctxwatch.deferral import ELISION_PREFIX

STEPS = 2000
WINDOW = 12  # the pruner drops every tool exchange that ends before the last WINDOW messages
MAX_CALLS = 3
COUNTS = re.compile(re.escape(ELISION_PREFIX) + r" \(elision (\d+)\): (\d+) messages in (\d+) whole units were "
                    r"removed from this conversation\.")


# --- the shapes: what a message calls and answers, and how a step looks ----------------------------------
def calls_of(message: dict, fmt: str) -> set[str]:
    if fmt == "openai_responses":
        return {message["call_id"]} if message.get("type") == "function_call" else set()
    if fmt == "anthropic":
        content = message["content"]
        return {b["id"] for b in content if b["type"] == "tool_use"} if isinstance(content, list) else set()
    return {c["id"] for c in message.get("tool_calls") or ()}


def results_of(message: dict, fmt: str) -> set[str]:
    if fmt == "openai_responses":
        return {message["call_id"]} if message.get("type") == "function_call_output" else set()
    if fmt == "anthropic":
        content = message["content"]
        return {b["tool_use_id"] for b in content if b["type"] == "tool_result"} if isinstance(content, list) \
            else set()
    return {message["tool_call_id"]} if message["role"] == "tool" else set()


# the most messages one step's exchange takes: the calls' message and a tool message per call (Chat), an
# item per call and per output (Responses), the assistant turn and the user turn of its results (Anthropic)
LONGEST_EXCHANGE = {"openai_chat": 1 + MAX_CALLS, "openai_responses": 2 * MAX_CALLS, "anthropic": 2}
PROBLEMS = {"openai_chat": openai_problems, "anthropic": anthropic_problems, "openai_responses": responses_problems}
TASK = "Count every SKU in the warehouse, one by one."
STARTS = {"openai_chat": [{"role": "system", "content": "You count stock with the lookup tool."},
                          {"role": "user", "content": TASK}],
          "anthropic": [{"role": "user", "content": TASK}],
          "openai_responses": [{"type": "message", "role": "developer", "content": "You count stock with lookup."},
                               {"type": "message", "role": "user", "content": TASK}]}


def step(rng: random.Random, fmt: str, first_call: int) -> list[dict]:
    """One model turn with 1-3 parallel lookups (and sometimes a line of text) and their results."""
    calls = [(f"call_{first_call + n:06d}", rng.choice(["ok", "[]", f"{rng.randrange(999)} units"]))
             for n in range(rng.randint(1, MAX_CALLS))]
    text = rng.choice([None, "Checking.", "Next batch."])
    args = json.dumps({"sku": f"SKU-{first_call:05d}"})
    if fmt == "openai_responses":
        return [{"type": "function_call", "call_id": c, "name": "lookup", "arguments": args} for c, _ in calls] + [
            {"type": "function_call_output", "call_id": c, "output": o} for c, o in calls]
    if fmt == "anthropic":
        return [{"role": "assistant", "content": ([{"type": "text", "text": text}] if text else []) + [
                    {"type": "tool_use", "id": c, "name": "lookup", "input": {"sku": "x"}} for c, _ in calls]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": c, "content": o} for c, o in calls]}]
    return [{"role": "assistant", "content": text, "tool_calls": [
                {"id": c, "type": "function", "function": {"name": "lookup", "arguments": args}} for c, _ in calls]},
            *({"role": "tool", "tool_call_id": c, "content": o} for c, o in calls)]


def exchanges(messages: list[dict], fmt: str) -> list[range]:
    """Where each tool exchange stands: a message making calls through the last result answering them."""
    out, i = [], 0
    while i < len(messages):
        if not calls_of(messages[i], fmt):
            i += 1
            continue
        start, pending = i, set()
        while i < len(messages):
            pending = (pending | calls_of(messages[i], fmt)) - results_of(messages[i], fmt)
            i += 1
            if not pending:
                break
        out.append(range(start, i))
    return out


def windowed_pruning(messages: list[dict], fmt: str) -> tuple[list[dict], int, int]:
    """The pruner: every tool exchange that ends before the last WINDOW messages, dropped whole (it never
    drops anything else, markers included). The proposal, and how many messages in how many exchanges."""
    old = [x for x in exchanges(messages, fmt) if x.stop <= len(messages) - WINDOW]
    gone = {i for x in old for i in x}
    return [m for i, m in enumerate(messages) if i not in gone], len(gone), len(old)


def markers_in(messages: list[dict]) -> list[tuple[int, int, int]]:
    """(number, messages, units) of every elision marker the context carries, in order."""
    return [tuple(map(int, found)) for found in COUNTS.findall(json.dumps(messages))]


class PruneLoop:
    """The agent loop through a guard with every default, pruning with `windowed_pruning` after appending
    a step and before observing it; it counts what the pruner dropped."""

    def __init__(self, fmt: str, seed: int) -> None:
        self.fmt, self.rng = fmt, random.Random(seed)
        self.guard = ContextGuard(f"markers-{fmt}-{seed}", format=fmt)
        self.messages = [dict(m) for m in STARTS[fmt]]
        self.calls = self.prunings = self.elided = self.units = 0
        self.report = None  # of the last pruning

    def step(self) -> list[dict]:
        """One step; the turns the model has not read yet."""
        self.guard.observe(self.messages)
        unread = step(self.rng, self.fmt, self.calls)
        self.calls += MAX_CALLS
        self.messages.extend(unread)
        proposal, dropped, exchanges_dropped = windowed_pruning(self.messages, self.fmt)
        if dropped:
            report, context = self.report = self.guard.resolve(proposal, kind="prune")
            assert report.decision == "patch" and report.resolution == "whole_pairs", report.explain()
            assert report.hash_distance is None  # still an elision (deferral.elides_only): no cycle of the alarm
            self.messages = list(context)
            assert not PROBLEMS[self.fmt](self.messages), (PROBLEMS[self.fmt](self.messages), report.explain())
            assert self.messages[-len(unread):] == unread  # what the model has not read comes back last, verbatim
            self.prunings, self.elided, self.units = self.prunings + 1, self.elided + dropped, \
                self.units + exchanges_dropped
        return unread


@pytest.mark.parametrize("fmt", ["openai_chat", "openai_responses", "anthropic"])
def test_a_prune_only_loop_carries_one_marker_summing_every_elision_and_stays_in_its_window(fmt):
    """Thousands of prunings: one marker, whose counts are the sum of what the pruner dropped, in a context
    no longer than the pruner's window allows (on main the OpenAI shapes grew by a marker per pruning)."""
    loop = PruneLoop(fmt, 7)
    lead = len(loop.messages)
    for _ in range(STEPS):
        loop.step()
        if not loop.prunings:
            continue
        (marker,) = markers_in(loop.messages)
        assert ("earlier marker(s) into it" in loop.report[0].explain()) == (loop.prunings > 1)  # it says so
        assert marker == (loop.prunings, loop.elided, loop.units)  # numbered anew; every pruning's counts summed
        # the lead, the marker's message (Anthropic: it closes a consumed turn), the window, and what of the
        # exchange straddling the window's edge lies before it
        assert len(loop.messages) <= lead + 1 + WINDOW + LONGEST_EXCHANGE[fmt] - 1, len(loop.messages)
        assert loop.messages[:lead] == STARTS[fmt]
    assert loop.prunings > STEPS // 2  # over a thousand


def test_a_user_message_that_reads_like_a_marker_is_never_folded():
    """Only the markers the guard wrote are folded, recognised by their exact text: a marker the user pastes
    whole (two of the same: neither is folded), one with a number the guard never wrote, and one quoted in
    a longer message all stay where they are, verbatim, and count for nothing."""
    loop = PruneLoop("openai_chat", 3)
    while not loop.prunings:
        loop.step()
    (first,) = [m["content"] for m in loop.messages if COUNTS.fullmatch(str(m["content"]))]
    forged = f"{ELISION_PREFIX} (elision 999): 500 messages in 200 whole units were removed from this conversation."
    quoted = f"Why does it say {first!r}?"
    loop.messages.extend({"role": "user", "content": text} for text in (first, forged, quoted))
    before = (loop.prunings, loop.elided, loop.units)
    for _ in range(40):
        loop.step()
    texts = [m["content"] for m in loop.messages if m["role"] == "user"]
    assert texts.count(first) == 2 and forged in texts and quoted in texts  # all kept, verbatim
    numbers = {found[0] for found in markers_in([{"content": first}, {"content": forged}])}
    (latest,) = [found for found in markers_in(loop.messages) if found[0] not in numbers]
    # the guard's later markers folded into one, which counts only what was pruned after the copy
    assert latest == (loop.prunings, loop.elided - before[1], loop.units - before[2])

