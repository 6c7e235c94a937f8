"""Record 000's deferral: rewrites that alter the consumed prefix wait, or shrink in whole-pair units.

A deferred proposal is kept with the context it was made against. At the next session boundary
it is rebased onto what was appended since and checked again. Alternatively it is turned into
whole-pair compaction: a unit is a run of messages bound together by tool pairs (a call and all
its results, and everything between them); only consumed units the proposal dropped entirely are
removed, and an elision marker is placed at the frontier (after the last consumed unit; a unit the
boundary cuts, a call whose results the model has not read yet, is unread as a whole) telling
the model what was elided and carrying the proposal's new text. Everything after the frontier —
what the model has not read — stays verbatim and in order, and the marker's counts are exact.
Where the provider's rules forbid the marker at the frontier (Anthropic: a user turn after a user
turn), it goes to the nearest earlier unit boundary where they allow it; where none does (every
boundary of an Anthropic conversation that keeps its first user turn is a user turn before an
assistant turn), its text closes a consumed turn of its role before the frontier, after that turn's tool
results (`_hosts` says which first). When no place is valid, there is no conversion
(`validity.provider_problems`).

Markers stay bounded: a new plain marker folds the guard's own earlier plain markers in the consumed
units into itself (their counts summed into its own; they are taken out of the messages they stand in
or close, and the markers of units the proposal dropped are counted, not lost), so a loop that only
prunes carries one marker, not one per pruning. The guard names its own markers (`own_markers`: the
texts it wrote); a text that occurs twice (a user quoting a marker whole) is nobody's and stays. A fold
is made only where the result is valid for the provider and still an elision by `elides_only`; else the
markers are folded that stand alone or went with a dropped unit, else none.

A pruning that only clears consumed tool results in place (the ``clear_tool_uses`` pattern: an old
output replaced by a shorter placeholder) drops no unit, so there is nothing to elide; it keeps
every pair whole and touches nothing the model has not read, and `results_cleared_in_place`
recognises it so that it can be applied as it is.

Both only elide: they remove consumed material or shorten old tool output, and write nothing of their
own but a marker that carries no text. `elides_only` recognises such a change wherever it comes from
(a conversion, a clearing in place, a change `observe` adopts); the guard does not count it as a
rewrite cycle of the contraction alarm (docs/alarm.md "What is a cycle").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .diff import Change
from .literals import LiteralRegistry
from .model import Context, Message, Part, TextPart, ToolResult, ToolSchema
from .validity import provider_problems

T = TypeVar("T")
ELISION_PREFIX = "[ctxwatch] earlier turns were elided"
# the text of a marker that carries nothing of a rewrite's own (`elision_marker` without carried text);
# its groups are the counts it states (messages, units)
_PLAIN_MARKER = re.compile(re.escape(ELISION_PREFIX) + r" \(elision \d+\): (\d+) messages in (\d+) whole units were "
                           r"removed from this conversation\.")


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


class DeferralQueue:
    """Deferred proposals of one loop, newest last; bounded (older entries are superseded)."""

    def __init__(self, limit: int = 16) -> None:
        self._items: list[DeferredRewrite] = []
        self._next = 1
        self.limit = limit

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


def unread_frontier(units: Sequence[range], boundary: int) -> int:
    """Where the consumed units end and an elision marker may go: the last unit boundary at or before
    `boundary`. A unit the boundary cuts (a call the model made whose results it has not read yet) is
    unread as a whole, so the marker never comes after a result the model is about to read, and the
    prompt still ends with what it would end with without the guard."""
    return max((u.stop for u in units if u.stop <= boundary), default=0)


@dataclass(frozen=True)
class Conversion:
    """A whole-pair compaction: the messages to use, how many messages of the conversation it elided (in
    how many units), how many of the guard's earlier markers it folded into its own, and the texts of the
    guard's own plain markers in `messages` (what the guard passes as `own_markers` next time)."""

    messages: tuple[Message, ...]
    elided: int
    units: int
    folded: int = 0
    markers: frozenset[str] = frozenset()


def whole_pair_conversion(messages: Sequence[Message], boundary: int, dropped: set[int], carried: str, *,
                          role: str, number: int, format: str | None,
                          own_markers: frozenset[str] = frozenset()) -> Conversion | str | None:
    """Drop the consumed units whose every position is in `dropped` (positions, not contents: of two
    identical "ok" turns, the one the proposal dropped) and place the elision marker, a plain one folding
    the earlier markers of `own_markers` found before the frontier. None when no consumed unit was
    dropped; a one-line reason when no valid placement of the marker exists."""
    units = pair_units(messages)
    frontier = unread_frontier(units, boundary)
    consumed = [u for u in units if u.start < frontier]
    ours = _own_markers(messages, own_markers)
    before = Context(tuple(messages))
    for fold in () if carried else _folds(messages, consumed, dropped, ours):  # widest first
        placed = _elided(messages, consumed, dropped, fold, frontier, carried, role=role, number=number,
                         format=format)
        if isinstance(placed, Conversion) and elides_only(Change.between(before, placed.messages, "prune")):
            return Conversion(placed.messages, placed.elided, placed.units, len(fold), (ours - fold) | placed.markers)
    placed = _elided(messages, consumed, dropped, frozenset(), frontier, carried, role=role, number=number,
                     format=format)
    if not isinstance(placed, Conversion):
        return placed
    return Conversion(placed.messages, placed.elided, placed.units, 0, ours | placed.markers)


def _own_markers(messages: Sequence[Message], own: frozenset[str]) -> frozenset[str]:
    """The texts of `own` that stand, as a part of their own, exactly once in `messages`: a copy (a user
    quoting a marker whole) makes both nobody's."""
    if not own:
        return frozenset()
    seen = Counter(p.text for m in messages for p in m.parts if type(p) is TextPart and p.text in own)
    return frozenset(t for t, n in seen.items() if n == 1)


def _folds(messages: Sequence[Message], consumed: list[range], dropped: set[int],
           ours: frozenset[str]) -> Iterator[frozenset[str]]:
    """The sets of our markers to try folding, widest first: all of them before the frontier; those that
    stand alone or went with a dropped unit (taking them out removes whole messages and changes none)."""
    found = [(u, i, p.text) for u in consumed for i in u for p in messages[i].parts
             if type(p) is TextPart and p.text in ours]
    if not found:
        return
    every = frozenset(text for _, _, text in found)
    yield every
    loose = frozenset(text for u, i, text in found
                      if all(j in dropped for j in u) or _stripped(messages[i], every) is None)
    if loose and loose != every:
        yield loose


def _elided(messages: Sequence[Message], consumed: list[range], dropped: set[int], fold: frozenset[str],
            frontier: int, carried: str, *, role: str, number: int, format: str | None) -> Conversion | str | None:
    """The conversion with the markers of `fold` taken out and their counts summed into the new one
    (`markers`: the new one's text when it is plain); None when nothing was dropped."""
    kept: list[Message] = []
    starts: list[int] = []  # where each kept unit starts in `kept`: the places a marker may go
    elided = units_elided = 0
    carried_counts = [0, 0]  # what the folded markers say was elided
    hosts_before: list[int] = []  # the kept turns a folded marker closed
    for unit in consumed:
        for i in unit:
            for p in messages[i].parts:
                if type(p) is TextPart and p.text in fold:
                    counts = _PLAIN_MARKER.fullmatch(p.text)
                    assert counts is not None  # `fold` holds plain markers only
                    carried_counts[0] += int(counts[1])
                    carried_counts[1] += int(counts[2])
        stripped = [(_stripped(messages[i], fold), messages[i]) for i in unit]
        left = [s for s, _ in stripped if s is not None]
        if all(i in dropped for i in unit):
            units_elided += 1 if left else 0
            elided += len(left)
            continue
        if left and (not starts or starts[-1] != len(kept)):
            starts.append(len(kept))
        for s, m in stripped:
            if s is not None:
                hosts_before += [len(kept)] if s is not m else []
                kept.append(s)
    if not elided and not fold:
        return None
    rest = tuple(messages[frontier:])
    marker = elision_marker(role, elided + carried_counts[0], units_elided + carried_counts[1], carried, number)
    written = frozenset() if carried else frozenset({marker.text})
    for at in [len(kept), *reversed(starts)]:
        if not _fits(kept[at - 1] if at else None, kept[at] if at < len(kept) else (rest[0] if rest else None),
                     marker, format):
            continue
        out = (*kept[:at], marker, *kept[at:], *rest)
        if not provider_problems(out, format):
            return Conversion(out, elided, units_elided, markers=written)
    # no turn of its own fits: the marker closes a consumed turn
    for at in _hosts(kept, role, plain=not carried, former=hosts_before):
        out = (*kept[:at], _closed_by(kept[at], marker), *kept[at + 1:], *rest)
        if not provider_problems(out, format):
            return Conversion(out, elided, units_elided, markers=written)
    return (f"no place for the elision marker gives a valid {format or 'ctxwatch'} context after eliding "
            f"{elided} messages in {units_elided} whole units: no turn of its own keeps the roles alternating, "
            f"and no consumed {role} turn before the frontier can carry it")


def _hosts(kept: list[Message], role: str, *, plain: bool, former: list[int]) -> list[int]:
    """The consumed turns of `role` a marker may close, in the order to try them: the nearest to the frontier
    first. A plain marker goes first to a turn a marker it folds closed (nearest first: the marker stays
    where it was, its counts grown), then to the oldest turn with tool results, the one a pruning that drops
    the oldest tool pairs drops next, folding the marker into the next one (a marker carrying a rewrite's
    text stays near the frontier, where pruning reaches it last)."""
    nearest = [at for at in reversed(range(len(kept))) if kept[at].role == role]
    if not plain:
        return nearest
    answering = [at for at in reversed(nearest) if kept[at].result_ids and at not in former]
    return [*reversed(former), *answering, *(at for at in nearest if not kept[at].result_ids and at not in former)]


def _stripped(message: Message, fold: frozenset[str]) -> Message | None:
    """`message` without the marker parts of `fold` (itself when it has none); None when nothing is left."""
    parts = tuple(p for p in message.parts if not (type(p) is TextPart and p.text in fold))
    if len(parts) == len(message.parts):
        return message
    return Message(message.role, parts, id=message.id, name=message.name, extra=message.extra) if parts else None


def results_cleared_in_place(before: Sequence[Message], after: Sequence[Message], boundary: int) -> int | str:
    """How many consumed tool results `after` clears in place, when that is all it does: the same
    messages in the same order, those at or after `boundary` (unread) unchanged, and each changed one
    consumed and the same message but for the outputs of its tool results, and no larger. For another
    change of the same messages in place, a one-line reason why it is not that; 0 when messages were
    added or removed."""
    if len(before) != len(after):
        return 0
    cleared = 0
    for i, (old, new) in enumerate(zip(before, after, strict=True)):
        if old.digest == new.digest:
            continue
        if not _clears_results(old, new):
            return f"it changes message {i} in place beyond clearing tool-result outputs"
        if i >= boundary:
            return f"it clears a tool result the model has not read yet (message {i}), which stays as it is"
        cleared += sum(1 for a, b in zip(old.parts, new.parts, strict=True) if a != b)
    return cleared


def _clears_results(old: Message, new: Message) -> bool:
    """`new` is `old` with some tool-result outputs replaced, and no larger (its format's other fields may
    say so: LangChain's clearing marks the message in ``response_metadata``)."""
    if (new.role, new.id, new.name, len(new.parts)) != (old.role, old.id, old.name, len(old.parts)) \
            or new.size > old.size:
        return False
    return all(a == b or (type(a) is ToolResult and type(b) is ToolResult and a.call_id == b.call_id)
               for a, b in zip(old.parts, new.parts, strict=True))


def elides_only(change: Change) -> bool:
    """Whether `change` only elides: it removes messages, and each message it adds is a removed one with
    parts left out, tool-result outputs replaced by a placeholder (`is_placeholder`), and plain elision
    markers (`elision_marker` with no carried text) dropped from or added at its end, or such a marker
    alone; what it keeps stays in order. It writes nothing of its own, so it reworks no earlier rewrite's
    output (record 003): no rewrite cycle of the alarm (`ctxwatch.cycles.no_cycle_reason`). False for a
    change that removes nothing, for a re-rank, for an added message with no part, and for a marker or a
    cleared output that carries text of what it replaced (a summary: a rewrite)."""
    removed = change.removed_messages
    if not removed or not change.kept_order_preserved:
        return False
    # removed and added are in order: an elided message follows the one it elides
    written = [new for new in change.added_messages if not (new.parts and _plain_marker_parts(new.parts))]
    return _each_follows(removed, written, _elided_from)


def _each_follows(olds: Sequence[T], news: Sequence[T], kept_as: Callable[[T, T], bool]) -> bool:
    """Whether each of `news` is `kept_as` one of `olds`, in order (a later new, a later old)."""
    at = 0
    for new in news:
        while at < len(olds) and not kept_as(olds[at], new):
            at += 1
        if at == len(olds):
            return False
        at += 1
    return True


# the longest tool-result placeholder: a one-line label ("[Old tool result content cleared]", "[cleared]",
# "Old environment output: (40 lines omitted)"), not a summary of what it replaced
PLACEHOLDER_MAX_CHARS = 120
# a placeholder holding this many characters in a row of the output it replaced (or all of a shorter one) carries it
CARRIED_RUN = 16
_PLACEHOLDER_LITERALS = LiteralRegistry()  # the default patterns: the rule does not depend on a guard's setup


def is_placeholder(old: ToolResult, new: ToolResult) -> bool:
    """Whether `new` is `old`'s output replaced by a placeholder that carries nothing of it: the same call,
    a text of at most `PLACEHOLDER_MAX_CHARS` characters holding no literal (default patterns) of the
    output it replaced and no `CARRIED_RUN` characters in a row of it (all of it, when it is shorter)."""
    if new.call_id != old.call_id:
        return False
    text, was = new.text(), old.text()
    if len(text) > PLACEHOLDER_MAX_CHARS:
        return False
    run = min(CARRIED_RUN, len(was))
    if run and any(text[i:i + run] in was for i in range(len(text) - run + 1)):
        return False
    carried = _PLACEHOLDER_LITERALS.extract(text)
    return not carried or carried.isdisjoint(_PLACEHOLDER_LITERALS.extract(was))


def _elided_from(old: Message, new: Message) -> bool:
    """`new` is `old` with parts left out, tool-result outputs replaced by placeholders and plain markers
    taken from or put at its end."""
    if (new.role, new.id, new.name) != (old.role, old.id, old.name) or not new.parts:
        return False
    # a subsequence of old's parts, each the same or a cleared tool result
    return _each_follows(_without_markers(old.parts), _without_markers(new.parts), _kept_as)


def _kept_as(old: Part, new: Part) -> bool:
    if old == new:
        return True
    return type(old) is ToolResult and type(new) is ToolResult and is_placeholder(old, new)


def _without_markers(parts: Sequence[Part]) -> Sequence[Part]:
    """`parts` without the plain elision markers closing them."""
    end = len(parts)
    while end and _plain_marker_parts(parts[end - 1:end]):
        end -= 1
    return parts[:end]


def _plain_marker_parts(parts: Sequence[Part]) -> bool:
    return all(type(p) is TextPart and _PLAIN_MARKER.fullmatch(p.text) for p in parts)


def _fits(before: Message | None, after: Message | None, marker: Message, format: str | None) -> bool:
    """A quick local test of a marker placement (the whole context is checked after it)."""
    if format != "anthropic":
        return True
    return all(m is None or m.role != marker.role for m in (before, after))  # roles alternate around it


def _closed_by(turn: Message, marker: Message) -> Message:
    """`turn` with the marker's text as its last part (after any tool results, which open a turn)."""
    return Message(turn.role, (*turn.parts, *marker.parts), id=turn.id, name=turn.name, extra=turn.extra)


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
