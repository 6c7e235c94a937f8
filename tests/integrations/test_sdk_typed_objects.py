"""The plain guard takes the provider SDKs' own typed objects, as their documented loops append them
(review F3 of session 5): Anthropic's ``{"role": "assistant", "content": response.content}`` (a list of
`TextBlock` / `ToolUseBlock`) and OpenAI's ``messages.append(completion.choices[0].message)`` (a
`ChatCompletionMessage`). The real `anthropic` and `openai` clients talk to in-process fake APIs (httpx
MockTransport, no network); a compaction through `guard.apply` hands back the caller's objects where a
message is unchanged, and the next request the SDK sends from that list is paired and carries what the
typed objects held."""

from __future__ import annotations

import json

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

import httpx2  # noqa: E402  (both SDKs speak httpx2)
from fake_anthropic_api import FakeAnthropicAPI  # noqa: E402

from ctxwatch import ContextGuard  # noqa: E402
from ctxwatch.adapters import to_messages  # noqa: E402

TOOLS = [{"name": "lookup", "description": "Stock of a SKU", "input_schema": {
    "type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}]
STEPS = 12


def test_an_anthropic_loop_appending_response_content_as_it_comes_is_guarded_and_compacted() -> None:
    api = FakeAnthropicAPI([[{"type": "text", "text": f"Checking SKU-{n:05d}."},
                             {"type": "tool_use", "id": f"toolu_{n:02d}", "name": "lookup",
                              "input": {"sku": f"SKU-{n:05d}"}}] for n in range(STEPS)])
    client = api.client()
    guard = ContextGuard("typed-anthropic", format="anthropic")
    messages: list = [{"role": "user", "content": "Stock of every SKU, please."}]
    compactions = 0
    for n in range(STEPS):
        guard.observe(messages)
        response = client.messages.create(model="claude-test", max_tokens=256, messages=messages, tools=TOOLS)
        messages.append({"role": "assistant", "content": response.content})  # typed blocks, as the SDK docs do
        use = next(b for b in response.content if b.type == "tool_use")
        messages.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                      "content": f"{use.input['sku']}: {7 * n} units"}]})
        if n % 4 == 3:  # fold what the model has read into one summary turn; keep the unread call and result
            reply, result = messages[-2], messages[-1]
            seen = "; ".join(f"SKU-{k:05d}: {7 * k} units" for k in range(n))
            proposal = [{"role": "user", "content": f"Summary so far: {seen}."}, reply, result]
            messages = guard.apply(proposal, kind="compact")
            compactions += 1
            assert messages[-2] is reply and messages[-1] is result  # the caller's objects, handed back as they were
    assert compactions == STEPS // 4
    assert len(api.requests) == STEPS  # the fake API answers 400 to an unpaired request: none was
    sent = api.requests[-1]["messages"]
    assert sent[-2]["content"][1] == {"type": "tool_use", "id": "toolu_10", "name": "lookup",
                                      "input": {"sku": "SKU-00010"}}


def _chat_api(requests: list[dict]) -> openai.OpenAI:
    def handle(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        requests.append(body)
        n = len(requests)
        return httpx2.Response(200, json={
            "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1700000000, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "refusal": None, "tool_calls": [{
                    "id": f"call_{n}", "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"sku": f"SKU-{n:05d}"})}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    return openai.OpenAI(api_key="test-key", base_url="http://api.invalid/v1", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(handle)))


def test_an_openai_loop_appending_the_completion_message_as_it_comes_is_guarded_and_compacted() -> None:
    requests: list[dict] = []
    client = _chat_api(requests)
    guard = ContextGuard("typed-openai")
    system = {"role": "system", "content": "You are an inventory agent."}
    messages: list = [system, {"role": "user", "content": "Stock of every SKU, please."}]
    for n in range(1, STEPS + 1):
        guard.observe(messages)
        completion = client.chat.completions.create(model="gpt-test", messages=messages)
        reply = completion.choices[0].message  # a ChatCompletionMessage, appended as the SDK docs do
        messages.append(reply)
        call = reply.tool_calls[0]
        result = {"role": "tool", "tool_call_id": call.id, "content": f"SKU-{n:05d}: {7 * n} units"}
        messages.append(result)
        if n % 4 == 0:
            seen = "; ".join(f"SKU-{k:05d}: {7 * k} units" for k in range(1, n))
            messages = guard.apply([system, {"role": "user", "content": f"Summary so far: {seen}."}, reply, result],
                                   kind="compact")
            assert messages[0] is system and messages[-2] is reply and messages[-1] is result
    sent = requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == f"call_{STEPS - 1}"
    assert all(m.get("role") != "tool" or any(c["id"] == m["tool_call_id"] for p in sent
               for c in p.get("tool_calls") or ()) for m in sent)


def test_a_typed_object_reads_as_the_dict_its_sdk_sends() -> None:
    """One rule for SDK objects: a typed message and its dump are the same message, so a loop that swaps
    one for the other between turns has changed nothing the guard could call a rewrite."""
    block = anthropic.types.ToolUseBlock(type="tool_use", id="toolu_01", name="lookup", input={"sku": "A"})
    typed = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [block]}]
    dumped = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [block.model_dump(exclude_none=True)]}]
    assert [m.digest for m in to_messages(typed)] == [m.digest for m in to_messages(dumped)]
    assert to_messages(typed)[1].parts[0].id == "toolu_01"
