"""LangChain v1 agent integration (issue 8; record 000 pairing and prefix, record 001 spans): real
`create_agent` graphs with LangChain's own fake chat models. A healthy agent gets one span per
context edit and behaves exactly as without the guard; a summarization that drops a tool call is
refused (typed error naming the providers' 400s) or kept out of the model's view, as configured;
request-level tool-use clearing and RemoveMessage updates are guarded too; the OpenTelemetry
instrumentor adds the middleware to every agent."""

from __future__ import annotations

import importlib.metadata

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import (  # noqa: E402
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from ctxwatch import ContextGuard, OrphanedToolPairError, semconv  # noqa: E402
from ctxwatch.integrations.langchain import guard_middleware  # noqa: E402


class ToolCallingFake(FakeMessagesListChatModel):
    """LangChain's fake list model, plus what an agent needs of a tool-calling model: `bind_tools`,
    and a record of every message list it was called with."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append([(type(m).__name__, m.text, getattr(m, "tool_call_id", None)) for m in messages])
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order} shipped, tracking TRK-{1000 + int(order[1:])}"


def scripted(n: int) -> ToolCallingFake:
    calls = [AIMessage(content="", id=f"ai-{i}", tool_calls=[
        {"name": "lookup", "args": {"order": f"A{i}"}, "id": f"call_{i}", "type": "tool_call"}]) for i in range(n)]
    return ToolCallingFake(responses=calls + [AIMessage(content="All shipped.", id="ai-final")], seen=[])


def summarizer() -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=[AIMessage(content="Orders A0 and A1 were looked up.")])


class CutAnywhere(SummarizationMiddleware):
    """A summarization whose cut ignores tool pairs: keeping the last 3 messages of
    [human, ai, tool, ai, tool, ai, tool] keeps a tool result whose call was summarized away."""

    @staticmethod
    def _find_safe_cutoff_point(messages, cutoff_index):
        return cutoff_index


def run(middleware: list, calls: int = 4, **options):
    model = scripted(calls)
    agent = create_agent(model, [lookup], system_prompt="You track orders.", middleware=middleware, **options)
    state = agent.invoke({"messages": [HumanMessage("Where are my orders?", id="human-0")]})
    return model, [(type(m).__name__, m.text) for m in state["messages"]]


def trusting_guard(capture, loop: str) -> ContextGuard:
    """A guard that lets the framework rewrite history the model has read (record 000's prefix rule
    only warns), so the framework's own pair-safe edits are applied and measured."""
    return ContextGuard(loop, telemetry=capture.telemetry, enforce={"prefix_identity": "warn"})


def test_a_healthy_summarizing_agent_gets_one_span_per_edit_and_behaves_as_without_the_guard(capture) -> None:
    def summarization():
        return SummarizationMiddleware(summarizer(), trigger=("messages", 6), keep=("messages", 3))

    plain_model, plain_state = run([summarization()])
    guard = trusting_guard(capture, "lc-healthy")
    model, state = run(guard_middleware(guard, summarization()))
    assert model.seen == plain_model.seen and state == plain_state
    # the framework edited the context twice (a first summary; a second one replacing it)
    edits = sum(1 for before, after in zip(model.seen, model.seen[1:], strict=False) if after[:len(before)] != before)
    assert edits == 2
    assert capture.summary() == [("ctxwatch compact", "patch"), ("ctxwatch prune", "patch")]
    compact = capture.spans()[0].attributes
    # the first summary replaced [human, call_0, its result]: TRK-1000 left the model's view
    # (tool output, so the literal_loss check warns while the cycle's downstream loss is 0, docs/alarm.md)
    assert "literal_loss" in compact[semconv.WARNINGS] and compact[semconv.LITERALS_LOST] == 0
    assert compact[semconv.ORPHANS_TOOL_RESULT] == 0
    assert compact["gen_ai.conversation.compacted"] is True


def test_a_summarization_that_drops_a_tool_call_is_refused_before_the_model_sees_it(capture) -> None:
    guard = trusting_guard(capture, "lc-orphan")
    model = scripted(4)
    agent = create_agent(model, [lookup], system_prompt="You track orders.",
                         middleware=guard_middleware(guard, CutAnywhere(summarizer(), trigger=("messages", 6),
                                                                        keep=("messages", 3))))
    with pytest.raises(OrphanedToolPairError) as refused:
        agent.invoke({"messages": [HumanMessage("Where are my orders?")]})
    message = str(refused.value)
    assert "tool_result_without_use [call_1 (lookup)" in message
    for provider_error in ("Anthropic answers such a request with 400 invalid_request_error",
                           "unexpected tool_use_id found in tool_result blocks", "OpenAI with 400",
                           "messages with role 'tool' must be a response to a preceding message with 'tool_calls'"):
        assert provider_error in message
    assert len(model.seen) == 3  # the broken request never reached the model
    span = capture.spans()[-1]
    assert span.attributes[semconv.DECISION] == "abort" and span.attributes["error.type"] == "OrphanedToolPairError"
    assert span.attributes[semconv.ORPHANS_TOOL_RESULT] == 1


def test_on_refusal_keep_gives_the_model_the_previous_messages_and_restores_the_state(capture) -> None:
    guard = trusting_guard(capture, "lc-keep")
    plain_model, plain_state = run([])  # the same agent, never summarized
    model, state = run(guard_middleware(guard, CutAnywhere(summarizer(), trigger=("messages", 6),
                                                           keep=("messages", 3)), on_refusal="keep"))
    assert model.seen == plain_model.seen and state == plain_state
    assert [d for _, d in capture.summary()] == ["abort", "abort"]  # refused at each of the two later calls


def test_a_deferred_summary_becomes_whole_pair_compaction_with_an_elision_marker(capture) -> None:
    guard = ContextGuard("lc-whole-pairs", telemetry=capture.telemetry, deferral="whole_pairs")
    model, state = run(guard_middleware(guard, SummarizationMiddleware(summarizer(), trigger=("messages", 6),
                                                                       keep=("messages", 3))))
    # record 000: the summary alters the consumed prefix -> applied as whole-pair compaction, one attempt
    assert capture.summary()[:1] == [("ctxwatch compact", "patch")]
    assert capture.spans()[0].attributes[semconv.DEFERRAL_RESOLUTION] == "whole_pairs"
    sent = model.seen[3]
    # the marker goes at the frontier before the round the model has not read (its latest call and result),
    # so every prompt ends as it would without the guard: with the tool result the model is about to read
    assert [t for t, *_ in sent[-3:]] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert sent[-3][1].startswith("[ctxwatch] earlier turns were elided")
    assert all(not prompt[-1][1].startswith("[ctxwatch]") for prompt in model.seen)
    tool_ids = [i for _, _, i in sent if i]
    assert tool_ids and all(f"call_{i[-1]}" == i for i in tool_ids)  # every result kept has its call
    assert state[-1] == ("AIMessage", "All shipped.")


class LookUpThenAnswer(ToolCallingFake):
    """Calls `lookup` for a user turn and answers its result, whatever the thread: each run ends after one round,
    unless the model is shown a user turn after the result."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append([(type(m).__name__, m.text, getattr(m, "tool_call_id", None)) for m in messages])
        n = len(self.seen)
        if isinstance(messages[-1], HumanMessage):
            answer = AIMessage(content="", id=f"ai-{n}", tool_calls=[
                {"name": "lookup", "args": {"order": f"A{n}"}, "id": f"call_{n}", "type": "tool_call"}])
        else:
            answer = AIMessage(content=f"Shipped ({n}).", id=f"ai-{n}")
        return ChatResult(generations=[ChatGeneration(message=answer)])


def test_each_run_without_a_checkpointer_is_a_conversation_of_its_own(capture) -> None:
    """Review F17: the README's line with no checkpointer, invoked twice (every invoke is thread None). The
    second run is a new conversation, not an edit of the first settled as whole-pair compaction, whose
    marker, ending the prompt after the tool result, made the model call the tool again until the
    recursion limit."""
    guard = ContextGuard("lc-stateless", telemetry=capture.telemetry)
    model = LookUpThenAnswer(responses=[], seen=[])
    middleware = guard_middleware(guard)
    agent = create_agent(model, [lookup], system_prompt="You track orders.", middleware=middleware)
    for question in ("Where is order 1?", "Where is order 2?"):
        state = agent.invoke({"messages": [HumanMessage(question)]}, {"recursion_limit": 12})
        assert state["messages"][-1].text.startswith("Shipped (")
    assert len(model.seen) == 4
    assert [t for t, _, _ in model.seen[2]] == ["SystemMessage", "HumanMessage"]  # the second run from its input
    assert not any(text.startswith("[ctxwatch]") for prompt in model.seen for _, text, _ in prompt)
    assert capture.summary() == []  # appends only: no edit
    second = middleware[-1].guard_for(None)
    assert second is not guard and second.loop_id == guard.loop_id
    assert [m.text for m in second.messages][:2] == ["You track orders.", "Where is order 2?"]


def test_with_a_checkpointer_no_prompt_ends_with_the_elision_marker(capture) -> None:
    """Review F17, one thread with a checkpointer (the README's shape): the summaries the guard settles as
    whole-pair compaction put their marker before the round the model has not read, never after its result."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = LookUpThenAnswer(responses=[], seen=[])
    summaries = FakeMessagesListChatModel(responses=[AIMessage(content="Summary: orders looked up.")])
    agent = create_agent(model, [lookup], system_prompt="You track orders.", checkpointer=InMemorySaver(),
                         middleware=guard_middleware(ContextGuard("lc-one-thread", telemetry=capture.telemetry),
                                                     SummarizationMiddleware(summaries, trigger=("messages", 10),
                                                                             keep=("messages", 4))))
    for turn in range(6):
        agent.invoke({"messages": [HumanMessage(f"Where is order {turn}?")]}, {"configurable": {"thread_id": "a"}})
    markers = [text for prompt in model.seen for _, text, _ in prompt if text.startswith("[ctxwatch]")]
    assert markers  # the guard did place markers
    assert not any(prompt[-1][1].startswith("[ctxwatch]") for prompt in model.seen)
    assert len(model.seen) == 12  # every run ended after its one round


def run_clearing_as_without_the_guard(guard: ContextGuard) -> list:
    """Run the agent with tool-use clearing through `guard`; the model reads what it reads without the
    guard (asserted), and the final state is returned."""
    def clearing() -> ContextEditingMiddleware:
        return ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=0, keep=2)],
                                        token_counter=lambda messages: len(messages))
    plain_model, plain_state = run([clearing()])
    model, state = run(guard_middleware(guard, clearing()))
    assert model.seen == plain_model.seen and state == plain_state
    return state


def test_request_level_tool_use_clearing_is_one_prune_span_per_newly_cleared_result(capture) -> None:
    state = run_clearing_as_without_the_guard(trusting_guard(capture, "lc-clear"))
    # results 0 and 1 are cleared when the 3rd and 4th arrive: two edits of what the model reads
    assert capture.summary() == [("ctxwatch prune", "patch"), ("ctxwatch prune", "patch")]
    # each clearing drops one TRK literal of tool output: warned, and no downstream literal (docs/alarm.md)
    assert [("literal_loss" in s.attributes[semconv.WARNINGS], s.attributes[semconv.LITERALS_LOST])
            for s in capture.spans()] == [(True, 0), (True, 0)]
    assert "TRK-1000" in str(state)  # the state keeps the full results; only the request was edited


def test_tool_use_clearing_of_consumed_results_reaches_the_model_under_the_default_guard(capture) -> None:
    """Review D6: the default guard (prefix identity deferred) applies a clearing of consumed tool results
    in place as it is — every pair whole, nothing unread touched — so the model reads what it would
    without the guard, one prune span per edit, settled in place."""
    guard = ContextGuard("lc-clear-default", telemetry=capture.telemetry)
    run_clearing_as_without_the_guard(guard)
    assert capture.summary() == [("ctxwatch prune", "patch"), ("ctxwatch prune", "patch")]
    assert [s.attributes[semconv.DEFERRAL_RESOLUTION] for s in capture.spans()] == ["in_place", "in_place"]
    assert len(guard.deferred) == 0


class DropFirstToolResult(AgentMiddleware):
    """A hand-written trim: a RemoveMessage update removing the oldest tool result by id."""

    def before_model(self, state, runtime):
        tools = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        if len(tools) == 2:
            return {"messages": [RemoveMessage(id=tools[0].id)]}
        return None


def test_a_remove_message_update_that_orphans_a_call_is_refused(capture) -> None:
    guard = ContextGuard("lc-remove", telemetry=capture.telemetry)
    with pytest.raises(OrphanedToolPairError, match=r"tool_use_without_result \[call_0"):
        run(guard_middleware(guard, DropFirstToolResult()))
    assert capture.summary() == [("ctxwatch prune", "abort")]


def test_each_thread_gets_its_own_guard_from_a_factory(capture) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    made: dict = {}

    def factory(thread_id):
        made[thread_id] = ContextGuard(f"loop-{thread_id}", telemetry=capture.telemetry)
        return made[thread_id]

    agent = create_agent(scripted(0), [lookup], middleware=guard_middleware(factory), checkpointer=InMemorySaver())
    for thread in ("t1", "t2"):
        agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": thread}})
    assert sorted(made) == ["t1", "t2"]
    assert [m.type for m in made["t1"].messages] == ["human", "ai"]
    assert capture.summary() == []




def serve_two_threads(guard, turns: int = 6) -> list:
    from langgraph.checkpoint.memory import InMemorySaver

    model = LookUpThenAnswer(responses=[], seen=[])
    agent = create_agent(model, [lookup], system_prompt="You track orders.", checkpointer=InMemorySaver(),
                         middleware=guard_middleware(guard, SummarizationMiddleware(
                             summarizer(), trigger=("messages", 1000))))
    for turn in range(turns):
        thread = f"t{turn % 2}"
        agent.invoke({"messages": [HumanMessage(f"[{thread}] where is order {turn}?")]},
                     {"configurable": {"thread_id": thread}})
    return model.seen


def test_one_guard_given_to_an_agent_serving_two_threads_edits_neither(capture, caplog) -> None:
    """One `ContextGuard` (the README's line) on an agent whose checkpointer serves two threads: the
    guard serves the first thread and the second gets a sibling guard, so no thread's messages are
    taken for an edit of the other's (review F3: before, every switch was settled as a whole-pair
    compaction and an elision marker was put into the other thread's prompt)."""
    made: dict = {}

    def factory(thread_id):
        made[thread_id] = ContextGuard(f"lc-{thread_id}", telemetry=capture.telemetry)
        return made[thread_id]

    expected = serve_two_threads(factory)
    capture.exporter.clear()
    guard = ContextGuard("lc-one", telemetry=capture.telemetry)
    with caplog.at_level("WARNING", logger="ctxwatch"):
        seen = serve_two_threads(guard)
    assert seen == expected
    assert not any(text.startswith("[ctxwatch]") for prompt in seen for _, text, _ in prompt)
    assert capture.summary() == []
    assert [m.text for m in guard.messages if m.type == "human"] == [
        "[t0] where is order 0?", "[t0] where is order 2?", "[t0] where is order 4?"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "ctxwatch"]
    assert len(warnings) == 1 and "lc-one" in warnings[0] and "factory" in warnings[0]


def test_a_sibling_guard_has_its_own_loop_and_the_settings_of_the_guard_it_was_made_from(capture) -> None:
    guard = ContextGuard("lc-one", agent="support", telemetry=capture.telemetry, pass_cap=3, deferral="whole_pairs")
    sibling = guard.sibling("t1")
    assert (sibling.loop_id, sibling.conversation_id, sibling.agent) == ("lc-one/t1", "t1", "support")
    assert sibling.config == guard.config and sibling.telemetry is guard.telemetry
    assert sibling.context is not guard.context and sibling.detector is not guard.detector


def test_a_renewed_guard_is_the_same_loop_and_settings_with_fresh_state_numbered_as_a_new_run(capture) -> None:
    guard = ContextGuard("lc-one", conversation_id="c-9", agent="support", telemetry=capture.telemetry,
                         pass_cap=3, deferral="whole_pairs")
    guard.observe([{"role": "user", "content": "where is order 7?"}])
    renewed = guard.renewed()
    renewed.observe([{"role": "user", "content": "where is order 8?"}])
    assert (renewed.loop_id, renewed.conversation_id, renewed.agent) == ("lc-one", "c-9", "support")
    assert renewed.config == guard.config and renewed.telemetry is guard.telemetry
    assert [m["content"] for m in renewed.messages] == ["where is order 8?"]
    assert renewed.detector is not guard.detector
    first, second = (s.attributes for s in capture.appends())
    assert first[semconv.LOOP_ID] == second[semconv.LOOP_ID] == "lc-one"
    assert first[semconv.GUARD_INSTANCE] != second[semconv.GUARD_INSTANCE]
    assert first[semconv.SEQUENCE] == second[semconv.SEQUENCE] == 1


def test_the_instrumentor_adds_the_guard_to_every_agent_and_is_registered(capture) -> None:
    from ctxwatch.integrations.langchain_instrumentor import LangChainInstrumentor

    points = importlib.metadata.entry_points(group="opentelemetry_instrumentor")
    assert any(p.value == "ctxwatch.integrations.langchain_instrumentor:LangChainInstrumentor" for p in points)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=capture.provider, guard_options={"enforce": {"prefix_identity": "warn"}})
    try:
        import langchain.agents

        with pytest.raises(OrphanedToolPairError):
            model = scripted(4)
            langchain.agents.create_agent(model, [lookup], middleware=[
                CutAnywhere(summarizer(), trigger=("messages", 6), keep=("messages", 3))]).invoke(
                {"messages": [HumanMessage("Where are my orders?")]})
        assert capture.summary() == [("ctxwatch compact", "abort")]
    finally:
        instrumentor.uninstrument()
    import langchain.agents

    assert langchain.agents.create_agent is create_agent


def with_cache_usage(model: ToolCallingFake) -> list[int]:
    """Give every scripted answer LangChain's standard usage metadata with cache figures; the reads."""
    reads = []
    for i, message in enumerate(model.responses):
        reads.append(100 * i)
        message.usage_metadata = {"input_tokens": 400, "output_tokens": 10, "total_tokens": 410,
                                  "input_token_details": {"cache_read": 100 * i, "cache_creation": 50}}
    return reads


def test_each_answer_carries_its_cache_figures_and_a_summary_what_it_invalidated(capture) -> None:
    # issue 16, what rewrites cost: usage_metadata's cache figures ride on the answer's append span; the
    # summarization that rewrote consumed messages says how much consumed context it invalidated
    guard = trusting_guard(capture, "lc-cost")
    model = scripted(4)
    reads = with_cache_usage(model)
    agent = create_agent(model, [lookup], system_prompt="You track orders.", middleware=guard_middleware(
        guard, SummarizationMiddleware(summarizer(), trigger=("messages", 6), keep=("messages", 3))))
    agent.invoke({"messages": [HumanMessage("Where are my orders?", id="human-0")]})
    noted = [s.attributes for s in capture.appends() if semconv.CACHE_READ_TOKENS in s.attributes]
    assert [a[semconv.CACHE_READ_TOKENS] for a in noted] == reads
    assert {a[semconv.CACHE_CREATION_TOKENS] for a in noted} == {50}
    compact = capture.spans()[0].attributes
    assert compact[semconv.MUTATION_KIND] == "compact" and compact[semconv.CACHE_INVALIDATED_CHARS] > 0
    assert compact[semconv.CACHE_INVALIDATED_TOKENS] == -(-compact[semconv.CACHE_INVALIDATED_CHARS] // 4)


def dated_prompt(made: list[str] | None = None):
    """A dynamic system prompt that changes at every call, as one carrying the time or the turn does;
    each prompt it makes is appended to `made`."""
    from langchain.agents.middleware import dynamic_prompt

    @dynamic_prompt
    def prompt(request) -> str:
        text = f"You track orders. {len(request.state['messages'])} messages so far."
        (made if made is not None else []).append(text)
        return text
    return prompt


def system_prompts(model) -> list[str]:
    return [seen[0][1] for seen in model.seen if seen and seen[0][0] == "SystemMessage"]


@pytest.mark.parametrize("policy", [None, lambda i, m: m.role == "system"], ids=["no-policy", "system-pinned"])
def test_a_dynamic_system_prompt_reaches_the_model_at_every_call(capture, policy) -> None:
    """The application's own prompt, set per call by a dynamic_prompt middleware, is neither queued until a
    session boundary nor refused as a policy edit: the model reads what it reads without the guard, each
    change is one system_patch span taken on as made, with warnings and no violation."""
    plain_model, plain_state = run([dated_prompt()])
    guard = ContextGuard("lc-dynamic", telemetry=capture.telemetry, policy=policy)
    model, state = run(guard_middleware(guard, dated_prompt()))
    assert model.seen == plain_model.seen and state == plain_state
    assert len(set(system_prompts(model))) == 5  # the four calls after the first each had a new prompt
    spans = capture.spans()
    assert [(s.attributes[semconv.MUTATION_KIND], s.attributes[semconv.DECISION]) for s in spans] == \
        [("system_patch", "patch")] * 4
    for span in spans:
        assert span.attributes[semconv.OBSERVED] is True and not span.attributes.get(semconv.VIOLATIONS)
        assert "prefix_identity" in span.attributes[semconv.WARNINGS]
        assert span.attributes[semconv.CACHE_INVALIDATED_CHARS] > 0  # what the new prompt costs the cache
    if policy is not None:  # the pinned policy is the prompt the model reads now
        assert "policy_isolation" in spans[-1].attributes[semconv.WARNINGS]
        assert guard.context.messages[0].text == system_prompts(model)[-1]
        assert [s.index for s in guard.policy.spans] == [0]


def test_a_dynamic_prompt_and_a_summary_in_one_call_both_reach_the_model(capture) -> None:
    """The new prompt is taken on first; the summary of consumed turns is then settled as usual (whole-pair
    compaction under the default guard), so the model reads the new prompt and the compacted history."""
    guard = ContextGuard("lc-dynamic-summary", telemetry=capture.telemetry)
    made: list[str] = []
    model, state = run(guard_middleware(guard, dated_prompt(made), SummarizationMiddleware(
        summarizer(), trigger=("messages", 6), keep=("messages", 3))))
    assert state[-1] == ("AIMessage", "All shipped.")
    assert system_prompts(model) == made and len(set(made)) > 2  # every call read the prompt made for it
    kinds = [(s.attributes[semconv.MUTATION_KIND], s.attributes[semconv.DECISION],
              s.attributes.get(semconv.DEFERRAL_RESOLUTION)) for s in capture.spans()]
    assert ("compact", "patch", "whole_pairs") in kinds and ("system_patch", "patch", None) in kinds
    compacted = [seen for seen in model.seen if any(t.startswith("[ctxwatch] earlier turns were elided")
                                                    for _, t, _ in seen)]
    assert compacted and all(seen[0][0] == "SystemMessage" for seen in compacted)


@pytest.mark.parametrize("where", ["resource", "environment", "guard_options"])
def test_the_instrumentors_guards_report_the_agent_version_set_without_code(capture, monkeypatch, where) -> None:
    """Guards the instrumentor makes take ``gen_ai.agent.version`` from the tracer provider's resource or
    from ``OTEL_RESOURCE_ATTRIBUTES`` (a deployment setting), or from ``guard_options={"agent_version": ...}``."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from ctxwatch.integrations.langchain_instrumentor import LangChainInstrumentor

    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = capture.provider
    if where == "resource":
        provider = TracerProvider(resource=Resource.create({"gen_ai.agent.version": "4.2.0"}))
        provider.add_span_processor(SimpleSpanProcessor(capture.exporter))
    elif where == "environment":
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "gen_ai.agent.version=4.2.0")
    options = {"agent_version": "4.2.0"} if where == "guard_options" else {}
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider, guard_options=options)
    try:
        import langchain.agents

        langchain.agents.create_agent(scripted(2), [lookup], system_prompt="You track orders.").invoke(
            {"messages": [HumanMessage("Where are my orders?")]})
    finally:
        instrumentor.uninstrument()
    spans = capture.appends()
    assert spans and {s.attributes.get("gen_ai.agent.version") for s in spans} == {"4.2.0"}
