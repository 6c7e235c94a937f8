"""Who a session is: its loop id, agent, agent version and project, read from its first records.

- Claude Code: the file is named after the session id (else the first ``sessionId``); ``version``
  and ``cwd`` are on every record. A sub-agent's transcript (its first record that says is
  ``isSidechain: true``) records its parent's ``sessionId`` and its own ``agentId``: it is the loop
  ``claude-code-<session id>-agent-<agentId>``, not the parent's.
- Codex: the ``session_meta`` record's ``payload``: ``id``, ``cli_version``, ``cwd``; in a rollout of the
  pre-envelope shape (mid 2025), its header line: ``id`` (it records neither version nor working directory).
- Gemini CLI: ``sessionId`` of the metadata record (or the document); the project is the
  ``<project>`` directory of ``~/.gemini/tmp/<project>/chats/``.

`identify` reads them from the records `head_records` finds in a file's first `HEAD_BYTES` (``ctxwatch
watch`` once a session has its first complete line; ``replay`` through `identify_file`).

`loop_id_for` is the one rule that names a session's loop, for ``ctxwatch replay`` (table, JSON and
``--otlp``) and ``ctxwatch watch`` alike, so a backfill and a watcher of one session report one loop:
``<agent>-<session id>`` for the coding agents (the id the file records: Claude Code's ``sessionId`` or
a file named after it, Codex's ``session_meta`` id, Gemini CLI's ``sessionId``; the file's stem when it
records none), else, for a file that records no session id (guard message lists, OpenHands, SWE-agent
trajectories), ``replay-<stem>-<12 hex digits of xxh3 of its first 64 KiB>`` (a copy gets the same id).

The project becomes the span's service label through `ServiceLabels`: the last component of the
working directory, reduced to ``[A-Za-z0-9._-]``, at most `MAX_LABEL` characters, and at most
`max_services` distinct values (later projects get ``other``), unless one fixed service name is
configured. Labels are bounded; ids never become labels.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import xxhash

from .. import semconv
from ..sessions.codex import is_legacy_header
from ..sessions.files import BadJSON, parse_line
from ..telemetry.bounded import BoundedValues

AGENTS = {"claude_code": "claude-code", "codex": "codex", "gemini_cli": "gemini-cli"}  # the agents watch follows
MAX_LABEL = 64
MAX_ID = 128
HEAD_BYTES = 64 * 1024  # also what the loop id of a file recording no session id hashes
FILE_LOOP_ID_PREFIX = "replay"
_STEM_CHARS = 48
HEAD_RECORDS = 50
OTHER = semconv.OVERFLOW  # past --max-services: the one overflow value of every bounded label
UNKNOWN_PROJECT = "unknown"
_SPACE = re.compile(r"[ \t\r\n]*")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class SessionIdentity:
    """What the spans of one session say about it."""

    loop_id: str
    agent: str
    version: str | None
    project: str


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _first(records: Iterable[dict], *path: str) -> str | None:
    for record in records:
        value: Any = record
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if (text := _text(value)) is not None:
            return text
    return None


def _subagent_of(records: Iterable[dict]) -> str | None:
    """The ``agentId`` of a Claude Code sub-agent's transcript (its first record saying ``isSidechain`` says
    true), else None."""
    side = next((r for r in records if isinstance(r.get("isSidechain"), bool)), None)
    return _text(side.get("agentId")) if side is not None and side["isSidechain"] else None


def _safe(text: str, limit: int) -> str:
    return _UNSAFE.sub("_", text).strip("_")[:limit] or UNKNOWN_PROJECT


def _project_of(cwd: str | None) -> str | None:
    return PurePath(cwd).name or None if cwd else None


def agent_name(format: str) -> str:
    """The agent (``gen_ai.agent.name``) of a session of `format`, the same from ``watch`` and ``replay --otlp``:
    ``claude-code``, ``codex``, ``gemini-cli`` for the coding agents, else the format itself."""
    return AGENTS.get(format, format)


def identify(path: Path, format: str, records: list[dict]) -> SessionIdentity:
    """The identity of the session in `path` (of `format`), from its first `records`."""
    agent = agent_name(format)
    if format == "codex":
        payloads = [r.get("payload") for r in records if r.get("type") == "session_meta"]
        meta = [m for m in payloads if isinstance(m, dict)]
        if not meta and records and is_legacy_header(records[0]):
            meta = records[:1]  # a pre-envelope rollout's header
        session_id, version, cwd = _first(meta, "id"), _first(meta, "cli_version"), _first(meta, "cwd")
        project = _project_of(cwd)
    elif format == "gemini_cli":
        session_id, version = _first(records, "sessionId"), _first(records, "version")
        project = path.parent.parent.name if path.parent.name == "chats" else None
    else:
        session_id = path.stem if _UUID.match(path.stem) else _first(records, "sessionId")
        if (agent_id := _subagent_of(records)) is not None:
            session_id = f"{session_id or UNKNOWN_PROJECT}-agent-{agent_id}"
        version, project = _first(records, "version"), _project_of(_first(records, "cwd"))
    session_id = _safe(session_id or path.stem, MAX_ID)
    return SessionIdentity(f"{agent}-{session_id}", agent, version[:MAX_LABEL] if version else None,
                           _safe(project or path.parent.name, MAX_LABEL))


def _skip_space(text: str, at: int) -> int:
    gap = _SPACE.match(text, at)
    return gap.end() if gap is not None else at


def _leading_fields(head: bytes) -> dict[str, Any]:
    """The top-level fields of a JSON document whose values are complete in its first bytes `head`
    (a Gemini CLI chat longer than `HEAD_BYTES` still names its ``sessionId`` first)."""
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")
    if not text.startswith("{"):
        return {}
    decoder, at = json.JSONDecoder(), 1
    fields: dict[str, Any] = {}
    while True:
        try:
            key, at = decoder.raw_decode(text, _skip_space(text, at))
            colon = _skip_space(text, at)
            if not isinstance(key, str) or text[colon:colon + 1] != ":":
                return fields
            value, at = decoder.raw_decode(text, _skip_space(text, colon + 1))
        except (json.JSONDecodeError, RecursionError):
            return fields
        fields[key] = value
        at = _skip_space(text, at)
        if text[at:at + 1] != ",":
            return fields
        at += 1


def head_records(head: bytes, document: bool) -> list[dict]:
    """The JSON objects among the first complete lines of `head` (or the document's top object, or the
    fields complete in `head` of a document longer than it)."""
    if document:
        try:
            value = parse_line(head)
        except BadJSON:
            value = _leading_fields(head)
        return [value] if isinstance(value, dict) and value else []
    out = []
    for chunk in head.split(b"\n")[:-1][:HEAD_RECORDS]:
        try:
            value = parse_line(chunk) if chunk.strip() else None
        except BadJSON:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def identify_file(path: Path, format: str) -> SessionIdentity:
    """The identity of the session file `path` (of `format`), from its first records (OSError when it
    cannot be read)."""
    with path.open("rb") as f:
        head = f.read(HEAD_BYTES)
    return identify(path, format, head_records(head, path.suffix == ".json"))


def opening(head: bytes, document: bool) -> str:
    """A digest of the first record of a file whose first `HEAD_BYTES` are `head` (xxh3, 16 hex digits; no
    content): what tells a session's file read again from one it continued in (`telemetry.sequence.Generation`).
    '' for a document (rewritten whole, its first line tells nothing) or a file with nothing in it yet."""
    first = b"" if document else head.split(b"\n", 1)[0].strip()
    return xxhash.xxh3_64_hexdigest(first) if first else ""


def file_opening(path: Path) -> str:
    """`opening` of the file `path` (OSError when it cannot be read)."""
    with path.open("rb") as f:
        return opening(f.read(HEAD_BYTES), path.suffix == ".json")


def file_loop_id(path: str | os.PathLike[str]) -> str:
    """The loop id of a session file that records no session id: its stem and a hash of its first
    `HEAD_BYTES` (so a copy gets the same id, and a session file that grows keeps it)."""
    p = Path(path)
    head = os.path.abspath(p).encode()  # what names a file that cannot be read (not resolve(): a symlink loop raises)
    if p.is_file():  # never opens a FIFO or device (see sessions.files.check_file)
        try:
            with p.open("rb") as f:
                head = f.read(HEAD_BYTES)
        except OSError:
            pass
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in p.stem)[:_STEM_CHARS]
    return f"{FILE_LOOP_ID_PREFIX}-{stem}-{xxhash.xxh3_64_hexdigest(head)[:12]}"


def loop_id_for(path: str | os.PathLike[str], format: str | None, file_id: str | None = None) -> str:
    """The loop id of the session in file `path` of `format` (None: not known), the same from ``replay``
    and ``watch`` (see the module docstring). `file_id`: the file's `file_loop_id`, when the caller has
    already read it (so the file's head is not read and hashed twice)."""
    if format in AGENTS and Path(path).is_file():
        try:
            return identify_file(Path(path), format).loop_id
        except OSError:
            pass
    return file_id if file_id is not None else file_loop_id(path)


class ServiceLabels:
    """The service label of each project: fixed, or the project's name up to `max_services` of them."""

    def __init__(self, fixed: str | None = None, max_services: int = 20) -> None:
        self.fixed = fixed
        self.max_services = max_services
        self._bounded = BoundedValues(cap=max_services, max_length=MAX_LABEL)

    def label(self, project: str) -> str:
        return self.fixed if self.fixed is not None else self._bounded.value(project)
