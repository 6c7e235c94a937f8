"""Which session files ``ctxwatch watch`` follows: the agents' standard places, or the paths given.

- Claude Code: ``~/.claude/projects/<project>/<session id>.jsonl`` (any depth under ``projects``);
- Codex: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``;
- Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.json`` and ``.jsonl``.

A PATH that is a file is followed whatever its name; a directory is searched (at any depth) for
``*.jsonl`` files and Gemini CLI's ``session-*.json``. Discovery runs again while the watcher
runs, so sessions that start later are picked up.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

STANDARD_PLACES = ((".claude/projects", "**/*.jsonl"), (".codex/sessions", "**/rollout-*.jsonl"),
                   (".gemini/tmp", "*/chats/session-*.json"), (".gemini/tmp", "*/chats/session-*.jsonl"))
DIRECTORY_PATTERNS = ("**/*.jsonl", "**/session-*.json")


def standard_files(home: Path) -> Iterator[Path]:
    """The session files in the agents' standard places under `home`."""
    for place, pattern in STANDARD_PLACES:
        root = home / place
        if root.is_dir():
            yield from (p for p in root.glob(pattern) if p.is_file())


def given_files(paths: Iterable[Path]) -> Iterator[Path]:
    """The files named, and the session files under the directories named (missing paths give nothing)."""
    for path in paths:
        if path.is_dir():
            for pattern in DIRECTORY_PATTERNS:
                yield from (p for p in path.glob(pattern) if p.is_file())
        elif path.is_file():
            yield path


def discover(paths: Iterable[Path], home: Path) -> set[Path]:
    """Every file to follow now: those under `paths`, or with no path the standard places under `home`."""
    paths = list(paths)
    found = given_files(paths) if paths else standard_files(home)
    return {p.absolute() for p in found}
