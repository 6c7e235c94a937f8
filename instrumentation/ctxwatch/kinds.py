"""The one mutation-kind classifier: which kind replacing one message list by another is.

The guard names an undeclared change with it, the framework integrations name the edits their
framework makes with it (through the guard), and the session readers name the changes they find
between two recorded buffers with it. docs/telemetry.md, "Which change is which kind", is the table
of the rules below, tried in order:

1. New messages after the last message kept from before are appended, unless they replace a removed
   message (the same id, or the same role at the same position) or no non-system message was kept
   (then they replace the old tail); appends never make a change a rewrite. Nothing else new
   and nothing removed: ``append`` when the kept messages are in their old order, else ``rerank``.
2. Only system (or developer) messages removed or added: ``system_patch``.
3. Messages removed and nothing new: ``prune``.
4. Every new message shortens in place a removed one of its role (the same id, or else the same
   position): ``prune`` (an elided or cleared tool output).
5. Fewer new messages than removed ones, or less text: ``compact`` (a summary took their place).
6. Anything else: ``rewrite``.

A classified ``rerank`` names what happened; it does not unlock reordering. Only a caller that
declares ``kind="rerank"`` may reorder what it keeps (record 003, `invariants.order`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .model import SYSTEM_ROLES, Message


@dataclass(frozen=True, slots=True)
class Classified:
    """A change's kind, the positions in `before` of the messages it removed or replaced, and the positions in
    `after` of the new messages it takes as appended (rule 1)."""

    kind: str
    changed: tuple[int, ...]
    appended: tuple[int, ...] = ()


def classify(before: Sequence[Message], after: Sequence[Message]) -> str:
    """The mutation kind of replacing `before` by `after` (``append`` when it only appends)."""
    return classify_with_positions(before, after).kind


def classify_with_positions(before: Sequence[Message], after: Sequence[Message]) -> Classified:
    """The kind of replacing `before` by `after`, with the positions of `before` it removed or replaced."""
    removed = _unmatched(before, Counter(m.digest for m in after))
    added = _unmatched(after, Counter(m.digest for m in before))
    appended = _appended(after, {i for i, _ in added}, removed)
    added = [(i, m) for i, m in added if i not in appended]
    changed, tail = tuple(i for i, _ in removed), tuple(sorted(appended))
    if not removed and not added:
        kept = [m.digest for i, m in enumerate(after) if i not in appended]
        return Classified("append" if kept == [m.digest for m in before] else "rerank", (), tail)
    removed_messages, added_messages = [m for _, m in removed], [m for _, m in added]
    if all(m.role in SYSTEM_ROLES for m in removed_messages + added_messages):
        return Classified("system_patch", changed, tail)
    if not added or _shortened_in_place(removed, added):
        return Classified("prune", changed, tail)
    if len(added) < len(removed) or _size(added_messages) < _size(removed_messages):
        return Classified("compact", changed, tail)
    return Classified("rewrite", changed, tail)


def _size(messages: Sequence[Message]) -> int:
    return sum(m.size for m in messages)


def _unmatched(messages: Sequence[Message], other: Counter[int]) -> list[tuple[int, Message]]:
    """The (position, message) pairs of `messages` not matched one for one by a digest in `other`."""
    left = Counter(other)
    out = []
    for i, m in enumerate(messages):
        if left[m.digest]:
            left[m.digest] -= 1
        else:
            out.append((i, m))
    return out


def _appended(after: Sequence[Message], new: set[int], removed: list[tuple[int, Message]]) -> set[int]:
    """The positions of the new messages after the last kept message of `after` that replace no removed
    message (of the same id, or of the same role at the same position); none when no non-system message
    was kept (then the new tail took the place of the old one)."""
    kept = [i for i, m in enumerate(after) if i not in new]
    if not any(after[i].role not in SYSTEM_ROLES for i in kept):
        return set()
    gone_ids = {m.id for _, m in removed if m.id is not None}
    gone_at = dict(removed)

    def replaces(i: int) -> bool:
        m, old = after[i], gone_at.get(i)
        return (m.id is not None and m.id in gone_ids) or (old is not None and old.role == m.role)
    return {i for i in new if i > kept[-1] and not replaces(i)}


def _shortened_in_place(removed: list[tuple[int, Message]], added: list[tuple[int, Message]]) -> bool:
    """Every added message replaces a removed one of its role, with the same id (or, without ids, at the
    same position), by less text."""
    by_id = {m.id: m for _, m in removed if m.id is not None}
    by_position = dict(removed)
    for position, m in added:
        old = by_id.get(m.id) if m.id is not None else None
        if old is None:
            old = by_position.get(position)
        if old is None or old.role != m.role or m.size >= old.size:
            return False
    return True
