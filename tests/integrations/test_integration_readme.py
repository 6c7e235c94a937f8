"""Issue 8: the README's one-line setup for each framework works as printed. The Python blocks of
the "Framework integrations" section are run as they are, with fake models and APIs standing in
for `model`, `tools` and `client`, and the objects they build are then used."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

import ctxwatch
from ctxwatch import ContextGuard

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(framework: str) -> list[str]:
    """The Python code blocks of the README subsection whose title starts with `framework`."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Framework integrations\n", 1)[1]
    for part in section.split("\n### ")[1:]:
        if part.startswith(framework):
            return re.findall(r"```python\n(.*?)```", part, flags=re.S)
    raise AssertionError(f"no README subsection for {framework}")


@pytest.fixture
def guards(monkeypatch) -> list[ContextGuard]:
    """Every guard the snippets make (ContextGuard imported from ctxwatch records its instances)."""
    made: list[ContextGuard] = []

    class Recorded(ContextGuard):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(ctxwatch, "ContextGuard", Recorded)
    return made


def test_the_langchain_snippets_run(guards) -> None:
    pytest.importorskip("langchain.agents")
    from langchain_core.messages import HumanMessage
    from test_integration_langchain import lookup, scripted

    setup, auto = blocks("LangChain")
    namespace = {"model": scripted(1), "tools": [lookup]}
    exec(setup, namespace)
    state = namespace["agent"].invoke({"messages": [HumanMessage("Where is A0?")]})
    assert state["messages"][-1].text == "All shipped."
    assert [m.type for m in guards[0].messages] == ["human", "ai", "tool", "ai"]

    import langchain.agents

    original = langchain.agents.create_agent
    exec(auto, {})
    try:
        assert langchain.agents.create_agent is not original
    finally:
        from ctxwatch.integrations.langchain_instrumentor import LangChainInstrumentor
        LangChainInstrumentor().uninstrument()
    assert langchain.agents.create_agent is original


def test_the_openai_agents_snippet_runs(guards) -> None:
    pytest.importorskip("agents")
    from agents import Agent, Runner
    from test_integration_openai_agents import lookup, script

    (setup,) = blocks("OpenAI Agents SDK")
    namespace: dict = {}
    exec(setup, namespace)
    agent = Agent(name="orders", model=script(), tools=[lookup])
    result = asyncio.run(Runner.run(agent, "Where is A1?", session=namespace["session"]))
    assert result.final_output == "A1 has shipped."
    assert len(guards[0].messages) == 4  # user, call, output, answer


def test_the_anthropic_snippet_runs(guards) -> None:
    pytest.importorskip("anthropic")
    from fake_anthropic_api import FakeAnthropicAPI

    (setup,) = blocks("Anthropic SDK")
    namespace = {"client": FakeAnthropicAPI([[{"type": "text", "text": "Hello."}]]).client()}
    exec(setup, namespace)
    reply = namespace["messages"].create(model="claude-test", max_tokens=64,
                                         messages=[{"role": "user", "content": "Hi"}])
    assert reply.content[0].text == "Hello."
    assert [m["role"] for m in guards[0].messages] == ["user", "assistant"]
