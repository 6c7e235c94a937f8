"""OpenAI Responses input items of an order-lookup agent (one user question, one tool call and its output,
one answer per turn): the literals a compaction keeps or hides are the order ids and warehouses."""

from __future__ import annotations

import json


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def turn(n: int) -> list[dict]:
    """Turn `n`: ORD-(1000+n) looked up in warehouse WH-(200+n)."""
    order = f"ORD-{1000 + n}"
    return [user(f"Where is {order}?"),
            {"type": "function_call", "call_id": f"call_{n}", "name": "lookup",
             "arguments": json.dumps({"order": order, "warehouse": f"WH-{200 + n}"})},
            {"type": "function_call_output", "call_id": f"call_{n}", "output": f"{order} shipped"},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": f"{order} left warehouse WH-{200 + n}."}]}]


def turns(numbers: range) -> list[dict]:
    return [item for n in numbers for item in turn(n)]


def compaction(n: int) -> dict:
    """OpenAI's opaque compaction item, as ``/responses/compact`` returns it."""
    return {"type": "compaction", "id": f"cmp_{n}", "encrypted_content": f"gAAAA{n:04d}" * 6}
