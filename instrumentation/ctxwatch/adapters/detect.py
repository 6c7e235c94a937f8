"""Which wire format a message list is in, decided from the messages themselves.

Each message casts a vote when it carries a mark only one format has: a Responses item type
(``message``, ``function_call``...), a Chat ``tool`` role, ``tool_calls`` or ``tool_call_id``, an
Anthropic ``tool_use`` / ``tool_result`` / ``thinking`` block, a format's own part type
(``input_text``, ``image_url``...), a LangChain object or ``{"type", "data"}`` dict, a ctxwatch
`Message`. A provider SDK's pydantic object votes as the dict it stands for (`sdk_objects`). The
first vote decides. A list with no mark at all (plain ``{"role", "content": str}``
messages, valid in every format) is read as ``openai_chat``; a ``system`` or ``developer`` role is
only a hint, since Anthropic has no such role but Responses does.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidContextError
from ..model import Message
from .langchain import is_langchain_dict, is_langchain_object
from .sdk_objects import plain_message

FORMATS = ("openai_chat", "openai_responses", "anthropic", "langchain", "ctxwatch")
DEFAULT = "openai_chat"

_RESPONSES_ITEMS = frozenset({"message", "reasoning", "item_reference", "compaction"})
_BLOCK_VOTES = {
    "tool_use": "anthropic", "tool_result": "anthropic", "thinking": "anthropic",
    "redacted_thinking": "anthropic", "document": "anthropic", "server_tool_use": "anthropic",
    "input_text": "openai_responses", "output_text": "openai_responses", "input_image": "openai_responses",
    "input_file": "openai_responses", "image_url": "openai_chat", "input_audio": "openai_chat",
}


def vote(item: Any) -> str | None:
    """The format `item` can only belong to, or None when it would read the same in several."""
    if isinstance(item, Message):
        return "ctxwatch"
    item = plain_message(item)
    if not isinstance(item, dict):
        return "langchain" if is_langchain_object(item) else None
    if is_langchain_dict(item):
        return "langchain"
    kind = item.get("type")
    blocks = _block_vote(item.get("content"), kind == "message")
    if blocks is not None:
        return blocks
    if isinstance(kind, str) and (kind in _RESPONSES_ITEMS or kind.endswith(("_call", "_call_output"))):
        return "openai_responses"
    if "tool_calls" in item or "tool_call_id" in item or item.get("role") == "tool":
        return "openai_chat"
    return None


def _block_vote(content: Any, typed_message: bool) -> str | None:
    """The vote of a content list's block types (an Anthropic API message also has type 'message')."""
    if not isinstance(content, list):
        return None
    for block in content:
        if isinstance(block, dict):
            kind = block.get("type")
            found = _BLOCK_VOTES.get(kind) if isinstance(kind, str) else None
            if found is None and (kind == "image" and "source" in block or kind == "text" and typed_message):
                found = "anthropic"
            if found:
                return found
    return None


def detect_format(data: Any) -> str:
    """One of FORMATS for a message list (or an Anthropic request dict); see the module docstring."""
    if isinstance(data, dict):
        messages = data.get("messages")
        if not isinstance(messages, list):
            raise InvalidContextError("expected a list of messages or an Anthropic request dict "
                                      "({'system': ..., 'messages': [...]}), got a dict without a 'messages' list")
        if "system" in data or _first_vote(messages) in (None, "anthropic"):
            return "anthropic"
        raise InvalidContextError("a request dict is read only in the Anthropic shape ({'system': ..., "
                                  "'messages': [...]}); pass the list of messages itself")
    if not isinstance(data, (list, tuple)):
        raise InvalidContextError(f"expected a list of messages, got {type(data).__name__}")
    return _first_vote(data) or DEFAULT


def _first_vote(items: list | tuple) -> str | None:
    for item in items:
        found = vote(item)
        if found is not None:
            return found
    return None
