"""Converting message lists with an identity cache, for a caller that resends the same objects.

An agent resends its whole context every turn with a few messages changed. `Converter` keeps,
for each input object it converted, the resulting `Message` and a shallow snapshot of the
object and of every dict and list inside it (their items, compared with ``==``, which is an
identity check for the common case of untouched values). A later call with the same object
returns the same `Message` when every snapshot still matches, without reading the object again;
an object mutated in place anywhere inside fails its snapshot and is read again.

Memory is bounded: entries that none of the last `generations` calls (3 by default) used are
dropped once they outnumber the entries in use (so alternating between a context, a proposed
rewrite of it and the next context stays warm), and the cache never holds more than
`max_entries` entries.

When no format is named, each newly seen message votes (`detect.vote`); the first decisive vote
fixes the format, and until then messages are read as ``openai_chat`` (plain role/content
messages read the same in every format). A decisive vote for another format than the provisional
one drops the cache and reads the list again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import InvalidContextError
from ..model import Message
from . import anthropic, langchain, openai_chat, openai_responses
from ._reader import DEFAULT_LIMITS, Limits
from .detect import DEFAULT, FORMATS, detect_format, vote
from .sdk_objects import plain_message

ReadFn = Callable[[Any, int, Limits], Message]
READERS: dict[str, ReadFn] = {
    "openai_chat": openai_chat.read,
    "openai_responses": openai_responses.read,
    "anthropic": anthropic.read,
    "langchain": langchain.read,
}
_MAX_SNAPSHOT_CONTAINERS = 10_000  # an object with more nested containers is converted, not cached


def read_ctxwatch(item: Any, index: int, limits: Limits = DEFAULT_LIMITS) -> Message:
    if not isinstance(item, Message):
        raise InvalidContextError(f"expected a ctxwatch Message, got {type(item).__name__}", index=index)
    return item


def check_format(format: str | None) -> None:
    if format is not None and format not in FORMATS:
        raise InvalidContextError(f"unknown format {format!r} (expected one of {', '.join(FORMATS)})")


def items_of(data: Any) -> list | tuple:
    if not isinstance(data, (list, tuple)):
        raise InvalidContextError(f"expected a list of messages, got {type(data).__name__}")
    return data


def to_messages(data: Any, format: str | None = None, *, limits: Limits = DEFAULT_LIMITS) -> list[Message]:
    """Convert a message list (or an Anthropic request dict) into Messages; the format is detected if None."""
    check_format(format)
    fmt = format or detect_format(data)
    read = READERS.get(fmt, read_ctxwatch)
    if fmt == "anthropic" and anthropic.is_request(data):
        return anthropic.read_request(data, limits, lambda item, i: read(plain_message(item), i, limits))
    return [read(plain_message(item), i, limits) for i, item in enumerate(items_of(data))]


class _Entry:
    """A converted object, its Message, and shallow copies of the object and of every container in it."""

    __slots__ = ("obj", "fields", "live", "frozen", "message", "seen")

    def __init__(self, obj: Any, fields: dict, containers: list[Any], message: Message) -> None:
        self.obj = obj  # held, so its id() cannot be reused while the entry lives
        self.fields = fields  # the object's dict (itself, or its __dict__)
        self.live = (fields, *containers)
        self.frozen = tuple(dict(c) if isinstance(c, dict) else list(c) for c in self.live)
        self.message = message
        self.seen = 0  # the last call that used it

    def valid(self) -> bool:
        """Whether the object still holds what it held when converted: one C-level comparison of every
        container with its copy (values compared with ==, identity first)."""
        return self.live == self.frozen and (self.fields is self.obj or vars(self.obj) is self.fields)


def _entry(obj: Any, message: Message) -> _Entry | None:
    """The cache entry for `obj`, or None when it holds too many containers to be worth caching."""
    fields = obj if isinstance(obj, dict) else vars(obj)
    containers: list[Any] = []
    stack = [v for v in fields.values() if isinstance(v, (dict, list))]
    while stack:
        c = stack.pop()
        containers.append(c)
        if len(containers) > _MAX_SNAPSHOT_CONTAINERS:
            return None
        stack.extend(v for v in (c.values() if isinstance(c, dict) else c) if isinstance(v, (dict, list)))
    return _Entry(obj, fields, containers, message)


class Converter:
    """`to_messages` with an identity cache; see the module docstring. One per message stream."""

    def __init__(self, format: str | None = None, *, limits: Limits = DEFAULT_LIMITS,
                 max_entries: int = 100_000, generations: int = 3) -> None:
        check_format(format)
        self.format: str = format or DEFAULT
        self.decided = format is not None
        self.limits = limits
        self.max_entries = max_entries
        self.generations = max(generations, 1)
        self._cache: dict[int, _Entry] = {}
        self._call = 0
        self._sizes: deque[int] = deque(maxlen=self.generations)  # messages read by the last calls
        self.hits = 0
        self.misses = 0

    def to_messages(self, data: Any) -> list[Message]:
        if isinstance(data, dict):
            if not self.decided:
                self._decide(detect_format(data))
            if self.format == "anthropic" and anthropic.is_request(data):
                return self._convert_all(data, lambda d: anthropic.read_request(d, self.limits, self._one))
        items = items_of(data)
        return self._convert_all(items, self._read_all)

    @property
    def cached(self) -> int:
        """Entries held now."""
        return len(self._cache)

    def clear(self) -> None:
        self._cache = {}

    # --- internals ---------------------------------------------------------------------------
    def _convert_all(self, items: Any, run: Callable[[Any], list[Message]]) -> list[Message]:
        while True:
            self._call += 1
            fmt = self.format
            result = run(items)
            if self.format == fmt:  # no vote changed the format mid-way
                self._sizes.append(len(result))
                self._evict()
                return result

    def _evict(self) -> None:
        """Drop entries no call of the last `generations` used, once they outnumber those in use."""
        if len(self._cache) > 2 * sum(self._sizes) + 64:
            oldest = self._call - self.generations + 1
            self._cache = {k: e for k, e in self._cache.items() if e.seen >= oldest}

    def _one(self, item: Any, index: int) -> Message:
        return self._read_all((item,), index)[0]

    def _read_all(self, items: Any, start: int = 0) -> list[Message]:
        """The hot loop: one dict lookup and one shallow comparison per unchanged message."""
        cache, now = self._cache, self._call
        out: list[Message] = []
        hits = 0
        for index, item in enumerate(items, start):
            entry = cache.get(id(item))
            if entry is not None and entry.obj is item and entry.valid():
                hits += 1
                entry.seen = now
                out.append(entry.message)
            else:
                out.append(self._miss(item, index))
        self.hits += hits
        return out

    def _miss(self, item: Any, index: int) -> Message:
        if not self.decided:
            found = vote(item)
            if found is not None:
                self._decide(found)
        self.misses += 1
        message = READERS.get(self.format, read_ctxwatch)(plain_message(item), index, self.limits)
        if self.format != "ctxwatch" and len(self._cache) < self.max_entries:
            entry = _entry(item, message)
            if entry is not None:
                entry.seen = self._call
                self._cache[id(item)] = entry
        return message

    def _decide(self, found: str) -> None:
        self.decided = True
        if found != self.format:
            self.format = found
            self.clear()
