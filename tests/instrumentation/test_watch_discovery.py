"""Issue 18, discovery of ``ctxwatch watch``: the session files of the agents' standard places (the
same files `Path.glob` finds with the documented patterns), found again by listing only the
directories whose time changed, so sessions that start while the watcher runs are picked up."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ctxwatch.watch.discovery import DIRECTORY_PATTERNS, RACY_S, STANDARD_PLACES, Places, matches

SESSION = "0b7cbb4f-6a2e-4a57-9d55-5f3e8d5a6c11"


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n", encoding="utf-8")
    return path


AN_HOUR_AGO = time.time() - 3600


def age(directory: Path, then: float = AN_HOUR_AGO) -> None:
    """Make `directory` look last changed at `then` (long ago: its listing is trusted and kept)."""
    os.utime(directory, (then, then))


def a_home(tmp_path: Path) -> tuple[Path, set[Path], set[Path]]:
    """A HOME with the sessions each agent would write, and files that are not sessions beside them."""
    home = tmp_path / "home"
    sessions = {touch(home / ".claude/projects/-home-dev-shop" / f"{SESSION}.jsonl"),
                touch(home / ".claude/projects/-home-dev-shop" / SESSION / "subagents/agent-1.jsonl"),
                touch(home / ".codex/sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59.jsonl"),
                touch(home / ".gemini/tmp/9f2c/chats/session-2025-12-25T12-25-301d6774.json"),
                touch(home / ".gemini/tmp/9f2c/chats/session-2026-01-02T10-00-aa.jsonl")}
    others = {touch(home / ".claude/projects/-home-dev-shop/notes.txt"),
              touch(home / ".codex/sessions/2026/02/23/history.jsonl"),
              touch(home / ".gemini/tmp/9f2c/logs.json"),
              touch(home / ".gemini/tmp/9f2c/chats/checkpoint-1.json"),
              touch(home / ".gemini/tmp/a/b/chats/session-too-deep.json"),
              touch(home / ".claude/settings.json")}
    return home, sessions, others


def test_the_standard_places_hold_what_glob_finds_with_the_documented_patterns(tmp_path: Path) -> None:
    home, sessions, _ = a_home(tmp_path)
    globbed = {p for place, patterns in STANDARD_PLACES.items() for pattern in patterns
               for p in (home / place).glob(pattern) if p.is_file()}
    assert Places([], home).search() == sessions == globbed


def test_patterns_match_as_glob_does() -> None:
    assert matches(("a.jsonl",), "**/*.jsonl") and matches(("x", "y", "a.jsonl"), "**/*.jsonl")
    assert not matches(("a.json",), "**/*.jsonl")
    assert matches(("p", "chats", "session-1.json"), "*/chats/session-*.json")
    assert not matches(("q", "p", "chats", "session-1.json"), "*/chats/session-*.json")
    assert not matches(("p", "Chats", "session-1.json"), "*/chats/session-*.json")  # case-sensitive


def test_a_session_started_later_is_found_in_an_old_directory_and_in_a_new_one(tmp_path: Path) -> None:
    home, sessions, _ = a_home(tmp_path)
    project = home / ".claude/projects/-home-dev-shop"
    for directory in (project, project.parent):
        age(directory)
    places = Places([], home)
    assert places.search() == sessions
    later = touch(project / "1b7cbb4f-6a2e-4a57-9d55-5f3e8d5a6c11.jsonl")  # changes the directory's time
    elsewhere = touch(home / ".claude/projects/-home-dev-new" / f"{SESSION}.jsonl")
    codex = touch(home / ".codex/sessions/2026/02/24/rollout-2026-02-24T09-00-00-019c8a60.jsonl")
    assert places.search() == sessions | {later, elsewhere, codex}


def test_a_directory_is_listed_again_only_when_its_time_says_it_may_have_changed(tmp_path: Path) -> None:
    home, sessions, _ = a_home(tmp_path)
    project = home / ".claude/projects/-home-dev-shop"
    age(project)
    places = Places([], home)
    assert places.search() == sessions
    hidden = touch(project / "1b7cbb4f-6a2e-4a57-9d55-5f3e8d5a6c11.jsonl")
    age(project)  # the same time as when it was listed: the listing is kept (what a search saves)
    assert hidden not in places.search()
    age(project, time.time() - RACY_S / 4)  # changed just before it was listed: within a coarse clock's tick
    assert hidden in places.search()
    assert hidden in places.search()  # listed again while racy, until RACY_S after its time


def test_deleted_files_and_directories_drop_out_and_given_paths_are_searched(tmp_path: Path) -> None:
    home, sessions, _ = a_home(tmp_path)
    places = Places([], home)
    assert places.search() == sessions
    gone = home / ".codex/sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59.jsonl"
    gone.unlink()
    for directory in (gone.parent, gone.parent.parent, gone.parent.parent.parent):
        directory.rmdir() if not any(directory.iterdir()) else None
    assert places.search() == sessions - {gone}

    one = touch(tmp_path / "elsewhere" / "any-name.log")
    tree = tmp_path / "tree"
    found = {touch(tree / "a" / "s.jsonl"), touch(tree / "session-1.json")}
    touch(tree / "other.json")
    assert Places([one, tree], home).search() == {one, *found}
    assert {p for pattern in DIRECTORY_PATTERNS for p in tree.glob(pattern)} == found
