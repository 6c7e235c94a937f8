"""The events a recorded session yields: context snapshots, mutations, and skipped lines.

`Snapshot` is the context buffer as the agent sent it at one step. `Mutation` is a change of
the buffer that is not an append (a compaction, a pruning, a rewind), with the buffer before
and after it, so a replay can compute its size change, orphaned pairs, lost literals and hash
distance. `Skip` records an input line that could not be read. `classify_change` names the
kind of change between two consecutive snapshots of formats that record whole buffers, and
`buffer_change` makes the `Mutation` between them, judged as the guard judges the same change live:
the new turns the buffer after ends with (the model's reply and the tool results appended since the
buffer before was sent, `appended_turns`) are appended first, so the mutation's `before` holds them
and the change itself is only what the agent rewrote (an output elided in place stays an elision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..kinds import Classified, classify_with_positions
from ..model import Message
from ..state import is_new_turn


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
    """How many of the last messages of `after` are turns appended before the change `classified` (from the
    buffer before to `after`) made: the longest run at its end of messages the classifier takes as appended
    (`Classified.appended`) that are new turns (`state.is_new_turn`: a model turn or a tool result, never a
    summary or a marker a rewrite put at the end). The guard takes the turns its caller appended since the
    last observe() as appended first, the rewrite judged on top of them (a proposal must end with them)."""
    appended, count = set(classified.appended), 0
    while count < len(after) and len(after) - 1 - count in appended and is_new_turn(after[-1 - count]):
        count += 1
    return count


def buffer_change(before: tuple[Message, ...], after: tuple[Message, ...], step: int, source: str, where: str,
                  line: int | None = None) -> Mutation | None:
    """The `Mutation` from the recorded buffer `before` to the recorded buffer `after` (None: `after` only
    appends to it), its `before` grown by the turns appended before the change (`appended_turns`)."""
    classified = classify_with_positions(before, after)
    if classified.kind == "append":
        return None
    tail = appended_turns(after, classified)
    return Mutation(classified.kind, step, before + after[len(after) - tail:], after, source, where, line=line,
                    changed=classified.changed)
