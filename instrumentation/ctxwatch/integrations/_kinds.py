"""Which mutation kind a framework's edit of the message list is, from what it removes and adds.

Frameworks do not say what their edits are, so the integrations name them from the messages:
new messages after the last message the edit kept are plain appends and do not count; an edit
that only removes messages, or replaces messages in place by no larger ones (a tool
result cleared to a placeholder), is a ``prune``; one that only changes system messages is a
``system_patch``; one that replaces messages by fewer messages or less text (a summary) is a
``compact``; anything
else, including a pure reordering, is a ``rewrite`` (a re-rank must be declared, so the guard's
order check still applies to a framework that reorders).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from ..model import Message

_SYSTEM = frozenset({"system", "developer"})


def classify(before: Sequence[Message], after: Sequence[Message]) -> str:
    """The mutation kind of replacing `before` by `after`."""
    after_count = Counter(m.digest for m in after)
    before_count = Counter(m.digest for m in before)
    removed = _minus(before, after_count)
    added = _minus(after, before_count)
    added = added[: len(added) - _appended(after, added)]
    if not removed and not added:
        return "rewrite"
    if all(m.role in _SYSTEM for m in removed + added):
        return "system_patch"
    if not added or _cleared_in_place(removed, added):
        return "prune"
    if len(added) < len(removed) or sum(m.size for m in added) < sum(m.size for m in removed):
        return "compact"
    return "rewrite"


def _minus(messages: Sequence[Message], other: Counter[int]) -> list[Message]:
    """The messages of `messages` not matched one for one by a digest in `other`."""
    left = Counter(other)
    out = []
    for m in messages:
        if left[m.digest]:
            left[m.digest] -= 1
        else:
            out.append(m)
    return out


def _appended(after: Sequence[Message], added: list[Message]) -> int:
    """How many of `added` come after the last kept non-system message of `after` (0 if none was kept)."""
    new = {id(m) for m in added}
    kept = [i for i, m in enumerate(after) if id(m) not in new and m.role not in _SYSTEM]
    if not kept:
        return 0
    return sum(1 for m in after[kept[-1] + 1:] if id(m) in new)


def _cleared_in_place(removed: list[Message], added: list[Message]) -> bool:
    """Every added message replaces a removed one with the same id and no more text."""
    by_id = {m.id: m for m in removed if m.id is not None}
    return all(m.id in by_id and m.size <= by_id[m.id].size for m in added)
