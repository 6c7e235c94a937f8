"""Directive co-location (record 003): find rewrite directives inside a buffer and hold them out of band.

A *directive* is the instruction that governs a rewrite ("compress to essentials", "summarize
the notes"). When it lives in the buffer being rewritten, the next rewrite re-reads and
re-executes it, compounding the compression (instruction absorption). Markers are plain
phrases, matched case-insensitively with runs of whitespace treated as one space; the record's
three are the defaults' core, and the defaults add common phrasings of the same instruction.

`strip_directives` takes every message that carries a marker out of the buffer before a
rewrite; `StrippedBuffer.reinject` puts those messages back, byte for byte, after it: messages
that led the buffer go back to the front, messages that trailed it go back to the end, and a
message from the middle goes back after the nearest earlier payload message that survived the
rewrite (at the front of the payload when none did). `out_of_band` wraps a rewrite function
with both steps and refuses a rewrite that writes a directive into its own output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .errors import NonIdempotentRewriteError
from .model import Message

DEFAULT_MARKERS: tuple[str, ...] = (
    # record 003
    "compress to essentials",
    "remove redundant",
    "summarize the notes",
    # the same instruction, phrased as agents and compactors commonly phrase it
    "compress to the essential",
    "compress the working notes",
    "compress the notes",
    "summarise the notes",
    "keep only the essential",
    "drop low-salience",
    "drop low salience",
    "remove low-salience",
    "condense the context",
    "compact the context",
    "prune the context",
    "rewrite the scratchpad",
)

RewriteFn = Callable[[list[Message]], Sequence[Message]]


class DirectiveHit(NamedTuple):
    """One marker found in one message."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index, as NamedTuple fields may
    marker: str


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def _prepared(markers: Iterable[str]) -> tuple[_Marker, ...]:
    given = tuple(markers)
    for marker in given:
        if not isinstance(marker, str) or not marker.strip():
            raise ValueError(f"directive markers must be non-empty strings, got {marker!r}")
    return _prepared_once(given)


class _Marker(NamedTuple):
    marker: str
    needle: str              # its normalised form
    key: str                 # the needle's longest word
    others: tuple[str, ...]  # its other words


@functools.lru_cache(maxsize=16)
def _prepared_once(markers: tuple[str, ...]) -> tuple[_Marker, ...]:
    prepared = []
    for marker in markers:
        needle = _normalise(marker)
        words = needle.split(" ")
        key = max(words, key=len)
        prepared.append(_Marker(marker, needle, key, tuple(w for w in words if w != key)))
    return tuple(prepared)


def find_directives(messages: Sequence[Message],
                    markers: Iterable[str] = DEFAULT_MARKERS) -> list[DirectiveHit]:
    """Every (message index, marker) pair where the message's text contains the marker."""
    prepared = _prepared(markers)
    keys = {m.key for m in prepared}
    hits: list[DirectiveHit] = []
    for index, message in enumerate(messages):
        # each word of a marker found in the normalised text lies within one word of the lower-cased
        # text, so only a marker whose every word the lower-cased text holds is looked for (normalised)
        lowered = message.text.lower()
        present = {key for key in keys if key in lowered}
        if not present:
            continue
        candidates = [m for m in prepared if m.key in present and all(w in lowered for w in m.others)]
        if candidates:
            text = " ".join(lowered.split())
            hits.extend(DirectiveHit(index, m.marker) for m in candidates if m.needle in text)
    return hits


@dataclass(frozen=True)
class StrippedBuffer:
    """A buffer split into the payload to rewrite and the directive messages held out of band.

    `directives` holds (original index, message, anchor) where anchor is "front", "back" or the
    digest of the nearest earlier payload message.
    """

    payload: tuple[Message, ...]
    directives: tuple[tuple[int, Message, str | int], ...]

    def reinject(self, rewritten: Sequence[Message]) -> list[Message]:
        """The rewritten payload with the held-out directive messages back in place."""
        out = list(rewritten)
        front = [m for _, m, anchor in self.directives if anchor == "front"]
        back = [m for _, m, anchor in self.directives if anchor == "back"]
        middle: dict[int, list[Message]] = {}
        for _, m, anchor in self.directives:
            if isinstance(anchor, int):
                middle.setdefault(anchor, []).append(m)
        placed: list[Message] = []
        orphans: list[Message] = []
        survivors = {m.digest for m in out}
        for anchor, held in middle.items():
            if anchor not in survivors:
                orphans.extend(held)
        for m in out:
            placed.append(m)
            placed.extend(middle.pop(m.digest, ()))
        return front + orphans + placed + back


def strip_directives(messages: Sequence[Message], markers: Iterable[str] = DEFAULT_MARKERS) -> StrippedBuffer:
    """Split `messages` into payload and directive messages (see the module docstring)."""
    carrying = {hit.index for hit in find_directives(messages, markers)}
    payload_at = [i for i in range(len(messages)) if i not in carrying]
    first = payload_at[0] if payload_at else len(messages)
    last = payload_at[-1] if payload_at else -1
    held = []
    for i in sorted(carrying):
        if i < first:
            anchor: str | int = "front"
        elif i > last:
            anchor = "back"
        else:
            anchor = messages[max(p for p in payload_at if p < i)].digest
        held.append((i, messages[i], anchor))
    return StrippedBuffer(tuple(messages[i] for i in payload_at), tuple(held))


def out_of_band(rewrite_fn: RewriteFn, markers: Iterable[str] = DEFAULT_MARKERS) -> RewriteFn:
    """Wrap `rewrite_fn` so it never sees a directive message and never writes one.

    The wrapped function strips directive messages, rewrites the payload, refuses with
    `NonIdempotentRewriteError` if the rewrite's output carries a marker (instruction
    absorption), and re-injects the held-out messages.
    """
    marker_list = tuple(markers)
    _prepared(marker_list)

    def wrapped(messages: list[Message]) -> list[Message]:
        stripped = strip_directives(messages, marker_list)
        rewritten = list(rewrite_fn(list(stripped.payload)))
        absorbed = find_directives(rewritten, marker_list)
        if absorbed:
            where = ", ".join(f"message {hit.index} ({hit.marker!r})" for hit in absorbed)
            raise NonIdempotentRewriteError(
                f"the rewrite wrote its directive into its output: {where}; the next pass would "
                "re-execute it (instruction absorption). Keep the directive in the rewrite function's "
                "own prompt, not in the buffer it writes.")
        return stripped.reinject(rewritten)

    return wrapped
