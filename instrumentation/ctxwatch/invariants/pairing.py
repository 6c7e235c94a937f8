"""Record 000, pairing integrity: every tool_use has its tool_result and every result its call.

Providers require a call's result to follow it directly: OpenAI wants the `tool` messages right
after the assistant message with `tool_calls`, Anthropic the `tool_result` blocks in the very next
user message. So a result pairs with its call only when nothing but tool traffic (other calls,
other results) stands between them: a summary, a re-ranked turn or an image placed in between
orphans both, and so does a user turn with text before its results, or a new call after some
results while others are still missing. The Responses API is laxer (recorded Codex sessions carry
developer messages between a `function_call` and its output), so with ``strict=False`` only the
model speaking again (not its reasoning items) cuts a call off. A call with nothing but tool
traffic after it is *pending* (its result has not arrived yet), not orphaned. Consecutive
call-only messages count as one turn (the Responses API sends each parallel `function_call` as its
own item). Ids are compared exactly; a duplicated call or result id is its own finding, since
providers reject it just as they reject an orphan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..diff import Change
from ..model import Message, TextPart, ToolCall, ToolResult
from ..report import Finding

# What the providers answer when a request carries an unpaired tool id, so users recognise it.
PROVIDER_ERRORS = (
    "Anthropic answers such a request with 400 invalid_request_error (\"tool_use ids were found "
    "without tool_result blocks immediately after\" / \"unexpected tool_use_id found in tool_result "
    "blocks\"); OpenAI with 400 (\"An assistant message with 'tool_calls' must be followed by tool "
    "messages responding to each 'tool_call_id'\" / \"messages with role 'tool' must be a response to "
    "a preceding message with 'tool_calls'\")"
)


@dataclass
class PairIndex:
    """Where every tool call and tool result of a message list sits."""

    calls: dict[str, int] = field(default_factory=dict)      # call id -> message index
    results: dict[str, int] = field(default_factory=dict)    # call id -> message index of its result
    call_names: dict[str, str] = field(default_factory=dict)  # call id -> tool name
    duplicate_calls: list[str] = field(default_factory=list)
    duplicate_results: list[str] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)
    orphan_calls: list[str] = field(default_factory=list)     # tool_use_without_result
    orphan_results: list[str] = field(default_factory=list)   # tool_result_without_use
    separated: dict[str, int] = field(default_factory=dict)   # call id -> index of the message that cut it off
    strict: bool = True                                       # how it was scanned (`index_pairs`)

    @property
    def pairs(self) -> int:
        return sum(1 for cid in self.calls if cid in self.results)


# message formats, and session formats that record them, whose results need not follow their calls directly
LAX_FORMATS = frozenset({"openai_responses", "codex"})


def strict_for(format: str | None) -> bool:
    """Whether pairing in `format` (a message or session format) requires results right after calls."""
    return format not in LAX_FORMATS


def index_pairs(messages: Sequence[Message], *, strict: bool = True) -> PairIndex:
    """Index the calls and results of `messages` and classify each as paired, pending or orphaned.
    `strict`: a result must follow its call with only tool traffic between (see the module docstring)."""
    return PairScanner(strict=strict).extend(messages).pairs()


def index_pairs_after(change: Change, before: PairIndex, *, strict: bool = True) -> PairIndex:
    """``index_pairs(change.after, strict=strict)``, given `before`, the index of ``change.before``.
    A rewrite that replaces messages without tool traffic in place (each at the index of the one it
    replaces, every other message where it was) leaves the index as it was: the scan meets the same
    calls and results at the same indices, and each replaced message cuts off a tool turn exactly
    when the one before it did (`_cuts`). `before` itself is the answer then; any other change is
    scanned afresh."""
    if before.strict == strict and _replaced_in_place(change, strict):
        return before
    return index_pairs(change.after, strict=strict)


def _replaced_in_place(change: Change, strict: bool) -> bool:
    old, new = change.before_digests, change.after_digests
    at = [i for i, _ in change.removed]
    if len(old) != len(new) or at != [i for i, _ in change.added]:
        return False
    start = 0
    for i in at:  # every other message where it was: the runs between the replaced ones are equal
        if old[start:i] != new[start:i]:
            return False
        start = i + 1
    if old[start:] != new[start:]:
        return False
    before, after = change.before.messages, change.after
    return all(not (before[i].call_ids or before[i].result_ids or after[i].call_ids or after[i].result_ids)
               and _cuts(before[i], strict) == _cuts(after[i], strict) for i in at)


def _cuts(m: Message, strict: bool) -> bool:
    """Whether `m` ends a tool turn in progress by what it carries besides tool traffic."""
    return m.plain and (strict or _model_speaks(m))


@dataclass(slots=True)
class _Undo:
    """What pushing one message changed, so `PairScanner.truncate` can take it back."""

    waiting: dict[str, int]
    answered: bool
    lengths: tuple[int, int, int, int]  # orphan_calls, orphan_results, duplicate_calls, duplicate_results
    calls: list[str] = field(default_factory=list)     # ids this message entered in `calls`
    results: list[str] = field(default_factory=list)   # ids it entered in `results`
    separated: list[tuple[str, int | None]] = field(default_factory=list)  # (id, its earlier cut-off or None)


class PairScanner:
    """`index_pairs`, one message at a time. With ``undo=True`` each push is remembered, so
    `truncate(n)` gives the index of the first `n` messages at the cost of the messages taken back
    (a replay follows a buffer that grows and is cut back, each change costing its own size)."""

    def __init__(self, *, strict: bool = True, undo: bool = False) -> None:
        self.index = PairIndex(strict=strict)
        self.strict = strict
        self.waiting: dict[str, int] = {}  # calls of the current tool turn still without a result
        self.answered = False              # a result of the current tool turn has arrived
        self.count = 0                     # messages pushed (and not taken back)
        self._undo: list[_Undo] | None = [] if undo else None

    def pairs(self) -> PairIndex:
        """The index of the messages pushed so far (the same object each time, pending brought up to date)."""
        self.index.pending = set(self.waiting)
        return self.index

    def push(self, m: Message) -> None:
        self.extend((m,))

    def extend(self, messages: Sequence[Message]) -> PairScanner:
        """Push each of `messages` in turn (one loop: `index_pairs` of a long buffer is a hot path)."""
        idx, strict, log = self.index, self.strict, self._undo
        waiting, answered, i = self.waiting, self.answered, self.count
        for m in messages:
            undo = None
            if log is not None:
                undo = _Undo(waiting, answered, (len(idx.orphan_calls), len(idx.orphan_results),
                                                 len(idx.duplicate_calls), len(idx.duplicate_results)))
                log.append(undo)
                if m.call_ids or m.result_ids:
                    waiting = dict(waiting)  # the undo record keeps the one before
            if not (m.call_ids or m.result_ids):  # most messages: they matter only to a tool turn in progress
                if waiting and _cuts(m, strict):
                    waiting = self._cut_off(waiting, i, undo)
                i += 1
                continue
            cuts = _cuts(m, strict)
            if strict and waiting and m.result_ids and _speaks_before_results(m):
                waiting = self._cut_off(waiting, i, undo)  # Anthropic wants the tool_result blocks first
            for rid in m.result_ids:
                if rid in idx.results:
                    idx.duplicate_results.append(rid)
                else:
                    idx.results[rid] = i
                    if undo is not None:
                        undo.results.append(rid)
                if waiting.pop(rid, None) is None:
                    idx.orphan_results.append(rid)  # no call, a call cut off from it, or a call after it
                answered = True
            if cuts and waiting:
                waiting = self._cut_off(waiting, i, undo)  # text beside the results (or the calls): the turn is over
            if m.call_ids:
                if strict and answered and waiting:
                    waiting = self._cut_off(waiting, i, undo)  # a new call after results: the rest were skipped
                answered = False
            for call in m.tool_calls:
                if call.id in idx.calls:
                    idx.duplicate_calls.append(call.id)
                else:
                    idx.calls[call.id] = i
                    idx.call_names[call.id] = call.name
                    if undo is not None:
                        undo.calls.append(call.id)
                waiting[call.id] = i
            i += 1
        self.waiting, self.answered, self.count = waiting, answered, i
        return self

    def entered_from(self, n: int) -> tuple[list[str], list[str]]:
        """(call ids, result ids) first indexed by the messages from index `n` on (needs ``undo``)."""
        assert self._undo is not None, "a PairScanner made with undo=True"
        taken = self._undo[n:]
        return [c for u in taken for c in u.calls], [r for u in taken for r in u.results]

    def truncate(self, n: int) -> None:
        """Take back every message from index `n` on (needs ``undo``)."""
        assert self._undo is not None, "a PairScanner made with undo=True"
        idx = self.index
        while self.count > n:
            u = self._undo.pop()
            self.count -= 1
            self.waiting, self.answered = u.waiting, u.answered
            oc, orr, dc, dr = u.lengths
            del idx.orphan_calls[oc:], idx.orphan_results[orr:], idx.duplicate_calls[dc:], idx.duplicate_results[dr:]
            for cid in u.calls:
                del idx.calls[cid], idx.call_names[cid]
            for rid in u.results:
                del idx.results[rid]
            for cid, earlier in reversed(u.separated):
                if earlier is None:
                    del idx.separated[cid]
                else:
                    idx.separated[cid] = earlier

    def _cut_off(self, waiting: dict[str, int], at: int, undo: _Undo | None) -> dict[str, int]:
        """Every call in `waiting` is orphaned, cut off at message `at`; the (empty) waiting calls after."""
        idx = self.index
        for cid in waiting:
            idx.orphan_calls.append(cid)
            if undo is not None:
                undo.separated.append((cid, idx.separated.get(cid)))
            idx.separated[cid] = at
        return {}


def _model_speaks(m: Message) -> bool:
    """The model said something (text, or an empty turn): in lax mode only that ends a tool turn;
    its reasoning items do not."""
    return m.role == "assistant" and (not m.parts or any(type(p) is TextPart for p in m.parts))


def _speaks_before_results(m: Message) -> bool:
    """Whether something other than a tool result comes before the message's first result."""
    for part in m.parts:
        if type(part) is ToolResult:
            return False
        if type(part) is not ToolCall:
            return True
    return False


def introduced_orphans(before: PairIndex, after: PairIndex, rebased: PairIndex | None = None
                       ) -> tuple[list[str], list[str]]:
    """(tool_use_without_result, tool_result_without_use) the proposal creates. A call whose result
    the proposal removes counts even at the frontier: it is not pending, its result was dropped.
    `rebased`: as in `check_pairing` (then only what it orphans too counts)."""
    calls, results = _orphaned(before, after)
    if rebased is None:
        return calls, results
    again = _orphaned(before, rebased)
    return _both(calls, again[0]), _both(results, again[1])


def _orphaned(before: PairIndex, after: PairIndex) -> tuple[list[str], list[str]]:
    """Each id once, though a list that reuses ids holds it in several calls or results."""
    old_calls, old_results = set(before.orphan_calls), set(before.orphan_results)
    calls = [c for c in after.orphan_calls if c not in old_calls]
    calls += [c for c in after.pending if c in before.results]
    results = [r for r in after.orphan_results if r not in old_results]
    return list(dict.fromkeys(calls)), list(dict.fromkeys(results))


def _duplicated(before: PairIndex, after: PairIndex) -> tuple[list[str], list[str]]:
    return ([c for c in after.duplicate_calls if c not in set(before.duplicate_calls)],
            [r for r in after.duplicate_results if r not in set(before.duplicate_results)])


def _both(ids: list[str], again: list[str]) -> list[str]:
    kept = set(again)
    return [i for i in ids if i in kept]


def check_pairing(before: PairIndex, after: PairIndex, rebased: PairIndex | None = None) -> list[Finding]:
    """Findings for the orphans and duplicates the proposal introduces (pre-existing ones are warned).

    `rebased`: the pairs of the proposal rebased on the unread turns it does not end with
    (`prefix.with_unread_tail`), which the guard keeps after it: it never uses such a proposal as it
    is, but defers, settles or queues it with them. A pair counts as broken only where it is broken
    both in the proposal as written and so rebased: a stale copy's newest call is whole with the
    result kept after it, a proposal's own copy of an unread pair (moved, shortened) is whole as written."""
    findings: list[Finding] = []
    new_calls, new_results = introduced_orphans(before, after, rebased)
    if new_calls or new_results:
        parts = []
        if new_calls:
            parts.append("tool_use_without_result " + _describe(new_calls, after, before))
        if new_results:
            parts.append("tool_result_without_use " + _describe(new_results, after, before))
        findings.append(Finding(
            "tool_pairing",
            "the rewrite would orphan tool pairs: " + "; ".join(parts)
            + f". {PROVIDER_ERRORS}. Drop or keep each call together with its result "
            "(compact in whole-pair units), or keep the old context.",
            details={"tool_use_without_result": new_calls, "tool_result_without_use": new_results},
        ))
    dup_calls, dup_results = _duplicated(before, after)
    if rebased is not None:
        again = _duplicated(before, rebased)
        dup_calls, dup_results = _both(dup_calls, again[0]), _both(dup_results, again[1])
    if dup_calls or dup_results:
        findings.append(Finding(
            "tool_pairing",
            f"the rewrite duplicates tool ids: calls {sorted(set(dup_calls))}, results "
            f"{sorted(set(dup_results))}; providers reject a request whose tool ids repeat",
            details={"duplicate_calls": dup_calls, "duplicate_results": dup_results},
        ))
    old_orphans = len(before.orphan_calls) + len(before.orphan_results)
    if old_orphans and (set(before.orphan_calls) & set(after.orphan_calls)
                        or set(before.orphan_results) & set(after.orphan_results)):
        findings.append(Finding(
            "tool_pairing",
            f"the context already held {old_orphans} unpaired tool ids before this rewrite "
            f"(calls {before.orphan_calls}, results {before.orphan_results}); not caused by it",
            action="warn",
            details={"preexisting": True},
        ))
    return findings


def _describe(ids: list[str], idx: PairIndex, before: PairIndex) -> str:
    shown = []
    for cid in ids[:8]:
        at = idx.calls.get(cid, idx.results.get(cid))
        name = idx.call_names.get(cid) or before.call_names.get(cid)
        cut = idx.separated.get(cid)
        shown.append(f"{cid}" + (f" ({name})" if name else "") + (f" at message {at}" if at is not None else "")
                     + (f", cut off from its result by message {cut}" if cut is not None and cid in idx.results
                        else ""))
    more = f" and {len(ids) - 8} more" if len(ids) > 8 else ""
    return "[" + ", ".join(shown) + more + "]"
