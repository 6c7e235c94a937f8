"""Review F14: a ``compacted`` record without ``replacement_history`` (Codex CLI before it recorded one) was read
as leaving the summary alone. Codex rebuilds that history (compact.rs ``build_compacted_history``): the initial
context, the user's newest messages (up to 20,000 tokens), the summary. Built from the corpus rollout with its
replacement history dropped, as an older Codex writes the record."""

from __future__ import annotations

import json
from pathlib import Path

import corpus_files as raw
import pytest
from followed_sessions import line_by_line
from replay_fixtures import ctxwatch

from ctxwatch.sessions import Mutation, read_session
from ctxwatch.sessions.codex_compact import user_text
from ctxwatch.sessions.filed import FiledMessage
from ctxwatch.watch.live import LiveSession
from ctxwatch.watch.tail import Tail


def compacting_rollouts() -> list[Path]:
    return [p for p in raw.of_kind("codex") if any(r.get("type") == "compacted" for _, r in raw.jsonl(p))]


@pytest.fixture(params=compacting_rollouts(), ids=lambda p: p.name[:40])
def legacy(request, tmp_path) -> Path:
    """The rollout with every ``compacted`` record's replacement history dropped."""
    records = [json.loads(json.dumps(r)) for _, r in raw.jsonl(request.param)]  # raw.jsonl's records are shared
    for r in records:
        if r.get("type") == "compacted":
            r["payload"].pop("replacement_history", None)
    path = tmp_path / request.param.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_history_codex_rebuilds_keeps_the_initial_context_and_the_user_messages(legacy) -> None:
    mutation = next(e for e in read_session(legacy) if isinstance(e, Mutation) and e.kind == "compact")
    users = [m for m in mutation.before if user_text(m) is not None]
    assert users
    after = mutation.after
    assert after[-1] is mutation.summary
    kept = [m for m in after[:-1] if m.role == "user" and user_text(m) is not None]
    assert kept  # the newest, in order, each as one text part (an image part is no text Codex keeps)
    assert [m.text for m in kept] == [user_text(m) for m in users[-len(kept):]]
    assert sum(len(m.text.encode()) for m in kept) <= 4 * 20_000
    initial = after[:len(after) - 1 - len(kept)]
    assert initial and [m.digest for m in initial] == [m.digest for m in mutation.before[:len(initial)]]


def test_a_legacy_compaction_replays_as_keeping_the_user_messages(legacy) -> None:
    result = ctxwatch("replay", "--json", legacy, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    assert session["verdict"]["state"] != "contracting"
    [compaction, *_] = [m for m in session["mutations"] if m["kind"] == "compact"]
    assert compaction["messages"]["kept"] > 1 and compaction["messages"]["after"] > 1


def test_a_user_message_past_the_budget_is_cut_and_ends_the_choice(legacy, tmp_path) -> None:
    records = [json.loads(line) for line in legacy.read_text().splitlines()]
    compaction = next(i for i, r in enumerate(records) if r.get("type") == "compacted")
    last = max(i for i, r in enumerate(records[:compaction]) if r.get("type") == "response_item"
               and r["payload"].get("role") == "user")
    records[last]["payload"]["content"] = [{"type": "input_text", "text": "x" * 100_000}]
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    mutation = next(e for e in read_session(path) if isinstance(e, Mutation) and e.kind == "compact")
    [cut] = [m for m in mutation.after[:-1] if m.role == "user" and user_text(m) is not None]
    assert "tokens truncated" in cut.text and len(cut.text.encode()) < 80_100



def test_a_followed_session_reads_the_rebuilt_history_back_as_replay_reads_it(legacy, tmp_path) -> None:
    """Written one line per wait, every message is put away before the next line; a rebuilt user message is
    read back from the record it was built from (its digest checked), the same as replay reads it."""
    path = tmp_path / "followed.jsonl"
    session = LiveSession(Tail(path), "codex", line_by_line(legacy, path), lambda _note: None)
    followed = next(e for e in list(session) if isinstance(e, Mutation) and e.kind == "compact")  # read to the end
    filed = [m for m in followed.after if isinstance(m, FiledMessage)]
    assert len(filed) == len(followed.after) and not any(m.held for m in filed)
    replayed = next(e for e in read_session(legacy) if isinstance(e, Mutation) and e.kind == "compact")
    assert [m.text for m in followed.after] == [m.text for m in replayed.after]
    assert session.filing is not None and session.filing.reads > 0
