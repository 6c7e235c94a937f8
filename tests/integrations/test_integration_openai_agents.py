"""OpenAI Agents SDK integration (issue 8; record 000 pairing and generation boundary): the real
Runner with the SDK's own ScriptedModel and a real SQLiteSession inside `GuardedSession`; the SDK's
OpenAIResponsesCompactionSession compacting through a real AsyncOpenAI client answered in-process by
an httpx MockTransport (no network). A healthy run emits no span and behaves as without the guard;
a compaction is one span; pops and compactions that orphan a call are refused naming OpenAI's 400."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("agents")

import httpx2  # noqa: E402  (the openai SDK speaks httpx2)
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.memory import OpenAIResponsesCompactionSession  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from responses_orders import compaction, turns  # noqa: E402

from ctxwatch import ContextGuard, OrphanedToolPairError, semconv  # noqa: E402
from ctxwatch.integrations.openai_agents import GuardedSession  # noqa: E402

set_tracing_disabled(True)  # the SDK's own trace export would try the network


@function_tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order} shipped, tracking TRK-{1000 + int(order[1:])}"


def script() -> ScriptedModel:
    return ScriptedModel([[function_call("lookup", {"order": "A1"}, call_id="call_1")],
                          [assistant_message("A1 has shipped.")], [assistant_message("You're welcome.")]])


async def two_turns(session) -> tuple[ScriptedModel, list]:
    model = script()
    agent = Agent(name="orders", model=model, tools=[lookup])
    await Runner.run(agent, "Where is A1?", session=session)
    await Runner.run(agent, "Thanks!", session=session)
    return model, await session.get_items()


def test_a_healthy_run_emits_no_span_and_behaves_as_with_the_bare_session(capture) -> None:
    plain_model, plain_items = asyncio.run(two_turns(SQLiteSession("plain")))
    guard = ContextGuard("oa-healthy", telemetry=capture.telemetry)
    model, items = asyncio.run(two_turns(GuardedSession(SQLiteSession("guarded"), guard)))
    assert [c.input for c in model.calls] == [c.input for c in plain_model.calls]
    assert items == plain_items
    assert capture.summary() == []  # appends only: no context edit, no span
    assert len(guard.messages) == len(items) == 6


ITEMS = [{"role": "user", "content": "Where is A1?"},
         {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{\"order\":\"A1\"}"},
         {"type": "function_call_output", "call_id": "call_1", "output": "shipped, tracking TRK-1001"}]


def test_popping_a_tool_output_whose_call_stays_is_refused_naming_openais_400(capture) -> None:
    async def scenario():
        session = GuardedSession(SQLiteSession("pop"), ContextGuard("oa-pop", telemetry=capture.telemetry))
        await session.add_items(ITEMS)
        with pytest.raises(OrphanedToolPairError) as refused:
            await session.pop_item()
        return refused.value, await session.get_items()

    error, items = asyncio.run(scenario())
    assert items == ITEMS  # nothing was popped
    assert "tool_use_without_result [call_1 (lookup)" in str(error)
    assert "An assistant message with 'tool_calls' must be followed by tool messages" in str(error)
    assert capture.summary() == [("ctxwatch prune", "abort")]


def test_rewinding_input_and_the_models_own_answer_are_patches(capture) -> None:
    """A pure truncation leaves every remaining turn on the very prefix it was generated from (record
    000's hazard cannot arise), so rolling back even the model's own answer is a patch."""
    async def scenario():
        session = GuardedSession(SQLiteSession("rewind"), ContextGuard("oa-rewind", telemetry=capture.telemetry))
        await session.add_items([ITEMS[0], {"role": "assistant", "content": "Checking."},
                                 {"role": "user", "content": "Also A2?"}])
        rewound = await session.pop_item()     # the runner's rewind of input it stored but never sent
        answer = await session.pop_item()      # a rollback of the model's own answer
        return rewound, answer, await session.get_items()

    rewound, answer, items = asyncio.run(scenario())
    assert rewound == {"role": "user", "content": "Also A2?"}
    assert answer == {"role": "assistant", "content": "Checking."}
    assert [i["content"] for i in items] == ["Where is A1?"]
    assert capture.summary() == [("ctxwatch prune", "patch"), ("ctxwatch prune", "patch")]


def compaction_client(output: list[dict]) -> AsyncOpenAI:
    """An AsyncOpenAI whose /responses/compact answers `output`, in-process."""
    def handle(request: httpx2.Request) -> httpx2.Response:
        assert request.url.path.endswith("/responses/compact")
        return httpx2.Response(200, json={"id": "cmp_1", "object": "response.compaction", "created_at": 0,
                                          "output": output, "usage": {
                                              "input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                              "input_tokens_details": {"cached_tokens": 0},
                                              "output_tokens_details": {"reasoning_tokens": 0}}})
    return AsyncOpenAI(api_key="test-key", base_url="http://api.invalid/v1", max_retries=0,
                       http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)))


USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Where is A1?"}]}
COMPACTION = {"type": "compaction", "id": "cmp_item_1", "encrypted_content": "opaque-summary"}


def compacted_run(capture, output: list[dict], **guard_options) -> tuple:
    guard = ContextGuard("oa-compact", telemetry=capture.telemetry, **guard_options)
    inner = OpenAIResponsesCompactionSession("compact", SQLiteSession("compact"), client=compaction_client(output),
                                             should_trigger_compaction=lambda context: True)
    session = GuardedSession(inner, guard)

    async def scenario():
        await session.add_items(ITEMS + [{"role": "assistant", "content": "A1 has shipped."}])
        before = await session.get_items()
        try:
            await session.run_compaction({"force": True, "compaction_mode": "input"})
        except OrphanedToolPairError as refused:
            return before, await session.get_items(), refused
        return before, await session.get_items(), None

    return asyncio.run(scenario())


def test_a_compaction_is_one_compact_span_and_is_applied(capture) -> None:
    before, after, refused = compacted_run(capture, [USER, COMPACTION], enforce={"prefix_identity": "warn"})
    assert refused is None
    assert [i.get("type") for i in after] == ["message", "compaction"]
    assert capture.summary() == [("ctxwatch compact", "patch")]
    span = capture.spans()[0].attributes  # TRK-1001 was tool output, now behind the opaque compaction item:
    assert "literal_loss" in span[semconv.WARNINGS]  # warned, not a downstream literal, and unknown, not lost
    assert semconv.LITERALS_LOST not in span and span[semconv.LITERALS_HIDDEN] == 0


def test_a_compaction_keeping_a_tool_output_without_its_call_is_refused_and_rolled_back(capture) -> None:
    orphaning = [USER, {"type": "function_call_output", "call_id": "call_1", "output": "shipped"}, COMPACTION]
    before, after, refused = compacted_run(capture, orphaning, enforce={"prefix_identity": "warn"})
    assert isinstance(refused, OrphanedToolPairError)
    assert "tool_result_without_use [call_1" in str(refused)
    assert "messages with role 'tool' must be a response to a preceding message with 'tool_calls'" in str(refused)
    assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)  # the store is back
    assert capture.summary() == [("ctxwatch compact", "abort")]


def test_each_models_cached_tokens_ride_on_the_append_of_its_turn(capture) -> None:
    # issue 16, what rewrites cost: the run's per-request usage (OpenAI Responses'
    # input_tokens_details.cached_tokens) is noted once per request and carried by the append spans
    from agents.usage import Usage
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    cached = 384
    usage = Usage(requests=1, input_tokens=1200, output_tokens=20, total_tokens=1220,
                  input_tokens_details=InputTokensDetails(cached_tokens=cached, cache_write_tokens=16),
                  output_tokens_details=OutputTokensDetails(reasoning_tokens=0))
    model = ScriptedModel([[function_call("lookup", {"order": "A1"}, call_id="call_1")],
                           [assistant_message("A1 has shipped.")], [assistant_message("You're welcome.")]],
                          default_usage=usage)
    guard = ContextGuard("oa-cache", telemetry=capture.telemetry)
    session = GuardedSession(SQLiteSession("cached"), guard)

    async def scenario():
        agent = Agent(name="orders", model=model, tools=[lookup])
        await Runner.run(agent, "Where is A1?", session=session)
        await Runner.run(agent, "Thanks!", session=session)

    asyncio.run(scenario())
    reads = [s.attributes[semconv.CACHE_READ_TOKENS] for s in capture.appends()
             if semconv.CACHE_READ_TOKENS in s.attributes]
    assert sum(reads) == cached * len(model.calls) == cached * 3  # three model calls, each counted once
    assert sum(s.attributes.get(semconv.CACHE_CREATION_TOKENS, 0) for s in capture.appends()) == 16 * 3
    assert capture.summary() == []  # still no context edit


def test_replacing_the_history_with_its_tool_outputs_cleared_is_applied_under_the_default_guard(capture) -> None:
    """Review D6: `replace_items` with the consumed tool output cleared in place (pairs whole, nothing unread
    touched) is applied as it is by the default guard and reported as replaced."""
    async def scenario():
        session = GuardedSession(SQLiteSession("clear"), ContextGuard("oa-clear", telemetry=capture.telemetry))
        await session.add_items(ITEMS + [{"role": "assistant", "content": "A1 has shipped."}])
        stored = await session.get_items()
        cleared = [dict(item, output="[cleared]") if item.get("type") == "function_call_output" else item
                   for item in stored]
        return await session.replace_items(cleared, kind="prune"), cleared, await session.get_items()

    replaced, cleared, after = asyncio.run(scenario())
    assert replaced and after == cleared
    assert capture.summary() == [("ctxwatch prune", "patch")]
    assert capture.spans()[0].attributes[semconv.DEFERRAL_RESOLUTION] == "in_place"


def test_clearing_a_session_with_a_rewrite_queued_clears_it() -> None:
    """A rewrite of consumed items is queued for the next session boundary; clear_session() is one, so it
    applies the queued rewrite first and then clears the store (it raised ValueError: the history it passed
    as current= no longer started with the guard's context)."""
    items = [{"role": "user", "content": "Where is A1?"},
             {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": '{"order":"A1"}'},
             {"type": "function_call_output", "call_id": "call_1", "output": "shipped, tracking TRK-1001"},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A1 shipped."}]},
             {"role": "user", "content": "And B2?"},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "B2 is pending."}]}]
    guard = ContextGuard("oa-clear-queued")
    session = GuardedSession(SQLiteSession("clear-queued"), guard)

    async def run() -> list:
        await session.add_items(items)
        summary = [{"role": "user", "content": "Summary: A1 shipped, TRK-1001."}, *items[4:]]
        assert not await session.replace_items(summary, kind="rewrite")  # consumed history: queued, not applied
        assert len(guard.deferred) == 1
        await session.clear_session()
        return await session.get_items()

    assert asyncio.run(run()) == []


def test_replacing_the_history_by_a_provider_compaction_stores_it_and_says_so() -> None:
    """An opaque compaction applied as the provider made it is an edit that stands: replace_items stores
    the proposal once and returns True (it returned False, as for a refusal, after storing it anyway)."""
    items = turns(range(10))
    compacted = [i for i in items if i.get("role") == "user"] + [compaction(1)]
    session = GuardedSession(SQLiteSession("opaque-replace"), ContextGuard("oa-opaque-replace"))

    async def run() -> tuple[bool, list]:
        await session.add_items(items)
        return await session.replace_items(compacted, kind="compact"), await session.get_items()

    replaced, stored = asyncio.run(run())
    assert replaced and stored == compacted
