"""The events a recorded session yields: context snapshots, mutations, and skipped lines.

`Snapshot` is the context buffer as the agent sent it at one step. `Mutation` is a change of
the buffer that is not an append (a compaction, a pruning, a rewind), with the buffer before
and after it, so a replay can compute its size change, orphaned pairs, lost literals and hash
distance. `Skip` records an input line that could not be read. `classify_change` names the
kind of change between two consecutive snapshots of formats that record whole buffers, and
`buffer_change` makes the `Mutation` between them, judged as the guard judges the same change live:
the turns the buffer after ends with that were appended since the buffer before was sent (the model's
reply and what followed it) are appended first, so the mutation's `before` holds them and the change is
only what the agent rewrote (an output elided in place stays an elision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..kinds import Classified, classify_with_positions
from ..model import Message


def _size(messages: Sequence[Message]) -> int:
    return sum(m.size for m in messages)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The buffer the model was sent at `step` (0-based). `final` marks the buffer left at the
    end of the file, which may not have been sent; `line` is the 1-based line of the record
    that started the step (JSONL formats) and `where` says the same for every format."""

    step: int
    messages: tuple[Message, ...]
    where: str
    line: int | None = None
    final: bool = False

    @property
    def size(self) -> int:
        return _size(self.messages)


@dataclass(frozen=True, slots=True)
class Mutation:
    """A change of the buffer between snapshot ``step - 1`` and snapshot `step`.

    `kind` is one of ``compact`` (content dropped and a summary or new content put in its place),
    ``prune`` (content dropped or elided in place, nothing new), ``system_patch`` (system messages
    changed), ``rewrite`` (messages changed otherwise), ``rerank`` (the same messages reordered): the
    readers that see whole buffers name it with `ctxwatch.kinds` (`classify_change`). `source` names
    the record that marks it: ``claude_code.compact_boundary``, ``claude_code.rewind``,
    ``claude_code.repeated_record`` (a record logged again with another message), ``codex.compacted``,
    ``openhands.condensation`` or ``snapshot_diff`` (two consecutive recorded buffers differ
    by more than an append). `changed` lists the indices in `before` that were changed or dropped
    (for snapshot diffs). `trigger`, `pre_tokens` and `summary` are what the file says about a
    compaction; `details` holds format-specific facts (e.g. ``replacement_items`` for Codex).
    """

    kind: str
    step: int
    before: tuple[Message, ...]
    after: tuple[Message, ...]
    source: str
    where: str
    line: int | None = None
    trigger: str | None = None
    pre_tokens: int | None = None
    summary: Message | None = None
    summary_line: int | None = None
    changed: tuple[int, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def size_before(self) -> int:
        return _size(self.before)

    @property
    def size_after(self) -> int:
        return _size(self.after)


@dataclass(frozen=True, slots=True)
class Skip:
    """An input line or record that could not be read, and why."""

    where: str
    reason: str
    line: int | None = None


Event = Snapshot | Mutation


def classify_change(before: Sequence[Message],
                    after: Sequence[Message]) -> tuple[str, tuple[int, ...]] | None:
    """(kind, positions in `before` removed or replaced) when `after` is not `before` plus appended
    messages, else None. The kind is the one classifier's (`ctxwatch.kinds`)."""
    classified = classify_with_positions(before, after)
    return None if classified.kind == "append" else (classified.kind, classified.changed)


def appended_turns(after: Sequence[Message], classified: Classified) -> int:
    """How many of the last messages of `after` are turns appended before the change `classified` made (from
    the buffer before to `after`): of the run at its end that the classifier takes as appended
    (`Classified.appended`, the messages it names the kind without), those from the model's reply on (the
    first assistant message: the model answered the buffer before, then came its tool results or the next
    user message). What the run holds before that reply (a summary, a marker) is the change's own."""
    appended, run = set(classified.appended), 0
    while run < len(after) and len(after) - 1 - run in appended:
        run += 1
    start = len(after) - run
    return len(after) - next((i for i in range(start, len(after)) if after[i].role == "assistant"), len(after))


def buffer_change(before: tuple[Message, ...], after: tuple[Message, ...], step: int, source: str, where: str,
                  line: int | None = None) -> Mutation | None:
    """The `Mutation` from the recorded buffer `before` to the recorded buffer `after` (None: `after` only
    appends to it), judged as the guard judges the same change live, where the turns the caller appended
    since it last observed are taken as appended first: its `before` holds the turns `after` ends with that
    were appended (`appended_turns`), so what is judged (`cycles.no_cycle_reason`) is the change alone."""
    classified = classify_with_positions(before, after)
    if classified.kind == "append":
        return None
    tail = appended_turns(after, classified)
    return Mutation(classified.kind, step, before + after[len(after) - tail:], after, source, where, line=line,
                    changed=classified.changed)
