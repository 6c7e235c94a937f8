"""Record 003 (literal preservation, the contraction regime) with the OpenAI Agents SDK's server-side
compaction: a long-running agent set up as the README says — the real Runner, `GuardedSession` around
the SDK's `OpenAIResponsesCompactionSession` over a real SQLiteSession, the default guard — compacting
through a real AsyncOpenAI client whose ``/responses/compact`` is answered in-process by an httpx
MockTransport the way OpenAI's endpoint answers (the input's user messages verbatim, then one opaque
``compaction`` item). The literals behind that item are unknown to the guard, not lost: hundreds of
turns and dozens of compactions run without a halt, every request the model is sent is valid, and no
compaction is a cycle of the alarm. The same loop with a compactor that drops the literals in the
clear (a readable summary that keeps none of them) is still halted (review F1)."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

pytest.importorskip("agents")

import httpx2  # noqa: E402  (the openai SDK speaks httpx2)
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.memory import OpenAIResponsesCompactionSession  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from ctxwatch import ContextGuard, ContractionRegimeError, semconv  # noqa: E402
from ctxwatch.integrations.openai_agents import GuardedSession  # noqa: E402

set_tracing_disabled(True)  # the SDK's own trace export would try the network

TURNS = 240


@function_tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: shipped, tracking TRK-{sum(map(ord, order)) % 9000 + 1000}"


def opaque_summary(users: list[dict], number: int) -> list[dict]:
    """OpenAI's answer: the user messages, then one compaction item whose summary is encrypted."""
    return users + [{"type": "compaction", "id": f"cmp_{number}", "encrypted_content": f"gAAAA{number:06d}" * 8}]


def readable_summary(users: list[dict], number: int) -> list[dict]:
    """A compactor that keeps nothing but a readable note: every order id it was given is dropped in the clear."""
    return [{"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": f"Summary {number}: several orders were looked up."}]}]


class Compactor:
    """``/responses/compact`` answered in-process by `summarize`; counts the compactions it answered."""

    def __init__(self, summarize) -> None:
        self.summarize, self.answered = summarize, 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith("/responses/compact")
        items = json.loads(request.content).get("input") or []
        self.answered += 1
        users = [i for i in items if isinstance(i, dict) and i.get("role") == "user"]
        return httpx2.Response(200, json={
            "id": f"resp_cmp_{self.answered}", "object": "response.compaction", "created_at": 0,
            "output": self.summarize(users, self.answered),
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}})

    def client(self) -> AsyncOpenAI:
        return AsyncOpenAI(api_key="test-key", base_url="http://api.invalid/v1", max_retries=0,
                           http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle)))


class Recording(ScriptedModel):
    """The SDK's scripted model, keeping every input it was sent."""

    def __init__(self, steps, sent: list) -> None:
        super().__init__(steps)
        self.sent = sent

    async def get_response(self, *args, **kwargs):
        given = kwargs["input"] if "input" in kwargs else args[1]
        self.sent.append(given if isinstance(given, list) else [])
        return await super().get_response(*args, **kwargs)


def invalid_for_openai(items: list) -> str | None:
    """Why OpenAI would reject `items` as input (a call output before its call, a call left unanswered)."""
    calls, answered = set(), set()
    for i, item in enumerate(items):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            calls.add(item["call_id"])
        elif kind == "function_call_output":
            if item["call_id"] not in calls:
                return f"item {i}: output {item['call_id']} before its call"
            answered.add(item["call_id"])
    return f"calls without output: {sorted(calls - answered)[:3]}" if calls - answered else None


def run_agent(capture, summarize, turns: int = TURNS) -> dict:
    """The README's agent for `turns` turns of 0-3 tool calls each; stops at the first raised turn."""
    rng = random.Random(3)
    compactor = Compactor(summarize)
    guard = ContextGuard("oa-long", agent="orders", telemetry=capture.telemetry)
    inner = OpenAIResponsesCompactionSession(
        "long", SQLiteSession("long"), client=compactor.client(),
        should_trigger_compaction=lambda ctx: len(ctx.get("compaction_candidate_items") or []) > 30)
    session = GuardedSession(inner, guard)
    sent: list = []

    async def loop() -> dict:
        for turn in range(turns):
            steps = [[function_call("lookup", {"order": f"ORD-{turn:04d}{j}"}, call_id=f"call_{turn}_{j}")
                      for j in range(rng.randint(0, 3))]]
            steps = [s for s in steps if s] + [[assistant_message(f"Done with ORD-{turn:04d}.")]]
            agent = Agent(name="orders", model=Recording(steps, sent), tools=[lookup])
            try:
                await Runner.run(agent, f"Turn {turn}: where is ORD-{turn:04d}?", session=session)
            except ContractionRegimeError as halt:
                return {"halt": halt, "turn": turn, "compactions": compactor.answered, "sent": sent,
                        "items": await session.get_items(), "guard": guard}
        return {"halt": None, "turn": turns, "compactions": compactor.answered, "sent": sent,
                "items": await session.get_items(), "guard": guard}

    return asyncio.run(loop())


def test_hundreds_of_turns_with_opaque_server_compactions_never_halt_and_every_request_is_valid(capture) -> None:
    run = run_agent(capture, opaque_summary)
    assert run["halt"] is None, str(run["halt"])
    assert run["compactions"] >= 20
    assert len(run["sent"]) >= TURNS
    for n, request in enumerate(run["sent"]):
        assert invalid_for_openai([x for x in request if isinstance(x, dict)]) is None, f"request {n}"
    assert invalid_for_openai(run["items"]) is None
    compacts = [s.attributes for s in capture.spans() if s.attributes[semconv.MUTATION_KIND] == "compact"]
    assert len(compacts) == run["compactions"]  # every compaction the server answered was checked and applied
    assert {a[semconv.DECISION] for a in compacts} == {"patch"}
    assert {a[semconv.DEFERRAL_RESOLUTION] for a in compacts} == {"provider_compaction"}
    # the provider's compaction item is what the model reads next, not a ctxwatch elision marker
    assert any(i.get("type") == "compaction" for i in run["items"] if isinstance(i, dict))
    # r unknown on the wire: no lost count and no hash distance (no cycle of the alarm), the hidden literals instead
    assert all(semconv.LITERALS_LOST not in a and semconv.HASH_DISTANCE not in a for a in compacts)
    assert sum(a[semconv.LITERALS_HIDDEN] for a in compacts) > 0
    assert {a[semconv.CONTRACTION_CYCLE] for a in compacts} == {0}
    guard = run["guard"]
    assert guard.detector.cycle == 0 and guard.detector.state == "healthy" and guard.halted_at is None
    hidden = next(a for a in compacts if a[semconv.LITERALS_HIDDEN])
    assert "literal_loss" in hidden[semconv.WARNINGS] and "literal_loss" not in hidden[semconv.VIOLATIONS]


def test_the_same_loop_with_a_compactor_dropping_the_literals_in_the_clear_is_still_halted(capture) -> None:
    run = run_agent(capture, readable_summary)
    halt = run["halt"]
    assert isinstance(halt, ContractionRegimeError), f"no halt in {run['turn']} turns"
    assert halt.report is not None and halt.report.decision == "halt"
    assert "contraction" in halt.report.violations
    assert "GuardedSession: the SDK's compaction after this turn was refused" in str(halt)
    assert "guard.new_episode()" in str(halt)
    lost = [s.attributes for s in capture.spans() if s.attributes[semconv.MUTATION_KIND] == "compact"]
    assert any(a.get(semconv.LITERALS_LOST) for a in lost)  # dropped in the clear: counted as lost, as before
    assert all(semconv.LITERALS_HIDDEN not in a for a in lost)
    assert invalid_for_openai(run["items"]) is None  # the refused compaction left a valid history
