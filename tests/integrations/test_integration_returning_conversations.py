"""Conversations a wrapper lets go and serves again (diff review of session 6, points 1-3).

The LangChain middleware and the Anthropic wrapper keep at most `max_conversations` conversations. One that
comes back after it was let go is served again: the given guard's own is never let go (the caller holds that
guard and its state; the conversation made again around it doubled its history and put elision markers into
the model's prompt), another gets a new guard, which starts from the history as the model read it (the
Anthropic server's earlier edits and compaction block in effect, not reported again as new edits; LangChain's
turns up to the model's last answer read) and numbers its spans as a new run of the loop, so the monitor
follows it (a new guard's episode 0 under the numbering of the guard before was late there when that guard had
started a later episode). A call with no thread id is the given guard's own conversation. Real LangChain agents
and the real `anthropic` client against the in-process fake API; the last test sends the spans to the real
monitor over OTLP/HTTP.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents")
anthropic = pytest.importorskip("anthropic")

import httpx  # noqa: E402
from fake_anthropic_api import FakeAnthropicAPI  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import SummarizationMiddleware  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from test_integration_anthropic import BETAS, CLEAR, TOOLS, lookups  # noqa: E402
from test_integration_langchain import LookUpThenAnswer, lookup, summarizer  # noqa: E402

from ctxwatch import ContextGuard, semconv  # noqa: E402
from ctxwatch.demo.monitor_process import MonitorProcess  # noqa: E402
from ctxwatch.integrations.anthropic import guarded_messages  # noqa: E402
from ctxwatch.integrations.langchain import ContextGuardMiddleware, guard_middleware  # noqa: E402
from ctxwatch.telemetry import MutationTelemetry  # noqa: E402


def spans_of(capture, loop: str) -> list:
    return [s for s in capture.exporter.get_finished_spans() if s.attributes[semconv.LOOP_ID] == loop]


def runs(spans: list) -> list[tuple[str, list[int]]]:
    """The spans' numbering runs, in order: (instance id, its sequence numbers)."""
    out: list[tuple[str, list[int]]] = []
    for span in spans:
        instance = span.attributes[semconv.GUARD_INSTANCE]
        if not out or out[-1][0] != instance:
            out.append((instance, []))
        out[-1][1].append(span.attributes[semconv.SEQUENCE])
    return out


# --- LangChain -------------------------------------------------------------------------------------

def serve(capture, threads: list[str], limit: int) -> tuple[list, ContextGuard, ContextGuardMiddleware]:
    """An agent with a checkpointer and a summarization, one `ContextGuard` given, serving `threads` in turn
    (one question each); the prompts its model was sent."""
    guard = ContextGuard("lc", telemetry=capture.telemetry)
    model = LookUpThenAnswer(responses=[], seen=[])
    middleware = guard_middleware(guard, SummarizationMiddleware(summarizer(), trigger=("messages", 7),
                                                                 keep=("messages", 3)), max_conversations=limit)
    agent = create_agent(model, [lookup], system_prompt="You track orders.", checkpointer=InMemorySaver(),
                         middleware=middleware)
    for turn, thread in enumerate(threads):
        agent.invoke({"messages": [HumanMessage(f"[{thread}] where is order {turn}?")]},
                     {"configurable": {"thread_id": thread}})
    return model.seen, guard, middleware[-1]


def test_the_given_guards_own_conversation_is_never_let_go(capture) -> None:
    """Thread a (the given guard's) let go for b and served again: the conversation was made again around the
    same guard, which took the whole history for turns appended again, then the next request for an edit of
    that doubled context, and the model was sent elision markers and the old questions again."""
    threads = ["a", "a", "b", "a", "a"]
    kept, _, _ = serve(capture, threads, limit=1024)
    capture.exporter.clear()
    seen, guard, _ = serve(capture, threads, limit=1)
    assert seen == kept
    assert [m.text for m in guard.messages if m.type == "human" and not m.text.startswith("[ctxwatch]")] == [
        "[a] where is order 4?"]
    assert {s.attributes[semconv.DECISION] for s in spans_of(capture, "lc")} == {"patch"}


def test_a_factorys_guard_kept_for_a_thread_that_comes_back_goes_on_where_it_was(capture) -> None:
    """A factory that hands back the guard it made for a thread (its own cache): the conversation made again
    around it took the thread's whole history for turns appended again, as it did around the given guard."""
    guards: dict = {}

    def factory(thread_id):
        return guards.setdefault(thread_id, ContextGuard(f"lc-{thread_id}", telemetry=capture.telemetry))

    def serve_with(limit: int) -> list:
        guards.clear()
        model = LookUpThenAnswer(responses=[], seen=[])
        agent = create_agent(model, [lookup], system_prompt="You track orders.", checkpointer=InMemorySaver(),
                             middleware=guard_middleware(factory, SummarizationMiddleware(
                                 summarizer(), trigger=("messages", 7), keep=("messages", 3)),
                                 max_conversations=limit))
        for turn, thread in enumerate(["a", "a", "b", "a", "a"]):
            agent.invoke({"messages": [HumanMessage(f"[{thread}] where is order {turn}?")]},
                         {"configurable": {"thread_id": thread}})
        return model.seen

    kept = serve_with(1024)
    assert serve_with(1) == kept


def test_a_thread_that_comes_back_gets_a_new_guard_numbered_as_a_new_run(capture) -> None:
    threads = ["a", "b", "b", "b", "c", "b", "b"]
    kept, _, _ = serve(capture, threads, limit=1024)
    capture.exporter.clear()
    seen, _, middleware = serve(capture, threads, limit=1)
    # the same prompts, but for the number of the new guard's elision markers (they count per guard)
    numbered = re.compile(r"\(elision \d+\)")
    assert [[(kind, numbered.sub("", text), call) for kind, text, call in prompt] for prompt in seen] == \
        [[(kind, numbered.sub("", text), call) for kind, text, call in prompt] for prompt in kept]
    spans = spans_of(capture, "lc/b")
    assert {s.attributes[semconv.DECISION] for s in spans} == {"patch"}  # nothing refused
    [(first, before), (second, after)] = runs(spans)
    assert first != second and before == list(range(1, len(before) + 1)) and after == list(range(1, len(after) + 1))
    assert middleware.guard_for("b").episode == 0


def test_a_call_with_no_thread_id_is_the_given_guards_own_conversation(capture, caplog) -> None:
    """An agent without a checkpointer, called once with a thread id and then without one, the caller passing
    the history back: the call with none went to a sibling guard on loop ``lc/None``."""
    guard = ContextGuard("lc", telemetry=capture.telemetry)
    middleware = guard_middleware(guard)
    agent = create_agent(LookUpThenAnswer(responses=[], seen=[]), [lookup], system_prompt="You track orders.",
                         middleware=middleware)
    state = agent.invoke({"messages": [HumanMessage("where is order 1?", id="h1")]},
                         {"configurable": {"thread_id": "t1"}})
    with caplog.at_level("WARNING", logger="ctxwatch"):
        agent.invoke({"messages": [*state["messages"], HumanMessage("and order 2?", id="h2")]})
    assert {s.attributes[semconv.LOOP_ID] for s in capture.exporter.get_finished_spans()} == {"lc"}
    assert capture.summary() == []  # the second call extends the first: appends only
    assert middleware[-1].guard_for() is guard
    assert [m.text for m in guard.messages if m.type == "human"] == ["where is order 1?", "and order 2?"]
    assert not [r for r in caplog.records if r.name == "ctxwatch"]


# --- Anthropic -------------------------------------------------------------------------------------

COMPACT = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 250}}]}
ANSWER = [{"type": "text", "text": "Shipped."}]


def anthropic_conversation(capture, limit: int, edits: str) -> tuple[list, ContextGuard]:
    """Conversation x runs a tool loop whose context the server edits (`edits`: "clear" or "compact"), y and z
    come, then x asks again; x's spans and its guard at the end."""
    if edits == "clear":
        api, request = FakeAnthropicAPI(lookups(5)[:-1] + [ANSWER] * 4), {"betas": BETAS, "context_management": CLEAR}
    else:
        api = FakeAnthropicAPI(lookups(6)[:-1] + [ANSWER] * 4, summary="Orders A0-A5 were looked up; all shipped.")
        request = {"betas": ["compact-2026-01-12"], "context_management": COMPACT}
    messages = guarded_messages(api.client().beta.messages, ContextGuard("support", telemetry=capture.telemetry),
                                max_conversations=limit)
    history: list = [{"role": "user", "content": "Where are my orders?"}]
    while True:
        response = messages.conversation("x").create(model="claude-test", max_tokens=256, messages=history,
                                                     tools=TOOLS, **request)
        history.append({"role": "assistant", "content": response.content})
        uses = [b for b in response.content if b.type == "tool_use"]
        if not uses:
            break
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": f"shipped, tracking TRK-{1000 + int(u.id[-2:])}"}
            for u in uses]})
    for other in ("y", "z"):
        messages.conversation(other).create(model="claude-test", max_tokens=64, tools=TOOLS,
                                            messages=[{"role": "user", "content": f"hi from {other}"}])
    history.append({"role": "user", "content": "Thanks. And order 9?"})
    messages.conversation("x").create(model="claude-test", max_tokens=64, messages=history, tools=TOOLS, **request)
    return spans_of(capture, "support/x"), messages.conversation("x").recorder.guard


@pytest.mark.parametrize("edits", ["clear", "compact"])
def test_an_anthropic_conversation_that_comes_back_starts_from_what_the_server_reads(capture, edits) -> None:
    """Its new guard reads the history as the server does: the tool results it cleared before are not
    reported again as a new prune (clear); the messages before the compaction block are not in its view
    (compact). Its spans are a new run."""
    kept_spans, kept_guard = anthropic_conversation(capture, 1024, edits)
    capture.exporter.clear()
    spans, guard = anthropic_conversation(capture, 1, edits)
    edits_seen = [(s.attributes[semconv.MUTATION_KIND], s.attributes[semconv.DECISION]) for s in spans
                  if s.attributes[semconv.MUTATION_KIND] != "append"]
    assert edits_seen == [(s.attributes[semconv.MUTATION_KIND], s.attributes[semconv.DECISION]) for s in kept_spans
                          if s.attributes[semconv.MUTATION_KIND] != "append"]
    assert guard is not kept_guard and guard.messages == kept_guard.messages
    [(first, _), (second, after)] = runs(spans)
    assert first != second and after == list(range(1, len(after) + 1))


# --- what the monitor sees -------------------------------------------------------------------------

def metric(text: str, name: str) -> float:
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == name)


def test_the_monitor_follows_a_new_guard_of_a_loop_whose_guard_before_it_started_a_later_episode(
        tmp_path: Path) -> None:
    """A guard of loop L starts episode 1 (a session boundary); the wrapper lets its conversation go and makes
    a new guard for it when it comes back (or the application makes a second `ContextGuard(L)`), episode 0.
    Under the first guard's numbering those spans were late for the monitor (an episode before the loop's, of
    the instance it follows): the conversation that came back was never shown. A new run instead: the monitor
    follows it, nothing is late."""
    monitor = MonitorProcess(tmp_path / "state.sqlite3").start()
    try:
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        telemetry = MutationTelemetry(provider, environ={})
        first = ContextGuard("returning", telemetry=telemetry)
        history = [{"role": "user", "content": "hi"}]
        for turn in range(3):
            history += [{"role": "assistant", "content": f"answer {turn}"}, {"role": "user", "content": f"q {turn}"}]
            first.observe(history)
        first.session_boundary()
        for turn in range(2):
            history += [{"role": "assistant", "content": f"later {turn}"}]
            first.observe(history)
        again = ContextGuard("returning", telemetry=telemetry)
        for turn in range(3):
            history += [{"role": "assistant", "content": f"back {turn}"}, {"role": "user", "content": f"r {turn}"}]
            again.observe(history)
        provider.force_flush()
        [*_, (instance, sequences)] = runs(memory.get_finished_spans())
        deadline = time.monotonic() + 60  # a generous bound for the monitor to commit what it was sent
        while (loop := httpx.get(monitor.url + "/api/loops/returning", timeout=30).json()).get(
                "sequence") != sequences[-1] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (loop["instance"], loop["episode"], loop["sequence"]) == (instance, 0, sequences[-1])
        assert metric(httpx.get(monitor.url + "/metrics", timeout=30).text, "ctxwatch_monitor_late_spans_total") == 0
        provider.shutdown()
    finally:
        monitor.close(grace_s=30.0)
