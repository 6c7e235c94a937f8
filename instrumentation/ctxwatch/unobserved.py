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

from collections.abc import Container, Sequence
from dataclasses import dataclass
from operator import is_
from typing import Any

from .invariants.pairing import index_pairs, strict_for
from .model import Message
from .validity import provider_problems


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
        self.rebuilds = False  # whether the caller's last observe() was of a new list while the guard knew others

    def observed(self, context: Any) -> None:
        """The caller gave `context` to observe(): the guard's context is now exactly it (`reset`);
        `rebuilds` notes whether it is a list built anew while the guard knew others (a loop that builds a
        new list each turn, ``messages = messages + [reply]``) rather than one it knew (extended in place)."""
        items = _items(context)
        lists = [held for held, _, _ in (*self._committed, *self._handed)]
        self.rebuilds = items is not None and bool(lists) and not any(items is held for held in lists)
        self.reset(context)

    def objects(self) -> set[int]:
        """The `id()` of every caller object these lists held as part of the guard's context."""
        return {id(item) for _, held, known in (*self._committed, *self._handed) for item in held[:known]}

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


@dataclass(frozen=True)
class TailReading:
    """How many of a proposal's last messages are turns the caller appended since the guard last saw its
    context, read from the proposal alone; `unsure` says why the guard cannot tell (then `count` is 0)."""

    count: int
    unsure: str | None = None


# the most trailing runs a reading tries as possible unread turns before it gives up (fails closed)
_MAX_CANDIDATES = 32


def read_tail(known: Sequence[Message], known_objects: Container[int], last_object: int | None,
              proposed: Sequence[Message], proposed_objects: Sequence[int | None], *, format: str | None,
              rebuilds: bool) -> TailReading:
    """The unread turns a proposal carries at its end, when no list the caller extended shows them and the
    caller did not name them (`current=`). Each message of the proposal is one the guard observed, one the
    rewrite made, or one the agent appended since. Observed for certain: the caller's very object (given by
    `id()`: `known_objects` those of the guard's context, `last_object` that of its last message,
    `proposed_objects` the proposal's, one per message, None for none), or a message holding a tool call
    the guard saw or the result of a call it saw answered (tool ids do not repeat). Appended for certain:
    a message holding a call the guard never saw, or a result it never saw. The reading:

    - the last observed message is there (its object, else its digest as the last of the guard's digests
      in the proposal) and what follows it could have been appended after the guard's context: that is
      the unread tail (none when nothing follows);
    - else the proposal holds messages appended for certain: from the first of them on is the tail (the
      model's reply and what followed it), if it could have been appended; if it could not, none (the
      proposal is the rewrite's and is checked as such: an orphan is refused). OpenAI Responses, whose
      reply is several items, only when no other model item stands right before it;
    - else none, when nothing after the last observed message it kept could have been appended, or when
      the caller is not known to rebuild its list (`rebuilds` False: its last observe() was of a list the
      guard knew, or it observed once so far; a list that did not grow had nothing appended).

    `unsure` otherwise, for a caller known to rebuild its list: a message appended for certain before one
    observed for certain (an unread turn moved), or a rewrite that dropped or changed the last observed
    message followed by messages that may be its own or new turns (0 for any other caller: nothing grew).
    "Could have been appended" is `_Continuation`: the provider accepts it after the guard's context, with
    no orphaned result and no repeated tool id, so no orphan is ever taken as a new turn."""
    if not known or not proposed:
        return TailReading(0)
    digests = [m.digest for m in proposed]
    known_digests = [m.digest for m in known]
    if digests[: len(known_digests)] == known_digests:
        return TailReading(0)  # it starts with the guard's context: growth, evaluated as it is
    calls = {c for m in known for c in m.call_ids}
    answered = {r for m in known for r in m.result_ids}
    observed = [obj in known_objects or any(c in calls for c in m.call_ids) or any(r in answered for r in m.result_ids)
                for m, obj in zip(proposed, proposed_objects, strict=True)]
    unseen = [i for i, m in enumerate(proposed) if any(c not in calls for c in m.call_ids)
              or any(r not in answered for r in m.result_ids)]
    kept = max((i for i, seen in enumerate(observed) if seen), default=-1)
    if unseen and unseen[0] <= kept:
        return TailReading(0, f"message {unseen[0]} holds a tool call or result the guard has not seen, before "
                              f"message {kept}, which it has" if rebuilds else None)
    grows = _Continuation(known, format)
    last = _last_observed(known, last_object, proposed, proposed_objects, kept)
    if last is not None and unseen and unseen[0] <= last:
        last = None  # a digest match only: the turns after the first unseen one are the tail (below)
    if last is not None and grows(proposed[last + 1:]):
        return TailReading(len(proposed) - last - 1)
    if unseen:
        start = unseen[0]
        if not grows(proposed[start:]):
            return TailReading(0)  # no reading keeps them as turns: the rewrite's, checked as such (orphans refused)
        if format == "openai_responses" and start - 1 > max(kept, -1 if last is None else last) \
                and proposed[start - 1].role == "assistant":
            return TailReading(0, f"message {start - 1} may be part of the model's reply at message {start}")
        return TailReading(len(proposed) - start)
    after = proposed[(kept if last is None else last) + 1:]
    if not after or not rebuilds or not grows.any_suffix(after):
        return TailReading(0)
    return TailReading(0, f"messages {len(proposed) - len(after)}..{len(proposed) - 1} may be the rewrite's own or "
                          "turns appended since, and the last observed message is not right before them")


def _last_observed(known: Sequence[Message], last_object: int | None, proposed: Sequence[Message],
                   proposed_objects: Sequence[int | None], kept: int) -> int | None:
    """Where the proposal holds the last message the guard observed, at or after position `kept`: that very
    object, else the last message with a digest of the guard's context when it is the last one's; None."""
    if last_object is not None and last_object in proposed_objects[max(kept, 0):]:
        return len(proposed_objects) - 1 - proposed_objects[::-1].index(last_object)
    last_known, seen = known[-1], {m.digest for m in known}
    at = next((i for i in range(len(proposed) - 1, -1, -1) if proposed[i].digest in seen), None)
    if at is None or at < kept or proposed[at].digest != last_known.digest:
        return None
    return at


class _Continuation:
    """Whether messages could have been appended to `known` as they are: the provider accepts them after
    it (`validity.provider_problems`) and they hold no result without its call and no repeated tool id."""

    def __init__(self, known: Sequence[Message], format: str | None) -> None:
        self.known, self.format = tuple(known), format
        self.strict = strict_for(format)
        self.problems = len(provider_problems(self.known, format))
        pairs = index_pairs(self.known, strict=self.strict)
        self.flaws = (len(pairs.orphan_results), len(pairs.duplicate_calls), len(pairs.duplicate_results))

    def __call__(self, tail: Sequence[Message]) -> bool:
        messages = (*self.known, *tail)
        if len(provider_problems(messages, self.format)) > self.problems:
            return False
        pairs = index_pairs(messages, strict=self.strict)
        return (len(pairs.orphan_results), len(pairs.duplicate_calls), len(pairs.duplicate_results)) == self.flaws

    def any_suffix(self, run: Sequence[Message]) -> bool:
        """Whether some trailing part of `run` could be such turns (True, to be safe, for a run too long to try)."""
        if len(run) > _MAX_CANDIDATES:
            return True
        return any(self(run[start:]) for start in range(len(run)))
