"""Which recorded-session format a file is in, decided from its first records.

- ``claude_code``: JSONL records with a Claude Code ``type`` (user, assistant, system, progress,
  summary, file-history-snapshot...) and a ``sessionId`` / ``uuid`` / ``messageId`` / ``leafUuid``;
- ``codex``: JSONL records ``{"type": "session_meta" | "response_item" | ..., "payload"}``, or a rollout of the
  pre-envelope shape (Codex CLI before the ``payload`` envelope, mid 2025): a bare header line ``{"id",
  "timestamp", "instructions"?, "git"?}`` (no ``type``) followed by ``{"record_type": "state"}`` markers and bare
  Responses items, or named ``rollout-...-<id>.jsonl`` after the header's ``id``;
- ``messages_jsonl``: JSONL lines that are lists of message dicts or objects with a ``messages`` list;
- ``swe_agent``: one JSON object with a ``trajectory`` list;
- ``openhands``: one JSON list of events (``source`` with ``action`` or ``observation``);
- ``gemini_cli``: one JSON object with ``sessionId``, ``projectHash`` and a ``messages`` list, or
  JSONL whose first record is such an object's metadata (``sessionId``, ``projectHash``).

Up to 20 lines are looked at (a corrupt first line does not hide the format); a pretty-printed
single document is recognised from its first 64 KiB (past a UTF-8 byte order mark, as every reader reads it).
"""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path
from typing import Any

from .codex import is_bare_response_item, is_legacy_header
from .files import MAX_LINE_BYTES, SessionReadError, check_file, iter_jsonl
from .gemini_cli import is_recording

SESSION_FORMATS = ("claude_code", "codex", "swe_agent", "openhands", "gemini_cli", "messages_jsonl")
_CLAUDE_TYPES = frozenset({"user", "assistant", "system", "progress", "summary", "file-history-snapshot",
                           "queue-operation", "attachment"})
_CLAUDE_KEYS = ("sessionId", "uuid", "messageId", "leafUuid")
_CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_LOOKAHEAD = 20


def detect_session_format(path: str | os.PathLike[str], max_line_bytes: int = MAX_LINE_BYTES) -> str:
    """One of SESSION_FORMATS; SessionReadError naming the file when none fits."""
    path = Path(path)
    head = check_file(path)
    records = list(islice(iter_jsonl(path, lambda line, reason: None, max_line_bytes), _LOOKAHEAD))
    first_line_read = bool(records) and records[0][0] == _first_line_number(head)
    if first_line_read:
        kind = _document_kind(records[0][1])
        if kind is not None:
            return kind
    elif (kind := _sniff_document(head)) is not None:
        return kind
    if first_line_read and _is_legacy_codex(path, [r for _, r in records]):
        return "codex"
    for _, record in records:
        kind = _record_kind(record)
        if kind is not None:
            return kind
    raise SessionReadError(path, "unrecognised session format (expected Claude Code JSONL, Codex rollout "
                           "JSONL, SWE-agent .traj, OpenHands events JSON, Gemini CLI chat JSON/JSONL, or JSONL "
                           "of message lists)")


def _first_line_number(head: bytes) -> int:
    """The line number of the first non-blank line."""
    stripped = head.lstrip()
    return head[: len(head) - len(stripped)].count(b"\n") + 1


def _document_kind(value: Any) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("trajectory"), list):
        return "swe_agent"
    if is_recording(value):
        return "gemini_cli"
    events = value.get("events") if isinstance(value, dict) else value
    if isinstance(events, list) and events and _is_openhands_event(events[0]):
        return "openhands"
    return None


def _is_openhands_event(event: Any) -> bool:
    return isinstance(event, dict) and "source" in event and ("action" in event or "observation" in event)


def _sniff_document(head: bytes) -> str | None:
    """The kind of a pretty-printed document, from its first bytes."""
    text = head.lstrip()
    if text.startswith(b"{") and b'"trajectory"' in text:
        return "swe_agent"
    if text.startswith(b"{") and b'"sessionId"' in text and b'"projectHash"' in text and b'"messages"' in text:
        return "gemini_cli"
    eventful = b'"action"' in text or b'"observation"' in text
    if text.startswith((b"[", b"{")) and b'"source"' in text and eventful:
        return "openhands"
    return None


def _is_legacy_codex(path: Path, records: list[Any]) -> bool:
    """A pre-envelope Codex rollout: its header, then a ``record_type`` marker or a bare Responses item among the
    first records, or a file named after the header's id (``rollout-<time>-<id>.jsonl``)."""
    if not is_legacy_header(records[0]):
        return False
    named = path.name.startswith("rollout-") and path.name.endswith(f"-{records[0]['id']}.jsonl")
    return named or any(isinstance(r, dict) and ("record_type" in r or is_bare_response_item(r)) for r in records[1:])


def _record_kind(record: Any) -> str | None:
    if isinstance(record, dict):
        kind = record.get("type")
        if not isinstance(kind, str):
            kind = None
        if kind in _CLAUDE_TYPES and any(k in record for k in _CLAUDE_KEYS):
            return "claude_code"
        if kind in _CODEX_TYPES and "payload" in record:
            return "codex"
        if isinstance(record.get("messages"), list):
            return "messages_jsonl"
    elif isinstance(record, list) and record and all(_message_like(m) for m in record):
        return "messages_jsonl"
    return None


def _message_like(item: Any) -> bool:
    return (isinstance(item, dict) and ("role" in item or "type" in item)) or hasattr(item, "type")
