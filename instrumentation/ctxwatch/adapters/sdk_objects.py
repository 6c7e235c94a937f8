"""Provider SDK objects in a message list, read as the plain JSON they stand for.

The OpenAI and Anthropic Python SDKs return pydantic models (`ChatCompletionMessage`, `TextBlock`,
`ToolUseBlock`, ...) and accept them back in the next request, so their documented loops append them
to the history as they come: ``messages.append(completion.choices[0].message)``, ``{"role":
"assistant", "content": response.content}``. Such a model, as a message or as a block of a message's
content list, is read as its ``model_dump(exclude_none=True)``: the fields the API returned, without
the ones it left empty. This is the one rule for them, used by every adapter (through the converter
and format detection) and by the Anthropic integration. The caller's objects are what the guard
hands back wherever a message is unchanged. LangChain messages are pydantic models too; they have
an adapter of their own and are left as they are.
"""

from __future__ import annotations

from typing import Any

from .langchain import is_langchain_object


def is_sdk_model(value: object) -> bool:
    """A pydantic model of a provider SDK (anything with ``model_dump`` that LangChain does not own)."""
    return callable(getattr(type(value), "model_dump", None)) and not is_langchain_object(value)


def dump(value: Any) -> Any:
    """An SDK model as its dict; anything else, or a model that cannot dump itself, as it is (the
    adapter then names it: ``expected an object, got ...``)."""
    if not is_sdk_model(value):
        return value
    try:
        return value.model_dump(exclude_none=True)
    except (TypeError, ValueError, AttributeError):  # pydantic's serialization errors are ValueErrors
        return value


def plain_message(item: Any) -> Any:
    """`item` with the SDK models in it (the message itself, the blocks of its content list) dumped;
    `item` itself when it holds none."""
    item = dump(item)
    if isinstance(item, dict):
        content = item.get("content")
        if isinstance(content, (list, tuple)) and any(is_sdk_model(block) for block in content):
            return {**item, "content": [dump(block) for block in content]}
    return item
