"""Formats that record whole buffers: plain JSONL of message snapshots, and the shared differ.

A ``messages_jsonl`` file has one buffer per line: a list of OpenAI Chat, OpenAI Responses,
Anthropic or LangChain message dicts, or an object with a ``messages`` list (an Anthropic request
dict with ``system`` is read whole). The format of the messages is detected once per file (see
`ctxwatch.adapters.Converter`). Each line is one `Snapshot`; when a buffer is not the previous one
plus appended messages, a `Mutation` with source ``snapshot_diff`` comes before it, its kind from
`classify_change` and its buffer before the previous one plus the turns appended before the change
(`buffer_change`). Every buffer in such a file was sent, so no snapshot is marked final.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..adapters import Converter
from ..errors import InvalidContextError
from ..model import Message
from .events import Event, Snapshot, buffer_change

if TYPE_CHECKING:
    from .session import Session


class Timeline:
    """Turns a sequence of recorded buffers into snapshots and the mutations between them."""

    def __init__(self) -> None:
        self.previous: tuple[Message, ...] | None = None
        self.step = 0

    def push(self, messages: tuple[Message, ...], where: str, line: int | None = None) -> Iterator[Event]:
        if self.previous is not None:
            mutation = buffer_change(self.previous, messages, self.step, "snapshot_diff", where, line)
            if mutation is not None:
                yield mutation
        yield Snapshot(self.step, messages, where, line)
        self.step += 1
        self.previous = messages


def buffer_data(value: Any) -> Any:
    """The part of one snapshot line the adapters read: a message list or an Anthropic request."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return value if "system" in value else value["messages"]
    if isinstance(value, list):
        return value
    raise InvalidContextError("expected a list of messages or an object with a 'messages' list")


def events(session: Session) -> Iterator[Event]:
    timeline = Timeline()
    converter = Converter()
    for line, value in session.lines():
        try:
            messages = tuple(converter.to_messages(buffer_data(value)))
        except InvalidContextError as exc:
            session.skip(line, str(exc))
            continue
        for message in messages:
            session.note(message, f"line {line}")
        yield from timeline.push(messages, f"line {line}", line)
