"""Issue 2 §4 and the bench target: the identity-cached `Converter` for a loop that resends its context.

The guard converts the same 500-message list again and again with 5 messages changed. An
unchanged dict gives back the very same `Message` object; a dict replaced, or mutated in place
at any depth, is read again; the cache stays bounded; a list whose format is
only decided by a later message is read again in that format.
"""

from __future__ import annotations

import copy

from ctxwatch.adapters import Converter, to_messages


def chat_context(n: int) -> list[dict]:
    out: list[dict] = [{"role": "system", "content": "You are careful."}]
    for i in range(n):
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "query_db", "arguments": f'{{"n": {i}}}'}}]})
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": [{"type": "text", "text": f"row {i}"}]})
    return out


def test_unchanged_dicts_give_the_same_message_objects() -> None:
    data = chat_context(250)
    conv = Converter()
    first = conv.to_messages(data)
    second = conv.to_messages(data)
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert conv.format == "openai_chat"
    assert first == to_messages(data)


def test_five_of_500_changed() -> None:
    data = chat_context(250)[:500]
    conv = Converter()
    first = conv.to_messages(data)
    changed = copy.copy(data)
    for i in (3, 100, 250, 400, 499):
        changed[i] = copy.deepcopy(data[i])
        changed[i]["content"] = [{"type": "text", "text": "elided"}] if changed[i]["role"] == "tool" else "x"
    second = conv.to_messages(changed)
    reused = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a is b]
    assert len(reused) == 495
    assert second == to_messages(changed)
    assert second[3].text.startswith("x") and second[100].text == "elided"


def test_in_place_mutation_at_any_depth_is_seen() -> None:
    data = chat_context(3)
    conv = Converter()
    conv.to_messages(data)
    data[1]["tool_calls"][0]["function"]["arguments"] = '{"n": 99}'
    data[2]["content"][0]["text"] = "changed row"
    data[4]["content"].append({"type": "text", "text": "more"})
    data[0]["name"] = "policy"
    after = conv.to_messages(data)
    assert after == to_messages(data)
    assert after[1].tool_calls[0].arguments == '{"n": 99}'
    assert after[2].text == "changed row"
    assert after[4].text == "row 1\nmore"
    assert after[0].name == "policy"


def test_key_renamed_in_place_is_seen() -> None:
    data = [{"role": "user", "content": "hi"}]
    conv = Converter()
    conv.to_messages(data)
    data[0]["text"] = data[0].pop("content")  # same values, different key
    assert conv.to_messages(data)[0].extra is not None


def test_caller_objects_are_never_modified() -> None:
    data = chat_context(20)
    before = copy.deepcopy(data)
    conv = Converter()
    conv.to_messages(data)
    conv.to_messages(data)
    assert data == before


def test_cache_is_bounded() -> None:
    """Entries unused by the last 3 calls go once they outnumber those in use; never above max_entries."""
    conv = Converter()
    sizes = []
    for _ in range(40):
        conv.to_messages(chat_context(50))  # 101 fresh dicts each time
        sizes.append(conv.cached)
    assert max(sizes) <= 2 * 3 * 101 + 64
    assert sizes[-1] >= 101
    small = Converter(max_entries=10)
    small.to_messages(chat_context(50))
    assert small.cached <= 10


def test_alternating_between_context_and_proposal_stays_warm() -> None:
    context = chat_context(100)
    proposal = context[:1] + context[41:]  # a compaction dropping 20 whole pairs
    conv = Converter()
    conv.to_messages(context)
    conv.to_messages(proposal)
    misses = conv.misses
    conv.to_messages(context)
    conv.to_messages(proposal)
    assert conv.misses == misses


def test_format_decided_by_a_later_message_rereads_the_list() -> None:
    """Plain messages read alike everywhere; the first Anthropic block fixes the format for good."""
    data = [{"role": "user", "content": "look"}, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}]
    conv = Converter()
    assert conv.to_messages(data)[1].call_ids == ()
    assert not conv.decided
    data.append({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]})
    messages = conv.to_messages(data)
    assert conv.format == "anthropic" and conv.decided
    assert messages == to_messages(data, "anthropic")
    assert messages[2].call_ids == ("toolu_1",)


def test_request_dict_and_ctxwatch_messages() -> None:
    request = {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    conv = Converter()
    first = conv.to_messages(request)
    second = conv.to_messages(request)
    assert [m.role for m in first] == ["system", "user"]
    assert first[1] is second[1]
    own = Converter()
    assert own.to_messages(first) == first and own.format == "ctxwatch"
