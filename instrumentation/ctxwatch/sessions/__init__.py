"""Readers for recorded agent sessions: the context buffers the agent sent, and how they changed.

Formats (`SESSION_FORMATS`, detected by `detect_session_format`): Claude Code session JSONL
(``claude_code``), OpenAI Codex rollout JSONL (``codex``), SWE-agent ``.traj`` (``swe_agent``),
OpenHands event JSON (``openhands``), Gemini CLI chat recordings (``gemini_cli``, JSON or JSONL)
and JSONL of message snapshots (``messages_jsonl``).
Each format module's docstring says how its buffers are rebuilt.

``read_session(path, format=None, strict=False)`` returns a `Session`; iterating it streams, in
file order, two kinds of event:

- `Snapshot(step, messages, where, line, final)`: the buffer (a tuple of `ctxwatch.Message`) the
  model was sent at `step`; ``final=True`` marks the buffer left at the end of an event-log file
  (Claude Code, Codex, OpenHands), which may hold messages never sent.
- `Mutation(kind, step, before, after, source, where, line, trigger, pre_tokens, summary,
  summary_line, changed, details)`: a change of the buffer that is not an append, between
  snapshot ``step - 1`` and snapshot `step`: kind ``compact`` / ``prune`` / ``rewrite`` /
  ``rerank``; the buffers before and after (so sizes, orphaned pairs, literals lost and hash
  distance follow); what the file says about it (Claude Code ``compact_boundary`` trigger and
  preTokens, its summary message and line; Codex ``compacted`` replacement history; OpenHands
  condensation; ``snapshot_diff`` for formats that record whole buffers, with the changed indices).

Bad input: a missing, empty, binary, unrecognised file, or a single-document file over the size
cap, raises `SessionReadError` (an `InvalidContextError`) with one line naming the file. A corrupt,
truncated or over-long JSONL line, or a record that is not a valid message, is recorded in
`Session.skipped` (`Skip(where, reason, line)`) and reading goes on; ``strict=True`` raises at the
first one instead. JSONL is streamed line by line (memory bounded by the longest line and the
current buffer); SWE-agent and OpenHands files are one JSON document, read whole up to
``max_document_bytes`` (256 MiB by default).
"""

from __future__ import annotations

import os
from pathlib import Path

from . import claude_code, codex, gemini_cli, openhands, snapshots, swe_agent
from .detect import SESSION_FORMATS, detect_session_format
from .events import Event, Mutation, Skip, Snapshot, classify_change
from .files import MAX_DOCUMENT_BYTES, MAX_LINE_BYTES, SessionReadError, check_file
from .session import Session

READERS = {
    "claude_code": claude_code.events,
    "codex": codex.events,
    "swe_agent": swe_agent.events,
    "openhands": openhands.events,
    "gemini_cli": gemini_cli.events,
    "messages_jsonl": snapshots.events,
}


def read_session(path: str | os.PathLike[str], format: str | None = None, *, strict: bool = False,
                 max_line_bytes: int = MAX_LINE_BYTES,
                 max_document_bytes: int = MAX_DOCUMENT_BYTES) -> Session:
    """The session in `path` (format detected when None); the file is checked now, read when iterated."""
    if format is not None and format not in READERS:
        raise SessionReadError(path, f"unknown session format {format!r} (expected one of "
                               f"{', '.join(SESSION_FORMATS)})")
    check_file(Path(path))
    fmt = format or detect_session_format(path, max_line_bytes)
    return Session(path, fmt, READERS[fmt], strict=strict, max_line_bytes=max_line_bytes,
                   max_document_bytes=max_document_bytes)


__all__ = [
    "MAX_DOCUMENT_BYTES", "MAX_LINE_BYTES", "SESSION_FORMATS", "Event", "Mutation", "Session",
    "SessionReadError", "Skip", "Snapshot", "classify_change", "detect_session_format", "read_session",
]
