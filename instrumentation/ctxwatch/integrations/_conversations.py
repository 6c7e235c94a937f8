"""One guard per conversation, for the wrappers that serve several: a factory ``key -> ContextGuard``
makes each conversation's guard, or one `ContextGuard` serves the first conversation and each further
one gets `ContextGuard.sibling(key)` (its settings, loop ``<loop id>/<key>``). At most `limit`
conversations are kept, least recently used first out."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from ..guard import ContextGuard

GuardSource = ContextGuard | Callable[[str | None], ContextGuard]
T = TypeVar("T")
_UNSEEN = object()
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
        self._first: object = _UNSEEN  # the conversation a single given guard serves

    def get(self, key: str | None) -> T:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = self._make(self._guard_for(key))
                while len(self._items) > self._limit:
                    self._items.popitem(last=False)
            self._items.move_to_end(key)
            return item

    def _guard_for(self, key: str | None) -> ContextGuard:
        if not isinstance(self._source, ContextGuard):
            return self._source(key)
        if self._first is _UNSEEN:
            self._first = key
        if key == self._first:
            return self._source
        if self._warn is not None:
            _log.warning(self._warn, self._source.loop_id)
            self._warn = None
        return self._source.sibling(str(key))
