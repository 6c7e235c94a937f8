"""The bridge between the caller's message format and the context model, for one guard.

The guard accepts any supported format (or `Message` objects) and must hand back what the agent
should use in the same format: messages it did not change are returned as the caller's own
objects, new ones (an elision marker, pinned references) are converted. The format is detected
from the first input unless named; conversion reuses the adapters' identity cache, so an
unchanged message is not converted twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import InvalidContextError
from .model import Message, ToolSchema

if TYPE_CHECKING:
    from .adapters import Converter


class FormatBridge:
    def __init__(self, format: str | None = None) -> None:
        self.format = format
        self._converter: Converter | None = None

    def to_model(self, data: Any) -> tuple[Message, ...]:
        if isinstance(data, (list, tuple)) and not data:
            return ()  # says nothing about the format
        if isinstance(data, (list, tuple)) and set(map(type, data)) == {Message}:
            if self.format is None:
                self.format = "ctxwatch"
            return tuple(data)
        if isinstance(data, (str, bytes)) or not isinstance(data, (Sequence, dict)):
            raise InvalidContextError(f"expected a list of messages, got {type(data).__name__}")
        if self._converter is None:
            from .adapters import Converter
            self._converter = Converter(self.format)
        messages = self._converter.to_messages(data)
        self.format = self._converter.format  # may firm up once a format-specific message arrives
        return tuple(messages)

    def tools(self, tools: Iterable[Any]) -> list[ToolSchema]:
        if isinstance(tools, list) and all(isinstance(t, ToolSchema) for t in tools):
            return tools
        from .adapters import to_tool_schemas
        fmt = self.format if self.format not in (None, "ctxwatch", "langchain") else None
        return to_tool_schemas(tools, fmt)

    def to_caller(self, messages: Sequence[Message], reference: Any) -> Any:
        """`messages` in the caller's format, reusing the caller's objects from `reference` where unchanged."""
        if self.format in (None, "ctxwatch"):
            return list(messages)
        from .adapters import from_messages
        if not isinstance(reference, list):  # a request shape (Anthropic's {"system", "messages"})
            return from_messages(list(messages), self.format)
        reference_model = self.to_model(reference)
        reuse = {m.digest: raw for m, raw in zip(reference_model, reference, strict=True)}
        out: list[Any] = []
        for m in messages:
            raw = reuse.get(m.digest)
            if raw is None:
                converted = from_messages([m], self.format)
                if not isinstance(converted, list):  # e.g. an Anthropic system prompt: a request shape
                    return from_messages(list(messages), self.format)
                raw = converted[0]
            out.append(raw)
        return out


    def checked(self, messages: Sequence[Message], raw: Any) -> Any:
        """`raw` (the caller's objects for `messages`), in its shape, as long as it still holds exactly
        the `messages` the guard checked. An object the caller edited in place since is replaced by the
        guard's own rendering of the checked message: the guard never hands back what it did not check."""
        try:
            now = self.to_model(raw)
        except (InvalidContextError, ValueError, TypeError):
            now = None
        if now is not None and [m.digest for m in now] == [m.digest for m in messages]:
            return copy_shape(raw)
        try:
            return self.to_caller(messages, raw)
        except (InvalidContextError, ValueError, TypeError):
            return self.to_caller(messages, [])


def extended(raw: Any, items: Sequence[Any]) -> Any:
    """The caller's context `raw` (a list or a request dict) with `items` appended to its messages."""
    if isinstance(raw, dict):
        return {**raw, "messages": [*raw.get("messages", ()), *items]}
    return [*raw, *items]


def tail_items(raw: Any, count: int) -> list[Any]:
    """The caller's objects of the last `count` messages of `raw` (a list or a request dict)."""
    items = raw.get("messages", ()) if isinstance(raw, dict) else raw
    return list(items[len(items) - count:]) if count else []


def copy_shape(data: Any) -> Any:
    """A shallow copy of a caller's context in its own shape: a list, or a request dict whose
    message list is copied (so the guard's copy never shares a list the caller may mutate)."""
    if isinstance(data, dict):
        out = dict(data)
        if isinstance(out.get("messages"), list):
            out["messages"] = list(out["messages"])
        return out
    return list(data)
