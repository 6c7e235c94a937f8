"""The watcher's state file: per followed file, how far it was read and how many spans it made.

One small JSON document (``{"version": 1, "files": {path: {"inode", "offset", "line", "spans", "generation",
"opening", "resume"}}}``), written whole to a temporary file beside it and renamed over it, so a crash leaves
the old or the new state, never half of one. It holds paths, offsets, counts and the digest of each file's
first record (`identity.opening`: which file of its session it is, the session's `generation`, see
`telemetry.sequence`; an entry written before these two fields reads as the first file, opening unknown): no
session content. ``resume`` (absent or null until a Claude Code or Codex session's first compaction) is the
text-free audit state a session resumes from (`watch.checkpoint.ResumePoint`, about 400 bytes), checked when
it is used, not when the file is loaded: a watcher that cannot use it reads that session from its start, and
the rest of the state stands (a state file without it, from an older watcher, loads as before). A state file
that cannot be read is reported in one line and the watcher starts afresh (sessions are read
again, and spans already sent are sent again, rather than lost). Default place:
``$XDG_STATE_HOME/ctxwatch/watch.json`` (``~/.local/state/ctxwatch/watch.json``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STATE_VERSION = 1


@dataclass
class FileState:
    """How far one file was read (`offset` bytes, `line` lines), the spans its session produced in it, and which
    file of its session it is (`generation`, `opening`: `telemetry.sequence.Generation`)."""

    inode: int = 0
    offset: int = 0
    line: int = 0
    spans: int = 0
    generation: int = 0
    opening: str = ""
    resume: Any = None  # `ResumePoint.to_json()` of the epoch the session is in (checked when used), if any

    def next_file(self, inode: int = 0) -> FileState:
        """The state of another file at this path of the same session (rotated, truncated, re-created): nothing
        of it read yet, the session's file numbering kept."""
        return FileState(inode=inode, generation=self.generation, opening=self.opening)


def default_state_path(environ: Mapping[str, str] = os.environ) -> Path:
    base = environ.get("XDG_STATE_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".local" / "state")
    return Path(base) / "ctxwatch" / "watch.json"


class StateError(ValueError):
    """The state file exists but is not one this version wrote (one line, names the file)."""


def load_state(path: Path) -> dict[str, FileState]:
    """The saved state ({} when there is none yet); StateError when the file is unreadable."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise StateError(f"state file {path}: cannot be read ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != STATE_VERSION or not isinstance(doc.get("files"), dict):
        raise StateError(f"state file {path}: not a ctxwatch watch state (version {STATE_VERSION})")
    out = {}
    for name, entry in doc["files"].items():
        try:
            out[name] = FileState(**{k: _count(entry[k]) for k in ("inode", "offset", "line", "spans")},
                                  generation=_count(entry.get("generation", 0)), opening=str(entry.get("opening", "")),
                                  resume=entry.get("resume"))
        except (AttributeError, KeyError, TypeError, ValueError):
            raise StateError(f"state file {path}: bad entry for {name}") from None
    return out


def _count(value: object) -> int:
    """A whole number as the state file keeps it; ValueError for anything else (1.5, 1e400, "7", true)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


def save_state(path: Path, files: Mapping[str, FileState]) -> None:
    """Write the state atomically (OSError when the directory cannot be written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as f:
        json.dump({"version": STATE_VERSION, "files": {name: asdict(s) for name, s in sorted(files.items())}}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
