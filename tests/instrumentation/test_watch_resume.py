"""Issue 18: a followed session resumes after its last compaction (`ctxwatch.watch.checkpoint`).

For every corpus Claude Code and Codex session and every compaction it holds, a watcher that read the file up
to a point inside the epoch that compaction starts, and a second watcher given only the first one's state (the
resume point as it went through JSON), sends after that point exactly the spans one watcher reading the whole
file sends: every attribute (figures, sequence, cycle, instance) and start time. Before the second watcher
reads, every line between the file's head (the first `HEAD_BYTES`, which names the session's agent version
and project at any start) and the compaction's record (Claude Code: its summary; Codex: the ``compacted``
record) is overwritten with same-length garbage, so one that read them again would skip lines and send other
figures. The real OpenTelemetry SDK, in memory.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from corpus_files import CORPUS, claude_code_compactions, jsonl, of_kind
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import semconv
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.watch.checkpoint import ResumeError, ResumePoint
from ctxwatch.watch.follower import Follower
from ctxwatch.watch.identity import HEAD_BYTES, ServiceLabels
from ctxwatch.watch.live import Emitter
from ctxwatch.watch.state import FileState


def epochs(path: Path) -> list[int]:
    """The line of the record that holds what each compaction left (Claude Code: its summary; Codex: the
    ``compacted`` record)."""
    records = jsonl(path)
    if path in of_kind("codex", CORPUS):
        return [n for n, r in records if r.get("type") == "compacted"]
    return [next(n for n, r in records if n > boundary and r.get("isCompactSummary") is True)
            for boundary, _ in claude_code_compactions(path)]


COMPACTING = [p for kind in ("claude_code", "codex") for p in of_kind(kind, CORPUS) if epochs(p)]


def watched(path: Path, state: FileState) -> tuple[FileState, list[tuple], list[str]]:
    """What one ``--once`` catch-up of `path` from `state` leaves: its state, its spans (name, start time,
    attributes), its notes."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    notes: list[str] = []
    follower = Follower(path, state, Emitter(MutationTelemetry(provider, capture_content=False), lambda: None),
                        ServiceLabels(), notes.append)
    follower.catch_up()
    spans = [(s.name, s.start_time, dict(s.attributes or {})) for s in exporter.get_finished_spans()]
    return follower.checkpoint(), spans, notes


@pytest.mark.parametrize("original", COMPACTING, ids=lambda p: p.name[:48])
def test_a_watcher_resumed_at_a_compaction_sends_what_one_reading_the_whole_file_sends(
        original: Path, tmp_path: Path) -> None:
    lines = original.read_bytes().splitlines(keepends=True)
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_bytes(b"".join(lines))
    _, whole, _ = watched(path, FileState())
    at = epochs(original)
    reread = original in of_kind("claude_code", CORPUS)  # a Claude Code summary is read again, a compacted record not
    for record, end in zip(at, [*at[1:], len(lines)], strict=True):
        cut = (record + end) // 2
        path.unlink()
        path.write_bytes(b"".join(lines[:cut]))
        state, first, _ = watched(path, FileState())
        made = state.spans
        point = ResumePoint.from_json(json.loads(json.dumps(state.resume)))
        before = record - 1 if reread else record  # the lines a resumed watcher does not read
        assert (point.line, point.offset, point.record) == (before, len(b"".join(lines[:before])),
                                                            len(b"".join(lines[:record - 1])))
        assert first == whole[:made]
        head = next((n for n in range(record) if len(b"".join(lines[:n])) >= HEAD_BYTES), record - 1)
        with path.open("r+b") as f:  # garbage before the record, the rest of the session after the cut
            f.seek(len(b"".join(lines[:head])))
            f.write(b"".join(b"#" * (len(line) - 1) + b"\n" for line in lines[head:record - 1]))
            f.seek(0, 2)
            f.write(b"".join(lines[cut:]))
        resumed, rest, notes = watched(path, state)
        assert notes == []
        assert rest == whole[made:]
        assert resumed.spans == len(whole)


def test_a_resume_point_that_cannot_be_used_is_one_note_and_the_session_is_read_from_its_start(
        tmp_path: Path) -> None:
    original = COMPACTING[0] if COMPACTING else pytest.skip("no corpus session with a compaction")
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_bytes(original.read_bytes())
    whole_state, whole, _ = watched(path, FileState())
    good, read = whole_state.resume, (whole_state.inode, whole_state.offset, whole_state.line, whole_state.spans)
    for bad, why in (({**good, "v": 99}, "not one of version 1"), ({**good, "spans": -1}, "'spans' is malformed"),
                     ({**good, "detector": {"v": 3}}, "detector state"), ("junk", "not one of version 1"),
                     ({**good, "record": good["record"] + 1}, "is not the compaction it was"),
                     ({**good, "format": "codex"}, "of a codex session, not claude_code")):
        state, spans, notes = watched(path, FileState(*read, resume=bad))
        (note,) = notes
        assert why in note and note.startswith(f"{path}: cannot resume at its last compaction (")
        assert note.endswith("reading it again from its start")
        assert (spans, state.spans) == ([], len(whole))  # read again, every span counted, none sent twice
        assert state.resume == good  # the compaction read again leaves a good one
    state, spans, notes = watched(path, FileState(whole_state.inode, 0, 0, 0, resume=good))  # a state from another file
    assert [n.split(" (")[1] for n in notes] == ["the resume point is past what was read); reading it again from"
                                                 " its start"]
    assert spans == whole and state.resume == good
    with pytest.raises(ResumeError, match="'after' is malformed"):
        ResumePoint.from_json({**good, "after": 7})


def test_another_file_written_over_the_same_inode_starts_afresh_with_no_stale_resume_point(tmp_path: Path) -> None:
    """Review of the merge: a file that opens with another record than the one read before (a session continued
    in it) kept the old file's offset and resume point when its inode was the same and it was longer, so every
    start noted a resume point it could not use, and the stale offset was saved again."""
    if len(COMPACTING) < 2:
        pytest.skip("fewer than two corpus sessions with a compaction")
    first, second = sorted(COMPACTING[:2], key=lambda p: p.stat().st_size)
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_bytes(first.read_bytes())
    state, _, _ = watched(path, FileState())
    assert state.resume is not None
    inode = path.stat().st_ino
    path.write_bytes(second.read_bytes())  # the same inode, longer than what was read
    assert path.stat().st_ino == inode
    fresh = tmp_path / "fresh" / path.name
    fresh.parent.mkdir()
    fresh.write_bytes(second.read_bytes())
    alone, spans_alone, _ = watched(fresh, FileState())
    continued, spans, notes = watched(path, state)
    assert [n.split(": ", 1)[1] for n in notes] == [
        "opens with another record than the file read before: the session continued in it, numbered as its file 2"]
    assert (continued.generation, continued.spans, continued.offset) == (1, alone.spans, alone.offset)
    assert [(name, start) for name, start, _ in spans] == [(name, start) for name, start, _ in spans_alone]


def test_a_resumed_session_keeps_the_identity_it_was_first_given_not_its_heads(tmp_path: Path) -> None:
    """The agent version and project (its service label) are kept in the state entry when the session is first
    identified, and a later start takes them from there rather than from the file's head (a record that names its
    version still labels its own spans with it); an entry without them (an older watcher's) reads them from the
    head, as before."""
    original = of_kind("claude_code", CORPUS)[0]
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_bytes(original.read_bytes())
    state, spans, _ = watched(path, FileState())
    assert state.agent_version and state.project and spans
    assert {s[2][semconv.SERVICE_NAME] for s in spans} == {state.project}
    assert {s[2][semconv.AGENT_VERSION] for s in spans} <= {state.agent_version, *(r.get("version") for _, r in
                                                                               jsonl(path))}
    kept = replace(state, spans=0, offset=0, line=0, resume=None, agent_version="9.9.9", project="kept")
    again, spans, _ = watched(path, kept)
    assert (again.agent_version, again.project) == ("9.9.9", "kept")
    assert {s[2][semconv.SERVICE_NAME] for s in spans} == {"kept"}
    assert all(s[2].get(semconv.AGENT_VERSION) for s in spans)  # each record's own, where it names one
    older, spans, _ = watched(path, replace(kept, agent_version=None, project=None))
    assert (older.agent_version, older.project) == (state.agent_version, state.project)


@pytest.mark.parametrize("original", of_kind("codex", CORPUS)[:1], ids=lambda p: p.name[:48])
def test_a_codex_compaction_without_replacement_history_leaves_no_resume_point_and_no_false_note(
        original: Path, tmp_path: Path) -> None:
    """An older Codex rollout's ``compacted`` record (its summary only, no ``replacement_history``): the history
    Codex rebuilds there depends on the records before it, so no epoch starts there — a restarted watcher reads
    the session from where it could resume (here its start), without saying the file was rewritten."""
    lines = original.read_bytes().splitlines(keepends=True)
    (record,) = epochs(original) or pytest.skip("no Codex corpus session with a compaction")
    rec = json.loads(lines[record - 1])
    del rec["payload"]["replacement_history"]
    lines[record - 1] = json.dumps(rec).encode() + b"\n"
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_bytes(b"".join(lines))
    _, whole, _ = watched(path, FileState())
    cut = (record + len(lines)) // 2
    path.write_bytes(b"".join(lines[:cut]))
    state, first, _ = watched(path, FileState())
    assert first == whole[:state.spans]
    with path.open("ab") as f:
        f.write(b"".join(lines[cut:]))
    resumed, rest, notes = watched(path, state)
    assert notes == []
    assert rest == whole[len(first):] and resumed.spans == len(whole)
    assert state.resume is None  # nothing to resume at: read from its start
