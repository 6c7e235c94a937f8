"""A fake Anthropic Messages API for the real `anthropic` SDK, served in-process through an httpx
MockTransport (no network). It answers like the API where the tests need it:

- a request whose tool ids are unpaired gets the API's 400 ``invalid_request_error``;
- ``context_management`` edits: ``clear_tool_uses_20250919`` (trigger and keep counted in tool
  uses) reports ``applied_edits`` with the number of oldest tool uses it cleared;
  ``compact_20260112`` (trigger in input tokens, estimated as characters / 4) answers with a
  ``compaction`` block before the reply, and later requests are read from the last such block on;
- the assistant turns come from a script: one list of content blocks per call;
- prompt caching as the API reports it: the longest run of leading messages equal to the previous
  request's (after its server edits) is read from the cache (``cache_read_input_tokens``), the rest
  written to it (``cache_creation_input_tokens``), tokens estimated as JSON characters / 4.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx2 as httpx  # the SDK speaks httpx2, which keeps httpx's API


class FakeAnthropicAPI:
    def __init__(self, script: list[list[dict]], summary: str = "Summary of the earlier turns.") -> None:
        self._script: Iterator[list[dict]] = iter(script)
        self.summary = summary
        self.requests: list[dict] = []
        self.cached: list[dict] = []  # what the previous request put in the prompt cache
        self.cache_reads: list[int] = []

    def client(self) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key="test-key", max_retries=0,
                                   http_client=httpx.Client(transport=httpx.MockTransport(self.handle)))

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        messages = _from_last_compaction(body["messages"])
        problem = _unpaired(messages)
        if problem:
            return httpx.Response(400, json={"type": "error", "error": {"type": "invalid_request_error",
                                                                       "message": problem}})
        edits = {e["type"]: e for e in (body.get("context_management") or {}).get("edits", [])}
        applied = []
        clear = edits.get("clear_tool_uses_20250919")
        uses = sum(1 for m in messages if isinstance(m["content"], list)
                   for b in m["content"] if b["type"] == "tool_use")
        if clear and uses > clear["trigger"]["value"]:
            cleared = uses - clear["keep"]["value"]
            applied.append({"type": "clear_tool_uses_20250919", "cleared_tool_uses": cleared,
                            "cleared_input_tokens": 40 * cleared})
        read, written = self._cache(_cleared_view(messages, applied))
        content = list(next(self._script))
        compact = edits.get("compact_20260112")
        if compact and len(json.dumps(messages)) / 4 > compact["trigger"]["value"]:
            content.insert(0, {"type": "compaction", "content": self.summary})
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return httpx.Response(200, json={
            "id": f"msg_{len(self.requests):04d}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": len(json.dumps(messages)) // 4, "output_tokens": 20,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": written},
            "context_management": {"applied_edits": applied},
        })


    def _cache(self, prompt: list[dict]) -> tuple[int, int]:
        same = 0
        while same < min(len(prompt), len(self.cached)) and prompt[same] == self.cached[same]:
            same += 1
        self.cached = prompt
        read = len(json.dumps(prompt[:same])) // 4 if same else 0
        self.cache_reads.append(read)
        return read, len(json.dumps(prompt[same:])) // 4


def _cleared_view(messages: list[dict], applied: list[dict]) -> list[dict]:
    """The prompt the model reads after tool-result clearing: the oldest cleared results replaced."""
    cleared = sum(e.get("cleared_tool_uses", 0) for e in applied)
    out = []
    for m in messages:
        if isinstance(m["content"], list):
            blocks = []
            for b in m["content"]:
                if b["type"] == "tool_result" and cleared > 0:
                    cleared -= 1
                    b = {**b, "content": "[cleared]"}
                blocks.append(b)
            m = {**m, "content": blocks}
        out.append(m)
    return out


def _from_last_compaction(messages: list[dict]) -> list[dict]:
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i]["content"]
        if isinstance(content, list):
            for j, block in enumerate(content):
                if block["type"] == "compaction":
                    return [{**messages[i], "content": content[j:]}] + messages[i + 1:]
    return messages


def _unpaired(messages: list[dict]) -> str | None:
    """The API's message for the first unpaired tool id, or None."""
    for i, m in enumerate(messages):
        blocks = m["content"] if isinstance(m["content"], list) else []
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if uses:
            following = messages[i + 1]["content"] if i + 1 < len(messages) else []
            answered = {b["tool_use_id"] for b in following if isinstance(b, dict) and b["type"] == "tool_result"}
            missing = [u for u in uses if u not in answered]
            if missing:
                return (f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` "
                        "block in the next message.")
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        if results:
            previous = messages[i - 1]["content"] if i > 0 and isinstance(messages[i - 1]["content"], list) else []
            called = {b["id"] for b in previous if b["type"] == "tool_use"}
            stray = [r for r in results if r not in called]
            if stray:
                return (f"messages.{i}.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{stray[0]}. Each `tool_result` block must have a corresponding `tool_use` block in "
                        "the previous message.")
    return None
