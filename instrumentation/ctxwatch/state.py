"""`ConsumedState`: what a guard knows of the context it last accepted, in one place.

The context and its generation boundary, the message digests, the caller's own objects (in its
shape), the tool pairs, the symbol mentions, the literal counts, the size, the buffer fingerprint,
the consumed rendering, and how many rewrites were applied since the last new turn. `advance` is
the one method that moves it to the context an accepted change produces; `copy` gives an
independent state to evaluate against (the current one plus turns the caller appended without
observing them) without touching the guard's; such a state counts those turns in `unobserved`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from .diff import Change
from .fingerprint import BufferFingerprint
from .formats import copy_shape
from .invariants.pairing import PairIndex, index_pairs
from .invariants.references import SymbolIndex
from .literals import LiteralRegistry
from .model import Context, Message


def is_new_turn(message: Message) -> bool:
    """Work the loop did: a model turn or a tool result (not a note, a summary or a marker)."""
    return message.role in ("assistant", "tool") or bool(message.result_ids)


class ConsumedState:
    __slots__ = ("context", "digests", "raw", "pairs", "symbols", "literal_counts", "size", "fp", "rendered",
                 "rewrites_since_turn", "unobserved")

    def __init__(self, fp: BufferFingerprint) -> None:
        self.context = Context((), 0)
        self.digests: list[int] = []
        self.raw: Any = []
        self.pairs: PairIndex = index_pairs(())
        self.symbols = SymbolIndex()
        self.literal_counts: Counter[str] = Counter()
        self.size = 0
        self.fp = fp
        self.rendered: Any = None
        self.rewrites_since_turn = 0
        self.unobserved = 0  # trailing turns appended without being observed (only on an evaluation's base)

    def copy(self) -> ConsumedState:
        out = ConsumedState.__new__(ConsumedState)
        out.context, out.digests, out.raw = self.context, list(self.digests), copy_shape(self.raw)
        out.pairs, out.symbols = self.pairs, self.symbols.copy()
        out.literal_counts, out.size, out.fp = Counter(self.literal_counts), self.size, self.fp
        out.rendered, out.rewrites_since_turn = self.rendered, self.rewrites_since_turn
        out.unobserved = 0
        return out

    def advance(self, change: Change, raw: Any, *, rewrite: bool, strict: bool, literals: LiteralRegistry | None,
                track_fingerprint: bool, pairs: PairIndex | None = None,
                fp_after: BufferFingerprint | None = None) -> None:
        """Move to `change.after`, whose caller form is `raw`. `literals` None: counts not kept."""
        removed, added = change.removed_messages, change.added_messages
        proposed = change.after
        self.size += sum(m.size for m in added) - sum(m.size for m in removed)
        if literals is not None:
            counts = self.literal_counts
            for m in removed:
                counts.subtract(literals.of(m))
            for m in added:
                counts.update(literals.of(m))
            for m in removed:  # only a removed message's literals can have dropped to no holder
                for lit in literals.of(m):
                    held = counts.get(lit)
                    if held is not None and held <= 0:
                        del counts[lit]
        if track_fingerprint:
            self.fp = fp_after if fp_after is not None else self.fp.updated(removed, added)
        self.symbols.advance(proposed, removed, added)
        self.pairs = pairs if pairs is not None else index_pairs(proposed, strict=strict)
        if rewrite:
            self.rewrites_since_turn += 1
        elif any(is_new_turn(m) for m in _appended(change)):
            self.rewrites_since_turn = 0
        if change.prefix_len < self.context.boundary:
            self.rendered = None  # the rendering of a prefix that no longer exists
        self.context = Context(proposed, min(self.context.boundary, change.prefix_len))
        self.digests = change.after_digests
        self.raw = copy_shape(raw)
        self.unobserved = 0

    def with_boundary(self, boundary: int, rendered: Any = None) -> None:
        """The model has consumed the first `boundary` messages (rendered as `rendered`, when known)."""
        self.context = Context(self.context.messages, boundary)
        self.rendered = rendered


def _appended(change: Change) -> Sequence[Message]:
    return change.after[len(change.before_digests):]
