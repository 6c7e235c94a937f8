"""A content string and a list of one text block holding it are one message (adapters/_shape): loops that
turn a turn's ``"content": "x"`` into ``[{"type": "text", "text": "x", "cache_control": ...}]`` to carry
the prompt-cache breakpoint, and back to the string a turn later, only append. The real `anthropic`
client against the tests' fake Messages API, and SWE-agent's cache-control history processing (OpenAI
Chat messages, the breakpoint on a tool message itself) through the guard; each message still writes
back in the shape the caller sent last."""

from __future__ import annotations

import copy
import logging

import pytest

anthropic = pytest.importorskip("anthropic")

from fake_anthropic_api import FakeAnthropicAPI  # noqa: E402

from ctxwatch import ContextGuard  # noqa: E402
from ctxwatch.integrations.anthropic import guarded_messages  # noqa: E402

BREAKPOINT = {"type": "ephemeral"}
TOOLS = [{"name": "lookup", "description": "Look up an order", "input_schema": {
    "type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}}]


def _cached(content: str) -> list[dict]:
    return [{"type": "text", "text": content, "cache_control": BREAKPOINT}]


def test_a_breakpoint_on_a_one_block_list_then_a_string_again_is_only_appends(capture, caplog) -> None:
    """Each request is rebuilt from the turns' texts: the newest user turn (the question, or a tool
    result) is a one-text-block list with the breakpoint, every earlier one its plain string."""
    turns = [[{"type": "tool_use", "id": f"toolu_{i:02d}", "name": "lookup", "input": {"order": f"A{i}"}}]
             for i in range(3)] + [[{"type": "text", "text": "All orders shipped."}]]
    api = FakeAnthropicAPI(turns)
    messages = guarded_messages(api.client().messages, ContextGuard("one-block", telemetry=capture.telemetry))
    kept: list = ["Where are my orders?"]  # user turns as text (str) or (tool_use_id, output); answers as they came

    def request() -> list[dict]:
        out: list[dict] = []
        for i, turn in enumerate(kept):
            newest = i == len(kept) - 1
            if isinstance(turn, str):
                out.append({"role": "user", "content": _cached(turn) if newest else turn})
            elif isinstance(turn, tuple):
                call_id, output = turn
                out.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id,
                                                         "content": _cached(output) if newest else output}]})
            else:
                out.append({"role": "assistant", "content": turn})
        return out

    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        while True:
            answer = messages.create(model="claude-test", max_tokens=64, messages=request(), tools=TOOLS)
            kept.append(answer.content)
            uses = [b for b in answer.content if b.type == "tool_use"]
            if not uses:
                break
            kept.append((uses[0].id, f"shipped, TRK-{uses[0].id[-2:]}"))
    assert capture.summary() == []  # no rewrite, no prefix_identity, no cache invalidation
    assert len(capture.appends()) == 8  # the question, then each answer and each tool result
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def _swe_agent_cache_control(history: list[dict], last_n: int = 2) -> list[dict]:
    """What SWE-agent's ``CacheControlHistoryProcessor`` does to its history (in place): the breakpoint
    taken off every message, then set on the last `last_n` user/tool messages: a string content becomes a
    one-text-block list, and a tool message carries the breakpoint on the message itself."""
    tagged = 0
    for entry in reversed(history):
        if isinstance(entry["content"], list):
            for item in entry["content"]:
                item.pop("cache_control", None)
        entry.pop("cache_control", None)
        if tagged < last_n and entry["role"] in ("user", "tool"):
            if isinstance(entry["content"], str):
                entry["content"] = [{"type": "text", "text": entry["content"], "cache_control": dict(BREAKPOINT)}]
            else:
                entry["content"][0]["cache_control"] = dict(BREAKPOINT)
            if entry["role"] == "tool":
                entry["content"][0].pop("cache_control", None)
                entry["cache_control"] = dict(BREAKPOINT)
            tagged += 1
    return history


def test_swe_agent_cache_control_processing_is_only_appends_and_written_back_as_sent(caplog) -> None:
    guard = ContextGuard("swe-agent", format="openai_chat")
    history: list[dict] = [{"role": "system", "content": "You are a software engineer."},
                           {"role": "user", "content": "Fix the failing test in tests/test_fields.py."}]
    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        for step in range(5):
            sent = _swe_agent_cache_control(history)
            assert guard.observe(sent) is None  # an append, no rewrite of consumed history
            assert guard.messages == sent  # written back in the shape sent last, breakpoints where they are now
            call = f"call_{step}"
            history.append({"role": "assistant", "content": f"Step {step}: run the tests.", "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "pytest"}'}}]})
            history.append({"role": "tool", "tool_call_id": call, "content": f"{step} failed, 41 passed"})
    assert not caplog.records
    final = copy.deepcopy(history)
    assert guard.observe(final) is None
    assert any(isinstance(m["content"], list) for m in final) and any(isinstance(m["content"], str) for m in final)
