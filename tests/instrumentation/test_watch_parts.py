"""Issue 18, the parts of ``ctxwatch watch`` one at a time: the tail of a file being written (a
half-written line waits for its newline, an over-long line is reported and not kept, a resumed tail
goes on from its offset), the identity of corpus sessions of each agent, the bounded service label,
the state file, and recorded times on the spans of ``replay --otlp`` (the real SDK, in memory): Claude
Code records' ``timestamp``; Gemini CLI documents' message ``timestamp``, else ``startTime``/``lastUpdated``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from backfill_spans import backfilled
from corpus_files import document, jsonl, of_kind

from ctxwatch import semconv
from ctxwatch.sessions.session import recorded_time_ns
from ctxwatch.watch.identity import OTHER, ServiceLabels, identify, identify_file, loop_id_for
from ctxwatch.watch.state import FileState, StateError, load_state, save_state
from ctxwatch.watch.tail import Tail


def test_a_half_written_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": ')
    tail = Tail(path)
    assert list(tail.lines()) == [(1, b'{"a": 1}\n')]
    assert (tail.offset, tail.line) == (9, 1)
    assert list(tail.lines()) == []  # still half-written
    with path.open("ab") as f:
        f.write(b'2}\n\n{"c": 3}\n')
    assert list(tail.lines()) == [(2, b'{"b": 2}\n'), (3, b"\n"), (4, b'{"c": 3}\n')]
    resumed = Tail(path, offset=9, line=1)
    assert [n for n, _ in resumed.lines()] == [2, 3, 4]


def test_an_over_long_line_is_handed_out_as_none_and_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * 5000 + b"\n" + b'{"c": 3}\n')
    tail = Tail(path, max_line_bytes=100)
    assert list(tail.lines()) == [(1, b'{"a": 1}\n'), (2, None), (3, b'{"c": 3}\n')]
    assert tail.offset == path.stat().st_size


@pytest.mark.parametrize("fmt, agent", [("claude_code", "claude-code"), ("codex", "codex"),
                                         ("gemini_cli", "gemini-cli")])
def test_every_corpus_session_of_the_three_agents_is_named_from_its_records(corpus: Path, fmt: str,
                                                                            agent: str) -> None:
    files = of_kind(fmt, corpus)
    if not files:
        pytest.skip(f"no {fmt} session in the corpus")
    for path in files:
        records = [r for _, r in jsonl(path)][:50] or [json.loads(path.read_text())]
        identity = identify(path, fmt, records)
        assert identity.agent == agent
        assert identity.loop_id.startswith(f"{agent}-") and len(identity.loop_id) > len(agent) + 1
        assert identity.project and len(identity.project) <= 64
        assert identify_file(path, fmt) == identity  # read from the file's first 64 KiB only, as replay and watch do
        assert loop_id_for(path, fmt) == identity.loop_id
        if fmt == "codex":
            meta = next(r["payload"] for r in records if r.get("type") == "session_meta")
            assert identity.loop_id == f"codex-{meta['id']}"
            assert identity.version == meta.get("cli_version")
        if fmt == "gemini_cli":  # a chat document longer than the head still names its session first
            recorded = next((r["sessionId"] for r in records if "sessionId" in r), None)
            assert recorded is None or identity.loop_id == f"gemini-cli-{recorded}"
        if fmt == "claude_code":  # corpus names are not session ids: the records' sessionId is used
            assert identity.loop_id == "claude-code-" + next(r["sessionId"] for r in records if "sessionId" in r)
            assert identity.version == next(r["version"] for r in records if "version" in r)


def test_service_labels_are_bounded_or_fixed() -> None:
    labels = ServiceLabels(max_services=2)
    assert [labels.label(p) for p in ("shop", "api", "shop", "infra")] == ["shop", "api", "shop", OTHER]
    assert ServiceLabels("team-a").label("anything") == "team-a"


def test_the_state_file_round_trips_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "watch.json"
    resume = {"v": 1, "offset": 40, "line": 1, "spans": 2}  # kept as written: checked when a session resumes
    save_state(path, {"/a.jsonl": FileState(inode=7, offset=100, line=3, spans=5), "/b.jsonl": FileState(
        8, 100, 3, 5, resume=resume)})
    assert load_state(path) == {"/a.jsonl": FileState(7, 100, 3, 5), "/b.jsonl": FileState(8, 100, 3, 5, resume=resume)}
    doc = json.loads(path.read_text())
    del doc["files"]["/b.jsonl"]["resume"]  # as an older watcher wrote it
    path.write_text(json.dumps(doc))
    assert load_state(path)["/b.jsonl"] == FileState(8, 100, 3, 5)
    assert load_state(tmp_path / "none.json") == {}
    save_state(path, {"/a.jsonl": FileState(7, 100, 3, 5, generation=2, opening="0123456789abcdef")})
    assert load_state(path)["/a.jsonl"] == FileState(7, 100, 3, 5, 2, "0123456789abcdef")
    path.write_text('{"version": 1, "files": {"/a.jsonl": {"inode": 7, "offset": 1, "line": 1, "spans": 1}}}')
    assert load_state(path) == {"/a.jsonl": FileState(7, 1, 1, 1)}  # written before generations: the first file
    path.write_text("{not json")
    with pytest.raises(StateError, match="state file .*watch.json: cannot be read"):
        load_state(path)
    for value in ("1e400", "1.5", '"7"', "true"):  # 1e400 reads as inf, which int() refuses with OverflowError
        entry = '{"inode": 7, "offset": ' + value + ', "line": 1, "spans": 1}'
        path.write_text('{"version": 1, "files": {"/a.jsonl": ' + entry + "}}")
        with pytest.raises(StateError, match="state file .*watch.json: bad entry for /a.jsonl"):
            load_state(path)


def test_recorded_timestamps_are_read_to_the_microsecond() -> None:
    assert recorded_time_ns("2026-02-11T21:41:40.277Z") == 1770846100277000000
    assert recorded_time_ns("2026-02-11T21:41:40") is None  # no time zone: not a recorded instant
    assert recorded_time_ns(1770846100) is None


def test_replay_spans_carry_the_time_recorded_in_the_file(corpus: Path) -> None:
    path = next(p for p in of_kind("claude_code", corpus) if any(r.get("subtype") == "compact_boundary"
                                                                for _, r in jsonl(p)))
    audit, spans = backfilled(path, "claude-code", "2.1.39")
    stamps = {recorded_time_ns(r["timestamp"]) for _, r in jsonl(path) if "timestamp" in r}
    assert spans and all(s.start_time == s.end_time and s.end_time in stamps for s in spans)
    compactions = [s for s in spans if s.attributes[semconv.MUTATION_KIND] == "compact"]
    lines = dict(jsonl(path))
    assert [s.end_time for s in compactions] == [recorded_time_ns(lines[m.line]["timestamp"])
                                                for m in audit.mutations if m.kind == "compact"]
    # the version of the records up to each span (Claude Code writes it on every record), not the one given
    assert {s.attributes["gen_ai.agent.version"] for s in spans} == {r["version"] for _, r in jsonl(path)
                                                                     if "version" in r} != {"2.1.39"}


def gemini_documents(corpus: Path) -> list[Path]:
    picked = [p for p in of_kind("gemini_cli", corpus) if isinstance(document(p), dict)]
    if not picked:
        pytest.skip("no corpus Gemini CLI .json chat document")
    return picked


def test_gemini_cli_document_spans_carry_the_time_of_the_response_they_precede(corpus: Path) -> None:
    path = gemini_documents(corpus)[0]
    messages = document(path)["messages"]
    _, spans = backfilled(path, "gemini-cli")
    responses = [recorded_time_ns(m.get("timestamp")) for m in messages if m.get("type") == "gemini"]
    times = [s.end_time for s in spans]
    assert spans and all(s.start_time == s.end_time for s in spans)
    assert set(times) <= set(responses) and times == sorted(times)  # as recorded, in order, not when replayed


def test_a_gemini_cli_document_without_message_times_is_timed_at_its_start(corpus: Path, tmp_path: Path) -> None:
    doc = dict(document(gemini_documents(corpus)[0]))
    doc["messages"] = [{k: v for k, v in m.items() if k != "timestamp"} for m in doc["messages"]]
    path = tmp_path / "session-untimed.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _, spans = backfilled(path, "gemini-cli")
    assert spans and {s.end_time for s in spans} == {recorded_time_ns(doc["startTime"])}
    del doc["startTime"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    _, spans = backfilled(path, "gemini-cli")
    assert spans and {s.end_time for s in spans} == {recorded_time_ns(doc["lastUpdated"])}
