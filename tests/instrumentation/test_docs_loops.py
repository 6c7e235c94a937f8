"""docs/guard.md's OpenAI Chat and Anthropic agent loops run as printed. Fake `OpenAI` and
`Anthropic` clients stand in for the real ones: they answer with the SDKs' own response types, look
three SKUs up per question, and reject (like the APIs' 400 invalid_request_error) any request that
breaks the provider's rules — so the loops also show that every context the guard hands back is one
the provider accepts, and that the compaction the loops do keeps their contexts bounded."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from ctxwatch.adapters import to_messages
from ctxwatch.validity import provider_problems

DOC = Path(__file__).resolve().parents[2] / "docs" / "guard.md"
LOOKUPS_PER_QUESTION = 3


def loop(title: str) -> str:
    section = DOC.read_text(encoding="utf-8").split(f"\n### {title}\n", 1)[1].split("\n### ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


class BadRequest(Exception):
    """What the API answers a request that breaks its rules with."""


def first_text(content) -> str:
    """A message's content, or the text of its first block (a turn an elision marker closes is a list)."""
    return content[0].get("text", "") if isinstance(content, list) and content else str(content)


def last_question(messages: list) -> int:
    """The index of the user's latest question (notes and markers are user turns too)."""
    return next(i for i in range(len(messages) - 1, -1, -1)
                if first_text(messages[i].get("content")).startswith("How many"))


def question_sku(text: str) -> int:
    return int(re.search(r"SKU-(\d{5})", text).group(1))


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[list] = []
        self.chat = self
        self.completions = self

    def create(self, *, model: str, messages: list, tools: list):
        from openai.types.chat import ChatCompletion

        problems = provider_problems(to_messages(messages, "openai_chat"), "openai_chat")
        if problems:
            raise BadRequest("; ".join(problems))
        self.requests.append(list(messages))
        asked = last_question(messages)
        done = sum(1 for m in messages[asked:] if m["role"] == "tool")
        sku = question_sku(messages[asked]["content"]) + done
        if done < LOOKUPS_PER_QUESTION:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{len(self.requests):04d}", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"sku": f"SKU-{sku:05d}"})}}]}
        else:
            message = {"role": "assistant", "content": f"Looked up {done} SKUs."}
        return ChatCompletion.model_validate({"id": "c", "object": "chat.completion", "created": 0, "model": model,
                                              "choices": [{"index": 0, "finish_reason": "stop", "message": message}]})


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[list] = []
        self.messages = self

    def create(self, *, model: str, max_tokens: int, system: str, tools: list, messages: list):
        from anthropic.types import Message

        problems = provider_problems(to_messages(messages, "anthropic"), "anthropic")
        if problems:
            raise BadRequest("; ".join(problems))
        self.requests.append(list(messages))
        asked = last_question(messages)
        done = sum(1 for m in messages[asked + 1:] if m["role"] == "user" and isinstance(m["content"], list))
        sku = question_sku(first_text(messages[asked]["content"])) + done
        if done < LOOKUPS_PER_QUESTION:
            content = [{"type": "text", "text": "Looking it up."},
                       {"type": "tool_use", "id": f"toolu_{len(self.requests):04d}", "name": "lookup",
                        "input": {"sku": f"SKU-{sku:05d}"}}]
        else:
            content = [{"type": "text", "text": f"Looked up {done} SKUs."}]
        return Message.model_validate({"id": "m", "type": "message", "role": "assistant", "model": model,
                                       "stop_reason": "end_turn", "content": content,
                                       "usage": {"input_tokens": 1, "output_tokens": 1}})


LOOPS = [("OpenAI Chat loop", "openai", "OpenAI", FakeOpenAI),
         ("Anthropic loop", "anthropic", "Anthropic", FakeAnthropic)]


def run_loop(monkeypatch, module: str, client_name: str, fake: type, code: str, tasks: int = 12, **names):
    """Run a documented loop's code (with `names` defined) against the fake client, which refuses any
    request its provider would; the client, with every request it got."""
    sdk = pytest.importorskip(module)
    client = fake()
    monkeypatch.setattr(sdk, client_name, lambda: client)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(code, {"__name__": "docs_loop", **names})
    assert printed.getvalue().strip() == f"Looked up {LOOKUPS_PER_QUESTION} SKUs."
    assert len(client.requests) == tasks * (LOOKUPS_PER_QUESTION + 1)
    return client


@pytest.mark.parametrize("title, module, client_name, fake", LOOPS)
def test_the_documented_agent_loop_runs_as_printed(monkeypatch, title, module, client_name, fake):
    client = run_loop(monkeypatch, module, client_name, fake, loop(title))
    sizes = [len(r) for r in client.requests]
    assert max(sizes) <= 40 and any(b < a for a, b in zip(sizes, sizes[1:], strict=False))  # compacted, bounded
    # the newest call and result were appended before compacting: every later request still carries them
    assert all(any("[ctxwatch] earlier turns were elided" in json.dumps(m) for m in r)
               for r in client.requests[sizes.index(max(sizes)) + 1:])


@pytest.mark.parametrize("title, module, client_name, fake", LOOPS)
def test_the_documented_loop_in_queue_mode_applies_the_queued_compaction_at_each_new_task(
        monkeypatch, title, module, client_name, fake):
    """review D12: with deferral="queue" the compaction waits for the next session boundary, and the loop,
    continuing with guard.messages as printed, sends the compacted context from there on."""
    code = loop(title)
    made = re.search(r'ContextGuard\("inventory-\w+", ', code).group(0)
    client = run_loop(monkeypatch, module, client_name, fake, code.replace(made, made + 'deferral="queue", '))
    sizes = [len(r) for r in client.requests]
    starts = sizes[:: LOOKUPS_PER_QUESTION + 1]  # the first request of each task: just after session_boundary()
    assert any(b < a for a, b in zip(starts, starts[1:], strict=False)), starts  # applied at a boundary
    assert max(sizes) <= 40, sizes  # never more than one task's growth past the compaction threshold
    assert not any("[ctxwatch] earlier turns were elided" in json.dumps(r) for r in client.requests)


def calls_answered_next(requests: list[list]) -> list[bool]:
    """For each tool call the model made (in the answer to one request), whether the next request still
    carries that call and its result as messages."""
    answered = []
    for before, after in zip(requests, requests[1:], strict=False):
        made = {c["id"] for m in after if m not in before for c in m.get("tool_calls", ())}
        results = {m["tool_call_id"] for m in after if m["role"] == "tool"}
        answered.extend(call in results for call in made)
    return answered


def test_the_documented_loop_that_builds_a_new_list_each_turn_keeps_every_unread_turn(monkeypatch):
    """A loop that rebuilds its list says where it is with current=: the newest call and its results reach
    the model as messages across every compaction, and each task's first request carries the previous
    task's answer."""
    client = run_loop(monkeypatch, "openai", "OpenAI", FakeOpenAI, loop("A loop that builds a new list each turn"))
    sizes = [len(r) for r in client.requests]
    assert max(sizes) <= 40 and any(b < a for a, b in zip(sizes, sizes[1:], strict=False))  # compacted, bounded
    assert any("[ctxwatch] earlier turns were elided" in json.dumps(r) for r in client.requests)
    calls = calls_answered_next(client.requests)
    assert len(calls) == 12 * LOOKUPS_PER_QUESTION and all(calls)
    starts = client.requests[LOOKUPS_PER_QUESTION + 1:: LOOKUPS_PER_QUESTION + 1]
    assert all(r[-2] == {"role": "assistant", "content": f"Looked up {LOOKUPS_PER_QUESTION} SKUs."} for r in starts)


def test_without_current_the_rebuilt_loop_loses_what_the_guard_cannot_see(monkeypatch):
    """The same loop with current= left out: the answer at each task's end, appended after the last
    observe() to a list the guard never saw, is not in guard.messages (what current= is for)."""
    pytest.importorskip("openai")
    client = FakeOpenAI()
    monkeypatch.setattr("openai.OpenAI", lambda: client)
    code = loop("A loop that builds a new list each turn").replace(", current=messages", "") \
        .replace("current=messages", "")
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, {"__name__": "docs_loop"})
    starts = client.requests[LOOKUPS_PER_QUESTION + 1:: LOOKUPS_PER_QUESTION + 1]
    lost_answers = [r for r in starts if r[-2].get("content") != f"Looked up {LOOKUPS_PER_QUESTION} SKUs."]
    assert len(lost_answers) == len(starts) == 11


def test_the_system_prompt_the_openai_loop_starts_with_reaches_every_request(monkeypatch):
    """guard.messages of a guard that has seen nothing yet is the list given as current= (the OpenAI loop's
    system prompt), not an empty one."""
    client = run_loop(monkeypatch, "openai", "OpenAI", FakeOpenAI, loop("OpenAI Chat loop"))
    assert all(r[0]["role"] == "system" for r in client.requests)


def carries_results(message: dict) -> bool:
    content = message.get("content")
    return message["role"] == "tool" or (message["role"] == "user" and isinstance(content, list)
                                         and any(b["type"] == "tool_result" for b in content))


def without_oldest_call(messages: list) -> list:
    """A pair-dropping pruner: the oldest assistant turn with tool calls goes, with the results after it."""
    for i, m in enumerate(messages):
        content = m.get("content")
        if m["role"] == "assistant" and (m.get("tool_calls") or isinstance(content, list)
                                         and any(b["type"] == "tool_use" for b in content)):
            end = i + 1
            while end < len(messages) and carries_results(messages[end]):
                end += 1
            return messages[:i] + messages[end:]
    return messages


@pytest.mark.parametrize("title, module, client_name, fake", LOOPS)
def test_the_documented_loop_as_one_long_conversation_applies_its_prunings_at_once(
        monkeypatch, title, module, client_name, fake):
    """review F2's side observation: in the Anthropic shape a pair-dropping pruning proposed after appending
    (the docs' place) was never applied — the elision marker, a user turn, would have come before the unread
    assistant turn — and in one long conversation (no session boundary) it waited forever. Now the marker
    closes the consumed user turn before the frontier: every pruning is applied as whole-pair compaction at
    once, in both shapes, the unread call and result come back last, and every request is one the provider
    accepts (the fake client refuses any other)."""
    resolutions: list[str | None] = []

    def prune(guard, messages: list) -> list:
        unread = messages[-2:]  # the call and its result, appended since observe()
        report, context = guard.resolve(without_oldest_call(messages), kind="prune")
        assert context[-2:] == unread, report.findings
        resolutions.append(report.resolution)
        return context

    code = loop(title).replace("range(12)", "range(30)").replace("    guard.session_boundary()", "    pass")
    code = code.replace('guard.apply(summarize(messages), kind="compact")', "prune(guard, messages)")
    client = run_loop(monkeypatch, module, client_name, fake, code, tasks=30, prune=prune)
    assert len(resolutions) > 50 and set(resolutions) == {"whole_pairs"}, resolutions
    sizes = [len(r) for r in client.requests]
    unpruned = 30 * (2 * LOOKUPS_PER_QUESTION + 2)  # what the conversation would have grown to
    assert max(sizes) < unpruned * 3 // 4, sizes  # the prunings reached the model
