"""Issue 14: Gemini CLI chat recordings in the JSONL log shape of newer gemini-cli versions (the corpus
holds the older JSON document; see test_sessions_corpus.py). Written here in the shape gemini-cli's
chatRecordingService writes: a metadata line, one line per message record (a repeated id updates
the record), ``$rewindTo`` and a ``$set`` whose ``messages`` replace the history — how the CLI
records the history it rewrote after a chat compression (summary turns in place of old ones)."""

from __future__ import annotations

import json
from pathlib import Path

from ctxwatch.invariants.pairing import index_pairs
from ctxwatch.sessions import Mutation, Snapshot, detect_session_format, read_session

META = {"sessionId": "3c1e0a52-7d5b-4f0e-9a52-5b1f7e2d9c11", "projectHash": "ab" * 32,
        "startTime": "2026-01-02T10:00:00.000Z", "lastUpdated": "2026-01-02T10:00:00.000Z"}


def user(mid: str, text: str) -> dict:
    return {"id": mid, "timestamp": "2026-01-02T10:00:01.000Z", "type": "user", "content": [{"text": text}]}


def gemini(mid: str, text: str, *calls: tuple[str, str | None]) -> dict:
    record: dict = {"id": mid, "timestamp": "2026-01-02T10:00:02.000Z", "type": "gemini", "content": text,
                    "model": "gemini-2.5-pro"}
    if calls:
        record["toolCalls"] = [
            {"id": cid, "name": "read_file", "args": {"absolute_path": f"/srv/app/{cid}.py"}, "status": "success",
             "timestamp": "2026-01-02T10:00:03.000Z",
             "result": None if output is None else [
                 {"functionResponse": {"id": cid, "name": "read_file", "response": {"output": output}}}]}
            for cid, output in calls]
    return record


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def read(path: Path) -> tuple[list[Snapshot], list[Mutation]]:
    session = read_session(path)
    events = list(session)
    assert session.skipped == []
    return [e for e in events if isinstance(e, Snapshot)], [e for e in events if isinstance(e, Mutation)]


def test_log_with_tool_calls_updates_and_a_compression(tmp_path: Path) -> None:
    first_turn = gemini("g1", "Reading the deploy script.", ("read_file-1", "retry = 3  # ORD-1042"))
    summary = user("s1", "<state_snapshot>ORD-1042: retry raised to 5 in /srv/app/deploy.py</state_snapshot>")
    records = [
        META,
        user("u1", "Fix the flaky deploy of ORD-1042"),
        gemini("g1", "Reading the deploy script."),                 # the turn, then its tool call...
        first_turn,                                                 # ...added under the same id
        {"$set": {"lastUpdated": "2026-01-02T10:00:04.000Z"}},
        gemini("g2", "Raising the retry count.", ("edit-2", "ok")),
        user("u2", "Now run the tests"),
        gemini("g3", "Running them.", ("shell-3", None)),           # in flight: no result yet
        {"$set": {"messages": [summary, gemini("a1", "Got it. Thanks for the additional context!"),
                               user("u2", "Now run the tests")]}},
        gemini("g4", "Tests pass."),
    ]
    path = write(tmp_path / "session-2026-01-02T10-00-3c1e0a52.jsonl", records)
    assert detect_session_format(path) == "gemini_cli"
    snapshots, mutations = read(path)
    assert [s.line for s in snapshots] == [3, 6, 8, 10, 10] and snapshots[-1].final
    before_g3 = snapshots[2].messages
    assert [m.role for m in before_g3] == ["user", "assistant", "user", "assistant", "user", "user"]
    assert before_g3[1].call_ids == ("read_file-1",) and before_g3[2].result_ids == ("read_file-1",)
    assert index_pairs(before_g3).pairs == 2

    (compression,) = mutations
    assert (compression.kind, compression.source, compression.line) == ("compact", "gemini_cli.history", 9)
    assert compression.before[-1].call_ids == ("shell-3",)
    assert index_pairs(compression.before).pending == {"shell-3"}   # dropped before its result came
    assert [m.text for m in compression.after] == [
        "<state_snapshot>ORD-1042: retry raised to 5 in /srv/app/deploy.py</state_snapshot>",
        "Got it. Thanks for the additional context!", "Now run the tests"]
    assert snapshots[-1].messages[-1].text == "Tests pass."


def test_rewind_drops_the_history_from_the_named_message(tmp_path: Path) -> None:
    path = write(tmp_path / "session.jsonl", [
        META, user("u1", "Plan the migration"), gemini("g1", "Step one."), user("u2", "No, start over"),
        gemini("g2", "Step one again."), {"$rewindTo": "u2"}, user("u3", "Plan it for Postgres 16"),
        {"$rewindTo": "missing-id"}])
    snapshots, mutations = read(path)
    (rewind,) = mutations  # a rewind to an id that is not there changes nothing
    assert (rewind.kind, rewind.source, rewind.line) == ("prune", "gemini_cli.rewind", 6)
    assert [m.text for m in rewind.after] == ["Plan the migration", "Step one."]
    assert rewind.changed == (2, 3)
    assert [m.text for m in snapshots[-1].messages] == ["Plan the migration", "Step one.", "Plan it for Postgres 16"]


def test_notices_and_malformed_records(tmp_path: Path) -> None:
    path = write(tmp_path / "session.jsonl", [
        META, user("u1", "hello"), {"id": "i1", "type": "info", "content": "Switched model"},
        {"type": "user", "content": "no id"}, gemini("g1", "Hi.")])
    session = read_session(path)
    events = list(session)
    assert [(s.line, s.reason) for s in session.skipped] == [(4, "not a Gemini CLI message record (no string 'id')")]
    final = events[-1]
    assert isinstance(final, Snapshot) and [m.text for m in final.messages] == ["hello", "Hi."]
