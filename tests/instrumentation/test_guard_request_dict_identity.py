"""An Anthropic request dict handed to the guard whole: its own keys (``model``, ``max_tokens``,
``tools``...) ride on its first message for the round trip, outside that message's identity
(adapters/_shape). A turn that only appends, with ``max_tokens`` raised, is an append; the guard hands
back the request as the caller sent it last."""

from __future__ import annotations

import logging

from ctxwatch import ContextGuard
from ctxwatch.adapters import from_messages, to_messages


def _request(turns: int, max_tokens: int, **other: object) -> dict:
    messages: list[dict] = []
    for t in range(turns):
        messages.append({"role": "user", "content": f"Question {t}?"})
        messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Answer {t}."}]})
    messages.append({"role": "user", "content": f"Question {turns}?"})
    return {"model": "claude-test", "max_tokens": max_tokens, **other, "messages": messages}


def test_request_keys_are_outside_the_first_messages_identity_and_written_back() -> None:
    for other in ({}, {"system": [{"type": "text", "text": "Be brief."}]}):
        small, large = _request(1, 64, **other), _request(1, 4096, temperature=0.2, **other)
        first = [to_messages(r, "anthropic")[0] for r in (small, large)]
        assert first[0].digest == first[1].digest
        for r in (small, large):
            assert from_messages(to_messages(r, "anthropic"), "anthropic") == r
    # the first turn, carrying the request keys, as a string or as a one-text-block list: one message
    as_list = _request(0, 64)
    breakpoint_ = {"type": "ephemeral"}
    as_list["messages"][0]["content"] = [{"type": "text", "text": "Question 0?", "cache_control": breakpoint_}]
    read = [to_messages(r, "anthropic")[0] for r in (_request(0, 64), as_list)]
    assert read[0].digest == read[1].digest
    assert from_messages(to_messages(as_list, "anthropic"), "anthropic") == as_list


def test_a_request_whose_max_tokens_changed_between_calls_is_an_append(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        for other in ({}, {"system": "Be brief."}):  # the request keys on the first turn, or on the system prompt
            guard = ContextGuard("request-dict", format="anthropic")
            for turns, max_tokens in [(0, 64), (1, 1024), (2, 1024), (3, 256)]:
                request = _request(turns, max_tokens, **other)
                assert guard.observe(request) is None  # no rewrite of the consumed first message
                assert guard.messages == request  # the request as sent last, its max_tokens included
    assert not caplog.records
