"""The difference between the current context and a proposed one, computed once per check.

Every invariant reads the same `Change`: the common prefix and suffix (by message digest), the
messages the proposal removes and adds (as multisets, so a duplicated message is counted
right), and whether the messages both sides keep are still in the same relative order. Only the
region between the common prefix and suffix is compared element by element, so an append or
a local edit costs little more than one pass over the digests.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from .model import Context, Message


def common_prefix(a: Sequence, b: Sequence, guess: int | None = None) -> int:
    """How many leading items `a` and `b` (two lists or two tuples) share; equal slices compare in C.
    `guess`, when the caller has one (where a reader says the change starts), is checked first: one
    comparison of the prefix instead of a search through the whole."""
    n = min(len(a), len(b))
    if guess is not None and 0 <= guess < n and a[:guess] == b[:guess] and a[guess] != b[guess]:
        return guess
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] holds; a[:hi] == b[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def common_suffix(a: Sequence, b: Sequence, limit: int) -> int:
    """How many trailing items `a` and `b` share, at most `limit`; the slices compared grow from the end
    (1, 2, 4... items), so the cost follows the answer, not the lengths."""
    la, lb = len(a), len(b)
    lo, span = 0, 1  # a[la - lo:] == b[lb - lo:] holds
    while lo < limit:
        hi = min(lo + span, limit)
        if a[la - hi:la - lo] != b[lb - hi:lb - lo]:
            while hi - lo > 1:  # a[la - hi:] == b[lb - hi:] does not hold
                mid = (lo + hi) // 2
                if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        lo, span = hi, 2 * span
    return lo


@dataclass
class Change:
    """A proposed mutation of `before` into `after`. `declared` is False when the caller named no kind
    and the guard named it (`kinds.classify`). `shared`, when the caller knows it, is how many leading
    messages both sides have in common (a caller following the buffer has found it already)."""

    before: Context
    after: tuple[Message, ...]
    kind: str
    before_digests: list[int] = field(repr=False)
    after_digests: list[int] = field(repr=False)
    declared: bool = True
    shared: int | None = field(default=None, repr=False)

    @classmethod
    def between(cls, before: Context, after: tuple[Message, ...], kind: str,
                before_digests: list[int] | None = None) -> Change:
        digests = before.digests if before_digests is None else before_digests
        return cls(before, after, kind, digests, [m._digest or m.digest for m in after])

    # --- shape -----------------------------------------------------------------------------
    @cached_property
    def prefix_len(self) -> int:
        """Length of the longest common leading run of identical messages."""
        if self.shared is not None:
            return self.shared
        return common_prefix(self.before_digests, self.after_digests)

    @cached_property
    def suffix_len(self) -> int:
        """Length of the longest common trailing run that does not overlap the common prefix."""
        limit = min(len(self.before_digests), len(self.after_digests)) - self.prefix_len
        return common_suffix(self.before_digests, self.after_digests, limit)

    @property
    def is_append_only(self) -> bool:
        return self.prefix_len == len(self.before_digests)

    @property
    def touches_consumed_prefix(self) -> bool:
        """True when the proposal differs from what the model consumed (record 000)."""
        return self.prefix_len < self.before.boundary

    @cached_property
    def _middle(self) -> tuple[list[int], list[int]]:
        p, s = self.prefix_len, self.suffix_len
        return (self.before_digests[p: len(self.before_digests) - s],
                self.after_digests[p: len(self.after_digests) - s])

    @cached_property
    def _middle_sets(self) -> tuple[set[int], set[int]]:
        before_mid, after_mid = self._middle
        return set(before_mid), set(after_mid)

    @cached_property
    def _unique(self) -> bool:
        """Whether no digest repeats within either side's middle."""
        (before_mid, after_mid), (before_s, after_s) = self._middle, self._middle_sets
        return len(before_s) == len(before_mid) and len(after_s) == len(after_mid)

    @cached_property
    def _counts(self) -> tuple[Counter, Counter]:
        before_mid, after_mid = self._middle
        if self._unique:  # no duplicates: sets suffice
            before_s, after_s = self._middle_sets
            return Counter(before_s - after_s), Counter(after_s - before_s)
        before_c, after_c = Counter(before_mid), Counter(after_mid)
        return before_c - after_c, after_c - before_c

    # --- removed / added -------------------------------------------------------------------
    @cached_property
    def removed(self) -> list[tuple[int, Message]]:
        """(index in before, message) for each message the proposal drops or rewrites."""
        return self._pick(self.before.messages, self.before_digests, self._counts[0])

    @cached_property
    def added(self) -> list[tuple[int, Message]]:
        """(index in after, message) for each message the proposal introduces."""
        return self._pick(self.after, self.after_digests, self._counts[1])

    def _pick(self, messages, digests, wanted: Counter) -> list[tuple[int, Message]]:
        if not wanted:
            return []
        end = len(digests) - self.suffix_len
        if self._unique:  # every digest once on each side: a membership test suffices
            return [(i, messages[i]) for i in range(self.prefix_len, end) if digests[i] in wanted]
        left = Counter(wanted)
        out = []
        for i in range(self.prefix_len, end):
            d = digests[i]
            if left.get(d, 0) > 0:
                left[d] -= 1
                out.append((i, messages[i]))
        return out

    @property
    def removed_messages(self) -> list[Message]:
        return [m for _, m in self.removed]

    @property
    def added_messages(self) -> list[Message]:
        return [m for _, m in self.added]

    # --- order -----------------------------------------------------------------------------
    @cached_property
    def kept_order_preserved(self) -> bool:
        """Whether the messages both sides keep appear in the same relative order."""
        before_mid, after_mid = self._middle
        removed_c, added_c = self._counts
        if self._unique:
            kept_before = [d for d in before_mid if d not in removed_c]
            kept_after = [d for d in after_mid if d not in added_c]
        else:
            kept_before, kept_after = _without(before_mid, removed_c), _without(after_mid, added_c)
        if kept_before == kept_after:
            return True
        # duplicated messages can make the quick comparison pick the wrong copies: decide exactly
        return _lcs_length(before_mid, after_mid) == len(before_mid) - sum(removed_c.values())


def _lcs_length(a: list[int], b: list[int]) -> int:
    """Length of the longest common subsequence, as the longest increasing run of match positions."""
    positions: dict[int, list[int]] = {}
    for i, x in enumerate(a):
        positions.setdefault(x, []).append(i)
    tails: list[int] = []
    for y in b:
        for v in reversed(positions.get(y, ())):
            k = bisect_left(tails, v)
            if k == len(tails):
                tails.append(v)
            else:
                tails[k] = v
    return len(tails)


def _without(digests: list[int], drop: Counter) -> list[int]:
    if not drop:
        return digests
    left = Counter(drop)
    out = []
    for d in digests:
        if left.get(d, 0) > 0:
            left[d] -= 1
        else:
            out.append(d)
    return out
