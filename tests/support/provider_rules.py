"""What each provider accepts as a request's messages, written from its documented request rules and
not from ctxwatch (tests check the guard's contexts with these, independently of `ctxwatch.validity`).
Each returns one line per broken rule, naming the message; empty when the context is valid."""

from __future__ import annotations


def anthropic_problems(messages: list[dict]) -> list[str]:
    """The Messages API's rules; consecutive messages of one role are one turn, as the API combines them."""
    out = [] if messages and messages[0]["role"] == "user" else ["the first message is not a user turn"]
    turns: list[tuple[int, str, list[dict]]] = []  # (first message's index, role, blocks)
    for i, m in enumerate(messages):
        content = m["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if not blocks or any(b["type"] == "text" and not b["text"] for b in blocks):
            out.append(f"message {i}: empty content or text")
        if turns and turns[-1][1] == m["role"]:
            turns[-1][2].extend(blocks)
        else:
            turns.append((i, m["role"], list(blocks)))
    for t, (i, role, blocks) in enumerate(turns):
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if uses and t + 1 < len(turns):
            following = turns[t + 1][2]
            leading = [b.get("tool_use_id") for b in following[: len(uses)] if b["type"] == "tool_result"]
            if sorted(leading) != sorted(uses):
                out.append(f"message {i}: tool_use {uses} not answered first by the next turn")
        if role == "user":
            asked = {b["id"] for b in (turns[t - 1][2] if t else []) if b["type"] == "tool_use"}
            out += [f"message {i}: tool_result without its tool_use" for b in blocks
                    if b["type"] == "tool_result" and b["tool_use_id"] not in asked]
    return out


def openai_problems(messages: list[dict]) -> list[str]:
    out, waiting = [], set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m["tool_call_id"] not in waiting:
                out.append(f"message {i}: tool message without its call just before")
            waiting.discard(m["tool_call_id"])
            continue
        if waiting:
            out.append(f"message {i}: calls {sorted(waiting)} not answered before it")
        if m["role"] in ("user", "system") and not m["content"]:
            out.append(f"message {i}: empty content")
        waiting = {c["id"] for c in m.get("tool_calls") or ()}
    return out


def responses_problems(items: list[dict]) -> list[str]:
    """OpenAI Responses input: every function_call_output after its function_call, no empty message."""
    out, called = [], set()
    for i, item in enumerate(items):
        if item.get("type") == "function_call":
            called.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            if item["call_id"] not in called:
                out.append(f"item {i}: output for a call not made before it")
        elif not item.get("content"):
            out.append(f"item {i}: empty message")
    return out
