"""Record 001: the pinned policy region and the pinned pass cap.

The pass cap counts rewrite passes in a row with no new turn between them (a model turn or a tool
result): a healthy agent that compacts now and then never reaches it however long it runs, a loop
that compacts its own compaction again and again is stopped at the cap.

The policy region is declared when the guard is made (message ids, or a predicate over
(index, message)) and resolved on the first context the guard observes; from then on it is
fixed for the episode. Every pinned message must survive every rewrite byte for byte, in the same
order, at its place (it may shift only by what was removed or added before it); after an accepted
rewrite the pins follow their messages to their new places (`follow`). The region is pinned again
(`repin`: the selector applied to the context in use) when the guard takes on a context whose
pinned messages changed anyway — a change the model already read (`observe` adopts it), a shadow
proposal, a policy edit enforced only as a warning — and at every new episode: what the model reads
now is the policy from then on. A payload edit that removes
the last copy outside the policy of a symbol a pinned message names (the ticket the policy
protects, the path it forbids) is a policy edit in disguise and is refused too.

Re-ranking the payload is allowed while the pinned messages keep their places; the re-rank is
recorded with its order in the provenance log.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..diff import Change
from ..literals import LiteralRegistry
from ..model import Message
from ..redaction import shown
from ..report import Finding
from .references import SymbolIndex, extract_symbols

PolicySelector = Iterable[str] | Callable[[int, Message], bool]


@dataclass(frozen=True)
class PinnedSpan:
    index: int
    digest: int
    message_id: str | None


class PolicyRegion:
    """The immutable set of pinned policy messages of one guard."""

    def __init__(self, selector: PolicySelector | None, literals: LiteralRegistry) -> None:
        self._selector = selector
        self._literals = literals
        self.spans: tuple[PinnedSpan, ...] | None = None
        self.symbols: frozenset[str] = frozenset()
        self._floor: dict[str, int] = {}

    def resolve(self, messages: Sequence[Message]) -> None:
        """Pin the policy messages of the first non-empty context (once; later calls do nothing)."""
        if self.spans is not None or self._selector is None or not messages:
            return
        self._pin(messages, self._chosen(messages, strict=True))

    def repin(self, messages: Sequence[Message]) -> bool:
        """Pin the policy messages of `messages` afresh (ids no longer present are dropped from the
        region); True when the pinned messages changed. Before the first resolution, as `resolve`."""
        if self.spans is None or self._selector is None:
            self.resolve(messages)
            return False
        before = [(s.digest, s.message_id) for s in self.spans]
        self._pin(messages, self._chosen(messages, strict=False))
        return [(s.digest, s.message_id) for s in self.spans] != before

    def follow(self, digests: Sequence[int]) -> bool:
        """Move the pins to where their messages are in the accepted context `digests` (in order);
        False, leaving them as they were, when a pinned message is no longer there (`repin` then)."""
        if not self.spans:
            return True
        moved, start = [], 0
        for span in self.spans:
            try:
                j = digests.index(span.digest, start)
            except ValueError:
                return False
            moved.append(PinnedSpan(j, span.digest, span.message_id))
            start = j + 1
        self.spans = tuple(moved)
        return True

    def _chosen(self, messages: Sequence[Message], *, strict: bool) -> list[int]:
        if callable(self._selector):
            return [i for i, m in enumerate(messages) if self._selector(i, m)]
        ids = set(self._selector)  # type: ignore[arg-type]
        chosen = [i for i, m in enumerate(messages) if m.id in ids]
        missing = ids - {messages[i].id for i in chosen}
        if missing and strict:
            raise ValueError(f"policy ids {sorted(missing)} name no message of the observed context")
        return chosen

    def _pin(self, messages: Sequence[Message], chosen: list[int]) -> None:
        self.spans = tuple(PinnedSpan(i, messages[i].digest, messages[i].id) for i in chosen)
        counts: dict[str, int] = {}
        for i in chosen:
            for s in extract_symbols(messages[i].text, self._literals):
                counts[s] = counts.get(s, 0) + 1
        self.symbols = frozenset(counts)
        self._floor = counts

    def check(self, change: Change, index: SymbolIndex) -> list[Finding]:
        if not self.spans:
            return []
        after = change.after_digests
        findings: list[Finding] = []
        gone, moved, positions = [], [], []
        removed_idx = sorted(i for i, _ in change.removed)
        added_idx = sorted(i for i, _ in change.added)
        for span in self.spans:
            try:
                j = after.index(span.digest)
            except ValueError:
                gone.append(span)
                continue
            positions.append(j)
            kept_before = span.index - _count_below(removed_idx, span.index)
            kept_after = j - _count_below(added_idx, j)
            if kept_before != kept_after:
                moved.append((span, j))
        if gone:
            findings.append(Finding(
                "policy_isolation",
                "the rewrite changes or removes pinned policy messages "
                + ", ".join(_name(s) for s in gone)
                + ". Policy spans are immutable for the episode: edit only the payload. A paraphrase "
                "of a constraint is a policy edit, however faithful it looks to the pass that wrote it.",
                details={"spans": [s.index for s in gone]},
            ))
        if moved or positions != sorted(positions):
            findings.append(Finding(
                "policy_isolation",
                "the rewrite moves pinned policy messages "
                + ", ".join(f"{_name(s)} to position {j}" for s, j in moved)
                + ("" if positions == sorted(positions) else " (their order changed)")
                + ". Re-rank the payload around them; do not move them.",
                details={"spans": [s.index for s, _ in moved]},
            ))
        if not gone and self.symbols:
            dangling = index.dangling(sorted(self.symbols), change.removed_messages, change.added_messages,
                                      floor=self._floor)
            if dangling:
                def message(quoted: bool) -> str:
                    named = "; ".join(f"{shown(s, quoted=quoted)} ({why.text(quoted)})"
                                      for s, why in sorted(dangling.items()))
                    return ("the rewrite removes the last payload copy of what pinned policy names: " + named
                            + ". Without it the policy no longer matches the work it constrains; keep those "
                            "lines verbatim.")
                findings.append(Finding("policy_isolation", message(False), details={"symbols": sorted(dangling)},
                                        values=message(True)))
        return findings


def _count_below(sorted_indexes: list[int], limit: int) -> int:
    return bisect_left(sorted_indexes, limit)


def _name(span: PinnedSpan) -> str:
    """The pinned message by id or position, never by its text (finding messages may be exported)."""
    return f"id {span.message_id!r}" if span.message_id else f"message {span.index}"


def check_pass_cap(passes_in_a_row: int, cap: int | None, size: int,
                   budget: int | None) -> tuple[list[Finding], int | None]:
    """At the cap (rewrite passes in a row with no new turn between them), refuse and report residual
    pressure (characters over budget) instead of editing again."""
    if cap is None or passes_in_a_row < cap:
        return [], None
    pressure = size - budget if budget is not None else None
    over = (f"residual pressure {pressure} characters over the budget of {budget}" if pressure is not None
            else f"the context holds {size} characters (no budget given)")
    return [Finding(
        "pass_cap",
        f"the pass cap is reached: {passes_in_a_row} rewrite passes in a row with no new turn between them "
        f"(cap {cap}); {over}. The rewrite policy is looping on its own output: stop rewriting until the "
        "agent adds a turn, give the context more room (a larger window or budget), or start a new episode "
        "(guard.session_boundary()).",
        details={"cap": cap, "passes_in_a_row": passes_in_a_row, "residual_pressure": pressure},
    )], pressure
