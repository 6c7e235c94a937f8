"""Request annotations are no part of a message's identity (review F12/F13, session 7): a block's
``cache_control`` breakpoint and a key whose value is null (``"citations": null`` of an SDK object's
``model_dump()``; OpenAI's ``"refusal": null``, ``"tool_calls": null``, ``"name": null``) leave the
digest as it is, still write back as they were read, and the guard hands back the caller's objects as
they are now (with the breakpoint where the caller put it last)."""

from __future__ import annotations

import json
import logging

import pytest

from ctxwatch import ContextGuard
from ctxwatch.adapters import from_messages, to_messages

anthropic_types = pytest.importorskip("anthropic.types")
openai_types = pytest.importorskip("openai.types.chat")

BREAKPOINT = {"type": "ephemeral"}


def _user(text: str, cached: bool) -> dict:
    block: dict = {"type": "text", "text": text}
    if cached:
        block["cache_control"] = BREAKPOINT
    return {"role": "user", "content": [block]}


def _digest(message: object, fmt: str) -> int:
    return to_messages([message], fmt)[0].digest


def test_a_breakpoint_is_outside_the_digest_and_written_back() -> None:
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "7", "cache_control": BREAKPOINT}], "cache_control": BREAKPOINT}]}
    bare = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "text", "text": "7"}]}]}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    for marked, plain in [(_user("q", True), _user("q", False)), (result, bare),
                          ({"role": "user", "content": [{**image, "cache_control": BREAKPOINT}]},
                           {"role": "user", "content": [image]})]:
        assert _digest(marked, "anthropic") == _digest(plain, "anthropic")
        assert from_messages(to_messages([marked], "anthropic"), "anthropic") == [marked]
        assert from_messages(to_messages([plain], "anthropic"), "anthropic") == [plain]
    system = {"system": [{"type": "text", "text": "Be brief.", "cache_control": BREAKPOINT}],
              "messages": [_user("q", False)]}
    assert from_messages(to_messages(system, "anthropic"), "anthropic") == system


def test_a_moving_breakpoint_is_no_rewrite_and_the_callers_latest_objects_are_handed_back(caplog) -> None:
    guard = ContextGuard("cached", format="anthropic")
    history: list = []
    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        for t in range(4):  # new objects each turn; the breakpoint on the newest user turn only
            history = [_user(m["content"][0]["text"], False) if m["role"] == "user" else m for m in history]
            history.append(_user(f"question {t}", True))
            assert guard.observe(history) is None
            handed = guard.messages
            assert all(a is b for a, b in zip(handed, history, strict=True))
            history.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {t}"}]})
            assert guard.observe(history) is None
        # the same messages, new objects, the breakpoint taken off: handed back as they are now
        history = [_user(m["content"][0]["text"], False) if m["role"] == "user" else m for m in history]
        assert guard.observe(history) is None
        handed = guard.messages
    assert all(a is b for a, b in zip(handed, history, strict=True))
    assert "cache_control" not in json.dumps(handed)
    assert not caplog.records


def _anthropic_forms() -> dict:
    def blocks() -> list:
        return [anthropic_types.TextBlock(type="text", text="Looking it up.", citations=None),
                anthropic_types.ToolUseBlock(type="tool_use", id="toolu_1", name="lookup", input={"sku": "S-1"})]
    return {"objects": blocks, "model_dump()": lambda: [b.model_dump() for b in blocks()],
            "exclude_none": lambda: [b.model_dump(exclude_none=True) for b in blocks()],
            "json": lambda: json.loads(json.dumps([b.model_dump(mode="json") for b in blocks()]))}


@pytest.mark.parametrize(("first", "then"), [(a, b) for a in _anthropic_forms() for b in _anthropic_forms() if a != b])
def test_an_sdk_turn_dumped_with_or_without_its_nulls_is_the_same_message(first: str, then: str, caplog) -> None:
    forms = _anthropic_forms()

    def history(form: str) -> list:
        return [{"role": "user", "content": "How many S-1?"}, {"role": "assistant", "content": forms[form]()},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "7"}]}]
    guard = ContextGuard("dump", format="anthropic")
    guard.observe(history(first))
    latest = history(then) + [{"role": "assistant", "content": [{"type": "text", "text": "7 units."}]}]
    with caplog.at_level(logging.WARNING, logger="ctxwatch"):
        assert guard.observe(latest) is None  # an append, no rewrite of consumed history
    assert all(a is b for a, b in zip(guard.messages, latest, strict=True))
    assert not caplog.records


def test_openai_null_fields_are_absent_ones_and_written_back() -> None:
    message = openai_types.ChatCompletionMessage(role="assistant", content="Done.")
    dumped, sparse = message.model_dump(), message.model_dump(exclude_none=True)
    assert dumped != sparse and None in dumped.values()
    assert _digest(dumped, "openai_chat") == _digest(sparse, "openai_chat")
    nulls = {"role": "assistant", "content": "Done.", "tool_calls": None, "name": None, "refusal": None}
    assert _digest(nulls, "openai_chat") == _digest({"role": "assistant", "content": "Done."}, "openai_chat")
    for m in (dumped, sparse, nulls):
        assert from_messages(to_messages([m], "openai_chat"), "openai_chat") == [m]
