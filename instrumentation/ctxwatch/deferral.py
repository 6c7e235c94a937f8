"""Record 000's deferral: rewrites that alter the consumed prefix wait, or shrink in whole-pair units.

A deferred proposal is kept with the context it was made against. At the next session boundary
it is rebased onto what was appended since and checked again. Alternatively it is turned into
whole-pair compaction: a unit is a run of messages bound together by tool pairs (a call and all
its results, and everything between them); only units the proposal dropped entirely are removed,
and an elision marker is appended at the frontier (an append, so monotonic) telling the model
what was elided and carrying the proposal's new text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .diff import Change
from .model import Context, Message, TextPart, ToolSchema

ELISION_PREFIX = "[ctxwatch] earlier turns were elided"


@dataclass
class DeferredRewrite:
    id: int
    base: Context
    proposed: tuple[Message, ...]
    kind: str
    tools: list[ToolSchema] | None

    def rebase(self, current: Sequence[Message]) -> tuple[Message, ...]:
        """The proposal plus whatever was appended to its base since it was made."""
        return self.proposed + tuple(current[len(self.base.messages):])

    def _change(self) -> Change:
        return Change.between(self.base, self.proposed, self.kind)

    def dropped_positions(self) -> set[int]:
        """Indexes (in the base, hence in any context extending it) of the messages the proposal drops."""
        return {i for i, _ in self._change().removed}

    def added_text(self) -> str:
        return carried_text(self._change().added_messages)


class DeferralQueue:
    """Deferred proposals of one loop, newest last; bounded (older entries are superseded)."""

    def __init__(self, limit: int = 16) -> None:
        self._items: list[DeferredRewrite] = []
        self._next = 1
        self.limit = limit
        self.dropped_stale = 0

    def __len__(self) -> int:
        return len(self._items)

    def push(self, base: Context, proposed: tuple[Message, ...], kind: str,
             tools: list[ToolSchema] | None) -> int:
        item = DeferredRewrite(self._next, base, proposed, kind, tools)
        self._next += 1
        self._items.append(item)
        del self._items[: max(0, len(self._items) - self.limit)]
        return item.id

    def take_latest(self, current_digests: list[int]) -> DeferredRewrite | None:
        """The newest entry whose base the current context still extends; the queue is emptied."""
        chosen = None
        for item in reversed(self._items):
            base = item.base.digests
            if current_digests[: len(base)] == base:
                chosen = item
                break
        self.dropped_stale += len(self._items) - (1 if chosen else 0)
        self._items.clear()
        return chosen


def pair_units(messages: Sequence[Message]) -> list[range]:
    """Split messages into units no tool pair straddles: a call's message through its last result."""
    call_at: dict[str, int] = {}
    reach = list(range(len(messages)))  # reach[i]: last index that must stay with message i
    for i, m in enumerate(messages):
        for cid in m.call_ids:
            call_at[cid] = i
        for rid in m.result_ids:
            start = call_at.get(rid)
            if start is not None:
                reach[start] = max(reach[start], i)
    units: list[range] = []
    start, end = 0, -1
    for i in range(len(messages)):
        end = max(end, reach[i])
        if i == end:
            units.append(range(start, i + 1))
            start = i + 1
    return units


def whole_pair_compaction(messages: Sequence[Message], dropped: set[int]) -> tuple[list[Message], int, int]:
    """(kept messages, units elided, messages elided): drop only units whose every position is in
    `dropped` (positions, not contents: of two identical "ok" turns, the one the proposal dropped)."""
    kept: list[Message] = []
    units_elided = elided = 0
    for unit in pair_units(messages):
        if all(i in dropped for i in unit):
            units_elided += 1
            elided += len(unit)
        else:
            kept.extend(messages[i] for i in unit)
    return kept, units_elided, elided


def carried_text(added: Sequence[Message]) -> str:
    """The text a rewrite introduced, which an elision marker carries to the frontier."""
    return "\n".join(m.text for m in added if m.text)


def elision_marker(role: str, elided: int, units: int, carried_text: str, number: int) -> Message:
    """The note appended at the frontier. It is numbered, so two markers are never the same message
    (identical messages would make the relative order of what a later rewrite keeps ambiguous)."""
    text = (f"{ELISION_PREFIX} (elision {number}): {elided} messages in {units} whole units were removed "
            "from this conversation.")
    if carried_text:
        text += " What they contained, in summary:\n" + carried_text
    return Message(role, [TextPart(text)])
