"""Which turns the caller appended to its context since the guard last saw it, by position.

The guard's context is the caller's list as of the last `observe()` (or the list a `resolve`/`apply`
or `guard.messages` handed back). An agent appends turns to that same list (a tool call and its
result) before it proposes a rewrite; those turns are the items of that list after the ones the
guard knows — by position in the list the caller extended, never by looking their contents up in
the proposal (two identical "OK." answers are two turns, and a rewrite may drop the last message
the guard saw). `CallerLists` remembers the few list objects the caller may be extending, with the
items each held when the guard last saw it, and names the items appended to one of them since.
"""

from __future__ import annotations

from operator import is_
from typing import Any


def _items(context: Any) -> list[Any] | None:
    """The caller's message list in `context` (a list, or a request dict's ``messages``), if mutable."""
    items = context.get("messages") if isinstance(context, dict) else context
    return items if isinstance(items, list) else None


class CallerLists:
    """The caller's lists whose first `known` items are the guard's context: the ones the context was
    set from (kept until it changes) and, newest last, a bounded few handed back since."""

    def __init__(self, limit: int = 4) -> None:
        self._committed: list[tuple[list[Any], tuple[Any, ...], int]] = []
        self._handed: list[tuple[list[Any], tuple[Any, ...], int]] = []
        self.limit = limit

    def reset(self, *contexts: Any) -> None:
        """The guard's context is now exactly each of `contexts` (what it committed, as the caller has it)."""
        self._handed.clear()
        self._committed = [(items, tuple(items), len(items)) for items in map(_items, contexts) if items is not None]

    def add(self, context: Any, known: int) -> None:
        """`context` was handed to the caller: its first `known` items are the guard's context, any
        items after them turns the guard has not observed. Many hand-backs (`guard.messages` read in a
        loop) push out older hand-backs only, never the list the context was set from."""
        items = _items(context)
        if items is None or any(items is held for held, _, _ in (*self._committed, *self._handed)):
            return
        self._handed.append((items, tuple(items), known))
        del self._handed[: max(0, len(self._handed) - self.limit)]

    def appended(self) -> list[Any]:
        """The caller's objects after the guard's context in the newest list that still holds every item
        it held when the guard saw it (the same objects, in place) and holds more after the known ones;
        [] when no list grew."""
        for items, held, known in reversed([*self._committed, *self._handed]):
            if len(items) > known and len(items) >= len(held) and all(map(is_, items, held)):
                return items[known:]
        return []
