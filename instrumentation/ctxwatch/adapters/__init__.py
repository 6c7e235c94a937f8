"""Format adapters: provider message lists <-> ctxwatch `Message`s, and tool definitions -> `ToolSchema`s.

Formats: ``openai_chat`` (Chat Completions messages), ``openai_responses`` (Responses input
items), ``anthropic`` (Messages API messages, or a request dict with ``system``), ``langchain``
(langchain_core message objects or their ``{"type", "data"}`` dicts; langchain_core is imported
only when a LangChain object must be built) and ``ctxwatch`` (a list of `Message`s as they are).

- `detect_format(data)` names the format of a message list.
- `to_messages(data, format=None)` converts a list (the format detected when None).
- `from_messages(messages, format)` gives them back in the provider's own shape; for every format
  ``from_messages(to_messages(x, f), f) == x``. Anthropic gives a request dict when the messages
  start with a system message or came from one.
- `Converter(format=None).to_messages(data)` does the same with an identity cache, for the agent
  loop that resends the same 500 dicts with five of them changed.
- `to_tool_schemas(tools, format=None)` reads tool definition lists.

Bad input raises `ctxwatch.errors.InvalidContextError` naming the message index and the field;
the caller's objects are never modified. `Limits` bounds nesting depth and message size.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidContextError
from ..model import Message
from . import anthropic, langchain, openai_chat, openai_responses
from ._reader import DEFAULT_LIMITS, Limits
from .converter import Converter, check_format, to_messages
from .detect import FORMATS, detect_format
from .tools import to_tool_schemas

WRITERS = {
    "openai_chat": openai_chat.write,
    "openai_responses": openai_responses.write,
    "anthropic": anthropic.write,
    "langchain": langchain.write,
}


def from_messages(messages: Sequence[Message], format: str) -> list | dict:
    """`messages` in `format`'s own shape (a list; for Anthropic a request dict when there is a system)."""
    check_format(format)
    for i, m in enumerate(messages):
        if not isinstance(m, Message):
            raise InvalidContextError(f"expected a ctxwatch Message, got {type(m).__name__}", index=i)
    if format == "ctxwatch":
        return list(messages)
    return WRITERS[format](messages)


__all__ = [
    "DEFAULT_LIMITS", "FORMATS", "Converter", "Limits", "detect_format", "from_messages", "to_messages",
    "to_tool_schemas",
]
