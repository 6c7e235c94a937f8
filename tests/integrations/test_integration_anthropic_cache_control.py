"""Anthropic multi-turn prompt caching through `guarded_messages` (review F12, session 7): the real
`anthropic` client against the tests' fake Messages API. The ``cache_control`` breakpoint on the last
block of the newest user turn, taken off the previous turn as it moves, is no edit of that turn: every
request is an append, with no prefix_identity finding, no observed mutation and no warning."""

from __future__ import annotations

import logging

import pytest

anthropic = pytest.importorskip("anthropic")

from fake_anthropic_api import FakeAnthropicAPI  # noqa: E402

from ctxwatch import ContextGuard  # noqa: E402
from ctxwatch.integrations.anthropic import guarded_messages  # noqa: E402

BREAKPOINT = {"type": "ephemeral"}
TOOLS = [{"name": "lookup", "description": "Look up an order", "input_schema": {
    "type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}}]


def _move_breakpoint(history: list) -> None:
    """Take the breakpoint off every earlier block (in place), as the caching guide's loop does."""
    for m in history:
        if isinstance(m["content"], list):
            for b in m["content"]:
                if isinstance(b, dict):
                    b.pop("cache_control", None)


def test_a_moving_breakpoint_on_a_chat_is_only_appends(capture, caplog) -> None:
    api = FakeAnthropicAPI([[{"type": "text", "text": f"Answer {i}."}] for i in range(6)])
    messages = guarded_messages(api.client().messages, ContextGuard("cached-chat", telemetry=capture.telemetry))
    history: list = []
    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        for t in range(6):
            _move_breakpoint(history)
            history.append({"role": "user", "content": [
                {"type": "text", "text": f"Question {t}: status of ORD-{t:06d}?", "cache_control": BREAKPOINT}]})
            answer = messages.create(model="claude-test", max_tokens=64, messages=history)
            history.append({"role": "assistant", "content": answer.content})
    assert capture.summary() == []  # no rewrite, no prefix_identity, no cache invalidation
    assert len(capture.appends()) == 12  # each question and each answer
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_breakpoint_on_the_newest_tool_result_moving_through_a_tool_loop_is_only_appends(capture) -> None:
    turns = [[{"type": "tool_use", "id": f"toolu_{i:02d}", "name": "lookup", "input": {"order": f"A{i}"}}]
             for i in range(4)] + [[{"type": "text", "text": "All orders shipped."}]]
    api = FakeAnthropicAPI(turns)
    messages = guarded_messages(api.client().messages, ContextGuard("cached-tools", telemetry=capture.telemetry))
    history: list = [{"role": "user", "content": [{"type": "text", "text": "Where are my orders?",
                                                    "cache_control": BREAKPOINT}]}]
    while True:
        answer = messages.create(model="claude-test", max_tokens=64, messages=history, tools=TOOLS)
        history.append({"role": "assistant", "content": answer.content})
        uses = [b for b in answer.content if b.type == "tool_use"]
        if not uses:
            break
        # new objects each turn (a loop that rebuilds its blocks), the breakpoint on the newest result only
        history = [{**m, "content": [b if not isinstance(b, dict) else {k: v for k, v in b.items()
                                                                         if k != "cache_control"}
                                     for b in m["content"]]} for m in history]
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": f"shipped, TRK-{1000 + int(u.id[-2:])}",
             "cache_control": BREAKPOINT} for u in uses]})
    assert capture.summary() == []
    assert len(capture.appends()) == 10
