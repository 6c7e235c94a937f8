"""A followed session's memory is what the audit needs, not the text: neither the text a compaction dropped
nor that of its current buffer is held while the stream waits at the end of the file, as ``watch`` does
(measured with tracemalloc); a message whose text a measurement needs again is read back from the file
(`ctxwatch.sessions.filed`), so a session followed line by line, its text put away at every wait, sends the
very spans ``replay`` sends; a record rewritten under a put-away message is one note, and the session is read
again from its start."""

from __future__ import annotations

import json
import random
import string
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from backfill_spans import backfilled
from corpus_files import CORPUS, of_kind
from followed_sessions import follow, held_when_caught_up, line_by_line
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch.sessions import detect_session_format
from ctxwatch.sessions.filed import FiledMessage
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.watch.follower import Follower
from ctxwatch.watch.identity import ServiceLabels, file_loop_id, loop_id_for
from ctxwatch.watch.live import Emitter
from ctxwatch.watch.state import FileState

OUTPUT_CHARS = 1_000_000


def _record(kind: str, uuid: str, parent: str | None, **fields: object) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": "memory", "type": kind,
                       "uuid": uuid, **fields}) + "\n"


SAY = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}


def _turn(output: str) -> list[str]:
    """A prompt, a tool call, its result `output`, and the answer."""
    return [
        _record("user", "u1", None, message={"role": "user", "content": "List the build outputs of ORD-1042"}),
        _record("assistant", "a1", "u1", message={"id": "msg_1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls -R build"}}]}),
        _record("user", "r1", "a1", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": output}]}),
        _record("assistant", "a2", "r1", message={"id": "msg_2", **SAY}),
    ]


def _unique(chars: int) -> str:
    return "".join(random.Random(18).choices(string.ascii_letters + " \n", k=chars))


def _session(path: Path, output: str, ends_at_summary: bool) -> None:
    """A tool call whose result is `output`, a compaction, and (unless `ends_at_summary`) two short turns."""
    say = SAY
    lines = [
        *_turn(output),
        _record("system", "b1", None, subtype="compact_boundary", content="Conversation compacted",
                compactMetadata={"trigger": "auto", "preTokens": 250_000}),
        _record("user", "s1", "b1", isCompactSummary=True,
                message={"role": "user", "content": "Summary: the build outputs of ORD-1042 were listed."}),
        _record("assistant", "a3", "s1", message={"id": "msg_3", **say}),
        _record("user", "u2", "a3", message={"role": "user", "content": "Go on"}),
        _record("assistant", "a4", "u2", message={"id": "msg_4", **say}),
    ]
    path.write_text("".join(lines[:6] if ends_at_summary else lines), encoding="utf-8")


@pytest.mark.parametrize("ends_at_summary", [False, True])
def test_a_followed_session_does_not_hold_the_text_its_compaction_dropped(tmp_path, ends_at_summary):
    output = _unique(OUTPUT_CHARS)
    path = tmp_path / "session.jsonl"
    _session(path, output, ends_at_summary)
    held, auditor = held_when_caught_up(path)
    (compaction,) = auditor.audit.mutations
    assert compaction.kind == "compact" and compaction.size_before > OUTPUT_CHARS  # the text was read and measured
    assert auditor.buffer.size < 1000  # what is left after the compaction is short
    # the text itself is held twice over (its JSON string and its message): 2.1 MB when the dropped epoch was kept
    assert held < OUTPUT_CHARS / 4, f"{held} bytes held after a compaction dropped {OUTPUT_CHARS} characters"


@pytest.mark.parametrize("waits_after", ["the output", "the answer", "a prompt"])
def test_a_followed_session_does_not_hold_the_text_of_its_current_buffer(tmp_path, waits_after):
    """The output is in the buffer the session waits with (no compaction): its text is put away, whether the
    watcher waits just after the record holding it, after the answer (a message built), or after a prompt."""
    lines = _turn(_unique(OUTPUT_CHARS))
    stop = {"the output": 3, "the answer": 4, "a prompt": 5}[waits_after]
    lines.append(_record("user", "u2", "a2", message={"role": "user", "content": "Go on"}))
    path = tmp_path / "session.jsonl"
    path.write_text("".join(lines[:stop]), encoding="utf-8")
    held, auditor = held_when_caught_up(path)
    session, _ = follow(path, lambda: False)
    assert session.filing is not None and session.filing.reads == 0  # nothing read again without a mutation
    assert held < OUTPUT_CHARS / 10, f"{held} bytes held with {OUTPUT_CHARS} characters in the current buffer"


def _spans(exporter: InMemorySpanExporter) -> list[tuple]:
    return _spans_of(exporter.get_finished_spans())


def _spans_of(spans: Sequence[ReadableSpan]) -> list[tuple]:
    return [(s.name, s.start_time, dict(s.attributes or {})) for s in spans]


FOLLOWED = [p for kind in ("claude_code", "codex") for p in of_kind(kind, CORPUS)]


@pytest.mark.parametrize("original", FOLLOWED, ids=lambda p: p.name[:48])
def test_a_session_followed_line_by_line_sends_the_spans_replay_sends(original: Path, tmp_path: Path) -> None:
    """The file is written one line per wait, so every message's text is put away before the next line and
    every measurement that needs it reads it back: the spans are those of ``replay`` (every attribute and start
    time), but the one of the buffer left at the end, which watch does not send."""
    path = tmp_path / original.name
    one_more_line = line_by_line(original, path)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    loop_id = loop_id_for(original, detect_session_format(original), file_id=file_loop_id(original))  # replay's
    session, _ = follow(path, one_more_line, MutationTelemetry(provider, capture_content=False), loop_id)
    followed = _spans(exporter)
    _, replayed = backfilled(path, "a")
    replay = _spans_of(replayed)
    assert followed and followed == replay[:len(followed)] and len(followed) >= len(replay) - 1
    assert session.filing is not None
    mutations = sum(name != "ctxwatch.append" for name, _, _ in followed)
    assert session.filing.reads > 0 or not mutations  # the measurements read text back from the file


def test_a_record_rewritten_under_a_put_away_message_is_one_note_and_the_session_is_read_again(tmp_path):
    """A watcher waits with the output put away; the output's record is then rewritten (same length, other
    text) and a microcompaction clearing it is appended: clearing it needs its text, which no longer reads as
    it did. One line says so; the session is read again from its start, and what it sends after is what a
    watcher reading the rewritten file sends, none of the spans sent before sent again."""
    output = _unique(20_000).replace("\n", " ")  # swapped case, it is still its record's JSON
    lines = _turn(output)
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    follower, exporter, notes = _follower(path)
    try:
        follower.poll()
        _until(lambda: follower._waiting)
        sent = len(exporter.get_finished_spans())
        rewritten = "".join(lines).replace(output, output.swapcase())
        microcompact = _record("system", "m1", "a2", subtype="microcompact_boundary", content="cleared",
                               microcompactMetadata={"trigger": "auto", "compactedToolIds": ["toolu_01"]})
        more = [microcompact, _record("user", "u2", "m1", message={"role": "user", "content": "Go on"}),
                _record("assistant", "a3", "u2", message={"id": "msg_3", **SAY})]
        with path.open("r+", encoding="utf-8") as f:
            f.write(rewritten + "".join(more))
        follower.poll()
        _until(lambda: follower._waiting and follower.checkpoint().offset == path.stat().st_size)
    finally:
        follower.stop()
    assert notes == [f"{path}: line 3 no longer holds the message read there (the file was rewritten?); "
                     "reading it again from its start"]
    _, whole, _ = _watched_once(path)
    figures = [(name, attributes) for name, _, attributes in _spans(exporter)]  # the records carry no time
    assert figures == [(name, attributes) for name, _, attributes in whole] and 0 < sent < len(whole)
    assert any(name == "ctxwatch prune" for name, _, _ in whole[sent:])


def _follower(path: Path, state: FileState | None = None) -> tuple[Follower, InMemorySpanExporter, list[str]]:
    """A `Follower` of `path` from `state` (none), its spans kept in memory, its notes in a list."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    notes: list[str] = []
    emitter = Emitter(MutationTelemetry(provider, capture_content=False), lambda: None)
    return Follower(path, state or FileState(), emitter, ServiceLabels(), notes.append), exporter, notes


def _watched_once(path: Path, state: FileState | None = None) -> tuple[FileState, list[tuple], list[str]]:
    follower, exporter, notes = _follower(path, state)
    follower.catch_up()
    return follower.checkpoint(), _spans(exporter), notes


def _until(condition: Callable[[], bool], within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "the follower did not get there"
        time.sleep(0.01)


def test_a_session_resumed_after_a_compaction_holds_the_buffer_it_left_filed_and_reads_it_back(tmp_path):
    """A Codex session resumed after its ``compacted`` record starts with the replacement history read again
    from that record: it is filed like any message the reader reads, put away at each wait, and read back when
    the next compaction (the same record written again) measures it: the spans are those of one watcher
    reading the whole file, and nothing is noted."""
    original = next((p for p in of_kind("codex", CORPUS) if b'"type":"compacted"' in p.read_bytes()), None)
    if original is None:
        pytest.skip("no corpus Codex session with a compacted record")
    lines = original.read_bytes().splitlines(keepends=True)
    compacted = next(i for i, line in enumerate(lines) if b'"type":"compacted"' in line)
    lines.append(lines[compacted])
    path = tmp_path / "11111111-2222-4333-8444-555555555555.jsonl"
    path.write_bytes(b"".join(lines))
    _, whole, _ = _watched_once(path)
    cut = (compacted + len(lines)) // 2
    path.unlink()
    path.write_bytes(b"".join(lines[:cut]))
    state, first, _ = _watched_once(path)
    made = state.spans  # the follower changes its state in place
    assert state.resume is not None and first == whole[:made]
    follower, exporter, notes = _follower(path, state)
    held: list[bool] = []
    try:
        for at in range(cut, len(lines), 50):
            with path.open("ab") as f:
                f.write(b"".join(lines[at:at + 50]))
            follower.poll()
            _until(lambda: follower._waiting and follower.checkpoint().offset == path.stat().st_size)
            buffer = follower._backfill.current.messages if follower._backfill is not None else ()
            held.extend(not isinstance(m, FiledMessage) or m.held for m in buffer)
    finally:
        follower.stop()
    assert notes == []
    assert _spans(exporter) == whole[made:] and any(name == "ctxwatch compact" for name, _, _ in whole[made:])
    assert held and not any(held)  # every message of the buffer was filed, and put away while waiting
