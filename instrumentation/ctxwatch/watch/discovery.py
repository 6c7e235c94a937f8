"""Which session files ``ctxwatch watch`` follows: the agents' standard places, or the paths given.

- Claude Code: ``~/.claude/projects/<project>/<session id>.jsonl`` (any depth under ``projects``);
- Codex: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``;
- Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-*.json`` and ``.jsonl``.

A PATH that is a file is followed whatever its name; a directory is searched (at any depth) for
``*.jsonl`` files and Gemini CLI's ``session-*.json``.

`Places` searches again while the watcher runs, so sessions that start later are picked up, and
does it cheaply: a directory is listed again only when its modification time changed (creating,
renaming or deleting a file in it changes it; appending to a file does not), or when it was listed
less than `RACY_S` after that time (a file system that keeps coarse directory times could hide a
second change within the same tick). So a search costs one ``stat`` per directory, not a listing of
every session file (bench/bench_watch.py, "one search of the standard places").
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

STANDARD_PLACES = {".claude/projects": ("**/*.jsonl",), ".codex/sessions": ("**/rollout-*.jsonl",),
                   ".gemini/tmp": ("*/chats/session-*.json", "*/chats/session-*.jsonl")}
DIRECTORY_PATTERNS = ("**/*.jsonl", "**/session-*.json")
RACY_S = 2.0


def matches(relative: tuple[str, ...], pattern: str) -> bool:
    """Whether a path (its parts below the searched directory) matches a pattern of `Path.glob`'s kind,
    where ``**`` may only lead (any depth, the top included)."""
    parts = pattern.split("/")
    if parts[0] == "**":
        tail = parts[1:]
        return len(relative) >= len(tail) and all(map(fnmatchcase, relative[len(relative) - len(tail):], tail))
    return len(relative) == len(parts) and all(map(fnmatchcase, relative, parts))


def depth_of(patterns: Iterable[str]) -> int | None:
    """How many directory levels below the root the patterns can reach (None: any)."""
    patterns = list(patterns)
    if any(p.startswith("**") for p in patterns):
        return None
    return max(p.count("/") for p in patterns)


@dataclass(frozen=True)
class _Listing:
    """One directory as last listed: its time then, when it was listed, its subdirectories, its matches."""

    mtime_ns: int
    listed_s: float
    subdirectories: tuple[Path, ...]
    files: frozenset[Path]


class Places:
    """The session files to follow now (`search`): under `paths`, or with none the standard places of `home`."""

    def __init__(self, paths: Iterable[Path], home: Path) -> None:
        paths = [p.absolute() for p in paths]
        self.files = [p for p in paths if not p.is_dir()]
        self.roots = ([(p, DIRECTORY_PATTERNS) for p in paths if p.is_dir()] if paths else
                      [(home.absolute() / place, patterns) for place, patterns in STANDARD_PLACES.items()])
        self._listings: dict[Path, _Listing] = {}

    def search(self) -> set[Path]:
        found = {p for p in self.files if p.is_file()}
        seen: set[Path] = set()
        for root, patterns in self.roots:
            found |= self._walk(root, patterns, seen)
        if len(seen) < len(self._listings):  # directories gone: forget them
            self._listings = {d: listing for d, listing in self._listings.items() if d in seen}
        return found

    def _walk(self, root: Path, patterns: tuple[str, ...], seen: set[Path]) -> set[Path]:
        found: set[Path] = set()
        deepest = depth_of(patterns)
        stack = [(root, 0)]
        while stack:
            directory, depth = stack.pop()
            listing = self._listing(directory, root, patterns, deepest is None or depth < deepest)
            if listing is None:
                continue
            seen.add(directory)
            found |= listing.files
            stack.extend((sub, depth + 1) for sub in listing.subdirectories)
        return found

    def _listing(self, directory: Path, root: Path, patterns: tuple[str, ...], descend: bool) -> _Listing | None:
        """The directory's listing, listed again only when it may have changed; None when it is not there."""
        try:
            mtime_ns = os.stat(directory).st_mtime_ns
        except OSError:
            return None
        known = self._listings.get(directory)
        if known is not None and known.mtime_ns == mtime_ns and known.listed_s - mtime_ns / 1e9 >= RACY_S:
            return known
        listed_s, subdirectories, files = time.time(), [], set()
        prefix = directory.relative_to(root).parts
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if descend:
                            subdirectories.append(Path(entry.path))
                    elif entry.is_file() and any(matches((*prefix, entry.name), p) for p in patterns):
                        files.add(Path(entry.path))
        except OSError:
            return None
        listing = self._listings[directory] = _Listing(mtime_ns, listed_s, tuple(subdirectories), frozenset(files))
        return listing
