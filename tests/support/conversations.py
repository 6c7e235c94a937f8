"""Builders for realistic test conversations in the context model (tool pairs, plans, policies)."""

from __future__ import annotations

import json

from ctxwatch.model import Message, TextPart, ToolCall, ToolResult


def system(text: str = "You are a careful data assistant.", id: str | None = None) -> Message:
    return Message("system", [TextPart(text)], id=id)


def user(text: str, id: str | None = None) -> Message:
    return Message("user", [TextPart(text)], id=id)


def assistant(text: str = "", *calls: ToolCall, id: str | None = None) -> Message:
    parts = ([TextPart(text)] if text else []) + list(calls)
    return Message("assistant", parts, id=id)


def call(id: str, name: str, **arguments) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(arguments, sort_keys=True))


def result(call_id: str, output: str) -> Message:
    """An OpenAI-style tool message carrying one result."""
    return Message("tool", [ToolResult(call_id=call_id, output=output)])


def results(*pairs: tuple[str, str]) -> Message:
    """An Anthropic-style user message carrying several tool_result blocks."""
    return Message("user", [ToolResult(call_id=cid, output=out) for cid, out in pairs])


def tool_turn(call_id: str, name: str, output: str, **arguments) -> list[Message]:
    """One complete tool round: the assistant's call and its result."""
    return [assistant("", call(call_id, name, **arguments)), result(call_id, output)]


def record_000_session() -> list[Message]:
    """Record 000's observed session: `call_7f3a` to `query_db` sits in the oldest 40% of history,
    its result just after it."""
    return [
        system("You are a support agent. Use the tools to answer questions about orders."),
        user("How many orders did customer 4411 place in March, and were any refunded?"),
        assistant("", call("call_19bd", "lookup_customer", customer_id=4411)),
        result("call_19bd", '{"customer_id": 4411, "name": "Ada Park", "tier": "gold"}'),
        assistant("", call("call_7f3a", "query_db", sql="SELECT count(*) FROM orders WHERE customer=4411")),
        result("call_7f3a", '{"rows": [[17]]}'),
        assistant("Customer 4411 placed 17 orders in March. Let me check refunds."),
        user("Also list the refunded ones."),
        assistant("", call("call_2c11", "list_refunds", customer_id=4411)),
        result("call_2c11", '{"refunds": ["ORD-20931", "ORD-20977"]}'),
        assistant("Two were refunded: ORD-20931 and ORD-20977."),
    ]


FORMATS = ("ctxwatch", "openai_chat", "anthropic")


def in_format(messages: list[Message], fmt: str) -> list:
    """The conversation as a caller in `fmt` would hold it (Anthropic: results in user messages)."""
    if fmt == "ctxwatch":
        return list(messages)
    from ctxwatch.adapters import from_messages
    if fmt == "anthropic":
        messages = [Message("user", m.parts) if m.role == "tool" else m for m in messages]
        if messages and messages[0].role == "system":
            return from_messages(messages[1:], fmt)
    return from_messages(messages, fmt)
