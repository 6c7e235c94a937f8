"""One guard per conversation, for the wrappers that serve several: a factory ``key -> ContextGuard``
makes each conversation's guard, or one `ContextGuard` serves the first conversation and each further
one gets `ContextGuard.sibling(key)` (its settings, loop ``<loop id>/<key>``). A call with no key (None:
no thread id) is the given guard's own conversation, whichever came first (its loop id unchanged).

At most `limit` conversations are kept, least recently used first out, except the given guard's own: the
caller holds that guard and its state, which a conversation made again would be out of step with. A
conversation that comes back after it was let go is made afresh, with a new guard (the factory's, or a
new sibling): that guard numbers its loop's spans as a new run (`ContextGuard`), so the monitor starts
the loop's detector afresh instead of taking its spans for late ones of the guard before. A conversation
that starts again with none of its history (`renew`: a LangGraph run with no checkpointer) is made afresh
the same way, the given guard's own too: each such run is a conversation of its own."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ..guard import ContextGuard

GuardSource = ContextGuard | Callable[[str | None], ContextGuard]
T = TypeVar("T")
_log = logging.getLogger("ctxwatch")


class Conversations(Generic[T]):
    """What a wrapper keeps per conversation (`make` builds it around the conversation's guard).

    `warn`, when given, is logged once (at warning level, with the loop id) the first time a single
    guard is asked for a second conversation; a wrapper whose caller names each conversation on
    purpose passes none."""

    def __init__(self, source: GuardSource, make: Callable[[ContextGuard], T], limit: int, *,
                 warn: str | None = None) -> None:
        if limit < 1:
            raise ValueError(f"max_conversations must be at least 1, got {limit}")
        self._source, self._make, self._limit, self._warn = source, make, limit, warn
        self._items: OrderedDict[str | None, T] = OrderedDict()
        self._lock = threading.Lock()
        self._own: tuple[str | None] | None = None  # the key of the conversation a single given guard serves

    def get(self, key: str | None) -> T:
        with self._lock:
            key = self._key(key)
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = self._make(self._guard_for(key))
                self._let_go(key)
            self._items.move_to_end(key)
            return item

    def renew(self, key: str | None) -> T:
        """Conversation `key` begun anew (the wrapper saw it start again with none of its history: a run with
        no checkpointer), not edited: made again around a new guard, as `_guard_for` makes one, except that the
        given guard's own conversation gets a guard made as the given one (its loop id and settings, a new run)."""
        with self._lock:
            key = self._key(key)
            source, own = self._source, self._own
            if isinstance(source, ContextGuard) and own is not None and key == own[0]:
                guard = source.renewed()
            else:
                guard = self._guard_for(key)
            item = self._items[key] = self._make(guard)
            self._items.move_to_end(key)
            return item

    def _key(self, key: str | None) -> str | None:
        """The conversation a call with `key` belongs to: no key is the given guard's own."""
        if isinstance(self._source, ContextGuard):
            if self._own is None:
                self._own = (key,)
            elif key is None:
                return self._own[0]
        return key

    def _let_go(self, kept: str | None) -> None:
        """Past `limit`, let the least recently used conversations go: never `kept` (the one asked for), nor
        the given guard's own."""
        own = self._own
        spare = [k for k in self._items if k != kept and (own is None or k != own[0])]
        for key in spare[:max(0, len(self._items) - self._limit)]:
            del self._items[key]

    def _guard_for(self, key: str | None) -> ContextGuard:
        source = self._source
        if not isinstance(source, ContextGuard):
            return source(key)
        if self._own is not None and key == self._own[0]:
            return source
        if self._warn is not None:
            _log.warning(self._warn, source.loop_id)
            self._warn = None
        return source.sibling(str(key))
