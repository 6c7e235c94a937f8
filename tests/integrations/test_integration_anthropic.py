"""Anthropic SDK integration (issue 8, record 000 pairing and record 003 literal loss): the real
`anthropic` client against an in-process fake Messages API. Server-side context editing
(clear_tool_uses) and compaction blocks become guard mutations whose effect on pairs and protected
literals is measured, one span per server edit; a client-side trim that would orphan a tool result
is refused before the request leaves, naming the 400 the API answers it with."""

from __future__ import annotations

import pytest

anthropic = pytest.importorskip("anthropic")

from fake_anthropic_api import FakeAnthropicAPI  # noqa: E402

from ctxwatch import ContextGuard, OrphanedToolPairError, semconv  # noqa: E402
from ctxwatch.integrations.anthropic import guarded_messages  # noqa: E402

TOOLS = [{"name": "lookup", "description": "Look up an order", "input_schema": {
    "type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}}]
CLEAR = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3},
                    "keep": {"type": "tool_uses", "value": 2}}]}
BETAS = ["context-management-2025-06-27"]


def lookups(n: int) -> list[list[dict]]:
    turns = [[{"type": "tool_use", "id": f"toolu_{i:02d}", "name": "lookup", "input": {"order": f"A{i}"}}]
             for i in range(n)]
    return turns + [[{"type": "text", "text": "All orders shipped."}]]


def run_loop(messages_api, **request) -> list[dict]:
    """A plain tool loop as users write it: the answer's blocks are sent back as they came."""
    messages: list = [{"role": "user", "content": "Where are my orders?"}]
    while True:
        response = messages_api.create(model="claude-test", max_tokens=256, messages=messages, tools=TOOLS,
                                       **request)
        messages.append({"role": "assistant", "content": response.content})
        uses = [b for b in response.content if b.type == "tool_use"]
        if not uses:
            return messages
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": f"shipped, tracking TRK-{1000 + int(u.id[-2:])}"}
            for u in uses]})


def test_server_side_tool_clearing_is_one_prune_span_per_new_edit_with_lost_literals(capture) -> None:
    api = FakeAnthropicAPI(lookups(5))
    guard = ContextGuard("anthropic-clear", telemetry=capture.telemetry, enforce={"prefix_identity": "warn"})
    transcript = run_loop(guarded_messages(api.client().beta.messages, guard), betas=BETAS,
                          context_management=CLEAR)
    assert transcript[-1]["content"][0].text == "All orders shipped."
    # the server cleared 2 oldest tool uses at call 5 (4 uses > 3, keep 2) and 3 at call 6: two edits
    assert capture.summary() == [("ctxwatch prune", "patch"), ("ctxwatch prune", "patch")]
    first, second = (s.attributes for s in capture.spans())
    # TRK-1000/1001, then TRK-1002 leave the model's view: the literal_loss check warns on both edits; they
    # were tool output only, so they are no downstream literal and the cycle loses none (docs/alarm.md)
    assert all("literal_loss" in s[semconv.WARNINGS] for s in (first, second))
    assert (first[semconv.LITERALS_LOST], second[semconv.LITERALS_LOST]) == (0, 0)
    assert first[semconv.ORPHANS_TOOL_USE] == first[semconv.ORPHANS_TOOL_RESULT] == 0
    # the guard's view is what the model read: the three oldest results are placeholders now
    cleared = [b for m in guard.messages[1:] if isinstance(m["content"], list) for b in m["content"]
               if b["type"] == "tool_result" and "TRK-" not in b["content"]]
    assert [b["tool_use_id"] for b in cleared] == ["toolu_00", "toolu_01", "toolu_02"]
    # and nothing else changed: the requests carry the client's own history, uncleared
    assert "TRK-1000" in str(api.requests[-1]["messages"])


def test_server_side_clearing_of_consumed_results_is_reported_as_the_guard_decides(capture) -> None:
    api = FakeAnthropicAPI(lookups(4))
    guard = ContextGuard("anthropic-default", telemetry=capture.telemetry)
    run_loop(guarded_messages(api.client().beta.messages, guard), betas=BETAS, context_management=CLEAR)
    # the server applied the clearing and the model read the result: the guard cannot refuse it, so it
    # is observed — reported with what it finds (record 000: it altered the consumed prefix) — and the
    # guard's view follows what the model read
    assert capture.summary() == [("ctxwatch prune", "patch")]
    span = capture.spans()[0].attributes
    assert span[semconv.OBSERVED] is True and "prefix_identity" in span[semconv.VIOLATIONS]
    assert span[semconv.LITERALS_LOST] >= 1
    assert "TRK-1000" not in str(guard.messages)


def test_a_compaction_block_is_one_compact_mutation_measuring_what_the_summary_dropped(capture) -> None:
    api = FakeAnthropicAPI(lookups(6), summary="Orders A0-A5 were looked up; all shipped.")
    guard = ContextGuard("anthropic-compact", telemetry=capture.telemetry, enforce={"prefix_identity": "warn"})
    compaction = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 250}}]}
    transcript = run_loop(guarded_messages(api.client().beta.messages, guard), betas=["compact-2026-01-12"],
                          context_management=compaction)
    compacted_at = [i for i, m in enumerate(transcript) if m["role"] == "assistant"
                    and m["content"][0].type == "compaction"]
    assert len(compacted_at) == 1
    assert capture.summary() == [("ctxwatch compact", "patch")]
    span = capture.spans()[0].attributes
    assert "literal_loss" in span[semconv.WARNINGS] and span[semconv.ORPHANS_TOOL_RESULT] == 0
    # from then on the guard reads what the server reads: the summary and what follows it
    assert guard.messages[0]["content"][0] == {"type": "text", "text": "Orders A0-A5 were looked up; all shipped."}


def test_a_client_trim_orphaning_a_tool_result_is_refused_before_it_is_sent_naming_the_400(capture) -> None:
    api = FakeAnthropicAPI(lookups(2) + [[{"type": "text", "text": "ok"}]])
    guard = ContextGuard("anthropic-trim", telemetry=capture.telemetry)
    messages_api = guarded_messages(api.client().messages, guard)
    transcript = run_loop(messages_api)
    # a naive trim: drop the oldest assistant turn, keep its tool_result
    trimmed = [transcript[0]] + transcript[2:] + [{"role": "user", "content": "and A9?"}]
    sent = len(api.requests)
    with pytest.raises(OrphanedToolPairError) as refused:
        messages_api.create(model="claude-test", max_tokens=256, messages=trimmed, tools=TOOLS)
    assert len(api.requests) == sent  # refused before it left
    text = str(refused.value)
    assert "toolu_00" in text and "400 invalid_request_error" in text
    # what the API answers the same request with, had it been sent:
    with pytest.raises(anthropic.BadRequestError) as provider:
        api.client().messages.create(model="claude-test", max_tokens=256, messages=trimmed, tools=TOOLS)
    phrase = "unexpected tool_use_id found in tool_result blocks"
    assert phrase in str(provider.value).replace("`", "") and phrase in text
    assert capture.summary()[-1] == ("ctxwatch prune", "abort")


def test_the_async_client_is_recorded_the_same_way(capture) -> None:
    import asyncio

    import httpx2 as httpx

    api = FakeAnthropicAPI(lookups(1))
    client = anthropic.AsyncAnthropic(api_key="test-key", max_retries=0,
                                      http_client=httpx.AsyncClient(transport=httpx.MockTransport(api.handle)))
    guard = ContextGuard("anthropic-async", telemetry=capture.telemetry)
    messages_api = guarded_messages(client.messages, guard)

    async def call(messages: list) -> object:
        return await messages_api.create(model="claude-test", max_tokens=64, messages=messages, tools=TOOLS)

    first = asyncio.run(call([{"role": "user", "content": "A0?"}]))
    assert first.content[0].type == "tool_use"
    assert [m["role"] for m in guard.messages] == ["user", "assistant"]
    assert capture.summary() == []


def test_each_answer_carries_the_apis_cache_figures_and_a_server_edit_what_it_invalidated(capture) -> None:
    # issue 16, what rewrites cost: the API's own cache reads and writes ride on the append span of each
    # answer; the server's clearing of consumed results is the span that says how much it invalidated
    api = FakeAnthropicAPI(lookups(4))
    guard = ContextGuard("anthropic-cost", telemetry=capture.telemetry)
    run_loop(guarded_messages(api.client().beta.messages, guard), betas=BETAS, context_management=CLEAR)
    noted = [s.attributes for s in capture.appends() if semconv.CACHE_READ_TOKENS in s.attributes]
    assert [a[semconv.CACHE_READ_TOKENS] for a in noted] == api.cache_reads  # one span per response, in order
    assert all(a[semconv.CACHE_CREATION_TOKENS] > 0 for a in noted)
    (prune,) = capture.spans()
    assert prune.attributes[semconv.CACHE_INVALIDATED_CHARS] > 0
    assert prune.attributes[semconv.CACHE_INVALIDATED_TOKENS] == -(-prune.attributes[
        semconv.CACHE_INVALIDATED_CHARS] // 4)
    # the clearing broke the cached prefix: that call read less from the cache than the one before it
    cleared_at = len(api.cache_reads) - 1
    assert api.cache_reads[cleared_at] < api.cache_reads[cleared_at - 1]
    assert all(a[semconv.CACHE_INVALIDATED_CHARS] == 0 for a in noted)  # appends invalidate nothing


def summarize(messages: list) -> list:
    """docs/guard.md's summarizer, run by the client on its own list (no guard.apply)."""
    cut = int(len(messages) * 0.6)
    while cut < len(messages) and messages[cut]["role"] != "assistant":
        cut += 1
    results = [b["content"] for m in messages[:cut] if isinstance(m["content"], list) for b in m["content"]
               if b["type"] == "tool_result"]
    return [{"role": "user", "content": "Earlier: " + "; ".join(results)}] + messages[cut:]


def test_a_client_side_compaction_is_one_span_taken_on_as_sent_not_a_deferral(capture) -> None:
    """Review D5: the client compacts its own history after appending the tool results and calls create.
    The request goes as made, so the guard takes the edit on once, before it leaves: one span per edit,
    no deferral queued, no barrier finding for results the same request carries, and the answer is then
    an append on top of what was sent."""
    tasks = 24
    script = []
    for t in range(tasks):
        script += [[{"type": "tool_use", "id": f"toolu_{t:02d}", "name": "lookup", "input": {"order": f"A{t}"}}],
                   [{"type": "text", "text": f"Order A{t} shipped."}]]
    api = FakeAnthropicAPI(script)
    guard = ContextGuard("anthropic-client-compaction", telemetry=capture.telemetry)
    messages_api = guarded_messages(api.client().messages, guard)
    messages: list = []
    edits = 0
    for t in range(tasks):
        messages.append({"role": "user", "content": f"Where is order A{t}?"})
        while True:
            reply = messages_api.create(model="claude-test", max_tokens=256, messages=messages, tools=TOOLS)
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                break
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u.id, "content": f"shipped, tracking TRK-{t}"} for u in uses]})
            if len(messages) > 12:
                messages = summarize(messages)
                edits += 1
    spans = capture.spans()
    assert edits > 3 and len(spans) == edits
    for span in spans:
        attributes = span.attributes
        assert attributes[semconv.DECISION] == "patch" and attributes[semconv.OBSERVED] is True
        assert semconv.DEFERRAL_ID not in attributes
        found = tuple(attributes[semconv.VIOLATIONS]) + tuple(attributes.get(semconv.WARNINGS, ()))
        assert "barrier" not in found, found
    assert len(guard.deferred) == 0
    assert [m["content"] for m in guard.messages] == [m["content"] for m in messages]
    assert api.requests[-1]["messages"] == messages[:-1]  # sent as the client made it


def test_each_conversation_through_one_client_has_a_guard_of_its_own(capture) -> None:
    """Review F4: one wrapper serving many users, one of whom left with a tool call unanswered, made every
    later request of every user raise (each was checked as an edit of the abandoned conversation).
    `messages.conversation(key)` gives each conversation its own guard, so none is another's edit."""
    answer = [{"type": "text", "text": "Shipped."}]
    api = FakeAnthropicAPI([lookups(1)[0]] + [answer] * 6)
    messages = guarded_messages(api.client().beta.messages, ContextGuard("support", telemetry=capture.telemetry))
    histories: dict[str, list] = {}
    for user in ("left", "b", "c", "b", "c", "b", "c"):
        history = histories.setdefault(user, [])
        history.append({"role": "user", "content": f"Where is my order? ({user}, {len(history)})"})
        response = messages.conversation(user).create(model="claude-test", max_tokens=64, messages=history,
                                                     tools=TOOLS)
        history.append({"role": "assistant", "content": response.content})
    assert [b.type for b in histories["left"][-1]["content"]] == ["tool_use"]  # never answered
    assert capture.summary() == []  # no conversation was taken for an edit of another
    guards = {user: messages.conversation(user).recorder.guard for user in histories}
    assert {u: g.loop_id for u, g in guards.items()} == {"left": "support/left", "b": "support/b", "c": "support/c"}
    assert guards["left"].pending_calls == {"toolu_00"} and not guards["b"].pending_calls
    assert messages.conversation("b") is messages.conversation("b")
    assert messages.recorder.guard.loop_id == "support"  # the wrapper itself is the guard's own conversation
