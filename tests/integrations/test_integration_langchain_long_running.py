"""Issue 13: LangChain `create_agent` with the README's own configuration —
``guard_middleware(ContextGuard(...), SummarizationMiddleware(model, trigger=("messages", 40)))`` —
for 200 invokes of one thread: no exception with the guard's defaults, and the context bounded.
The model is langchain_core's fake chat model, answering from what it is sent (no network)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import SummarizationMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from ctxwatch import ContextGuard, semconv  # noqa: E402
from ctxwatch.integrations.langchain import guard_middleware  # noqa: E402

INVOKES = 200
MAX_STATE_MESSAGES = 48  # the bound: the trigger (40) plus one invoke's turns, plus the summary


class AgentFake(FakeMessagesListChatModel):
    """A fake chat model that answers from what it is sent, as a tool-calling model would: a new
    question gets a tool call, a tool result gets an answer, a summarization prompt gets a summary
    naming the orders and tracking numbers it covers (one that drops the tool results' identifiers is
    the contraction alarm's question, issue 13 item 5, docs/alarm.md)."""

    calls: int = 0

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls += 1
        last = messages[-1]
        if "Messages to summarize" in last.text:
            orders = sorted(set(re.findall(r"\bA\d+|TRK-\d+", last.text)))
            reply = AIMessage(content="Orders looked up so far: " + ", ".join(orders), id=f"sum-{self.calls}")
        elif isinstance(last, ToolMessage):
            reply = AIMessage(content=f"Done: {last.text}", id=f"ai-answer-{self.calls}")
        else:
            order = re.findall(r"A\d+", last.text)[-1]
            reply = AIMessage(content="", id=f"ai-call-{self.calls}", tool_calls=[
                {"name": "lookup", "args": {"order": order}, "id": f"call_{self.calls}", "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order} shipped, tracking TRK-{1000 + int(order[1:])}"


def run_invokes(guard: ContextGuard, invokes: int) -> tuple[AgentFake, list[int]]:
    model = AgentFake(responses=[AIMessage(content="unused")])
    agent = create_agent(model, [lookup], system_prompt="You track orders.", checkpointer=InMemorySaver(),
                         middleware=guard_middleware(guard, SummarizationMiddleware(model, trigger=("messages", 40))))
    config = {"configurable": {"thread_id": "support-17"}}
    sizes = []
    for i in range(invokes):
        state = agent.invoke({"messages": [HumanMessage(f"Where is order A{i}?", id=f"human-{i}")]}, config)
        sizes.append(len(state["messages"]))
        assert state["messages"][-1].text.startswith("Done: order A"), i
    return model, sizes


def test_the_readme_summarization_config_runs_200_invokes_with_the_defaults(capture) -> None:
    guard = ContextGuard("support-17", telemetry=capture.telemetry)
    _, sizes = run_invokes(guard, INVOKES)
    assert max(sizes) <= MAX_STATE_MESSAGES and len(guard.context) <= MAX_STATE_MESSAGES
    compactions = [s for s in capture.spans() if s.attributes[semconv.MUTATION_KIND] == "compact"]
    assert compactions and all(s.attributes[semconv.DECISION] == "patch" for s in compactions)
    assert guard.halted_at is None


def test_in_shadow_mode_the_frameworks_edits_stand_and_spans_say_what_the_guard_would_do(capture) -> None:
    guard = ContextGuard("support-shadow", telemetry=capture.telemetry, shadow=True)
    _, sizes = run_invokes(guard, 60)
    compactions = [s for s in capture.spans() if s.attributes[semconv.MUTATION_KIND] == "compact"]
    assert compactions and all(s.attributes[semconv.SHADOW] is True for s in compactions)
    assert {s.attributes.get(semconv.DEFERRAL_RESOLUTION) for s in compactions} == {"whole_pairs"}
    # the summarization middleware's own result is what the model read: its summary message, not a marker
    assert not any("[ctxwatch]" in str(m) for m in guard.messages)
