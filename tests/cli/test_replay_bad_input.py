"""Issue 7 "Must show", bad input: truncated or corrupt lines, unknown formats, binary and empty
files, a missing file, multi-GB files — a one-line message naming the file (and the line where
there is one), exit 2 or a reported skip, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus_files import claude_code_boundaries, jsonl, of_kind
from replay_fixtures import ctxwatch, replay_json


def compacted_claude_code(corpus: Path) -> tuple[Path, int]:
    """A Claude Code session with a compaction well inside it: (file, the boundary's line)."""
    for path in of_kind("claude_code", corpus):
        for line, _ in claude_code_boundaries(path):
            if 50 < line < len(jsonl(path)) - 100:
                return path, line
    pytest.skip("no Claude Code session in the corpus has a compaction well inside it")


def openhands_session(corpus: Path) -> Path:
    return of_kind("openhands", corpus)[0]


def problems(stderr: str) -> list[str]:
    """The lines of stderr; each must be one self-contained message, never a traceback."""
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line]


def first_lines(path: Path, n: int) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:n]


def compaction_lines(doc: dict) -> list[int]:
    return [m["line"] for m in doc["sessions"][0]["mutations"] if m["kind"] == "compact"]


def test_truncated_last_line_is_a_reported_skip_or_exit_2_with_strict(corpus: Path, tmp_path: Path) -> None:
    source, boundary = compacted_claude_code(corpus)
    cut = boundary + 86  # the line cut in half
    lines = first_lines(source, cut)
    path = tmp_path / "truncated.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2], encoding="utf-8")
    code, doc, err = replay_json(path)
    assert code == 0
    (problem,) = problems(err)
    assert problem.startswith(f"ctxwatch replay: {path}, line {cut}: skipped: truncated JSON")
    assert doc["sessions"][0]["skipped"][0]["line"] == cut
    assert boundary in compaction_lines(doc)  # the rest of the file was read
    strict = ctxwatch("replay", path, "--strict")
    assert strict.returncode == 2
    (problem,) = problems(strict.stderr)
    assert problem.startswith(f"ctxwatch replay: {path}, line {cut}: truncated JSON")


def test_corrupt_and_non_utf8_lines_are_skipped_by_line(corpus: Path, tmp_path: Path) -> None:
    lines = [line.encode() for line in first_lines(compacted_claude_code(corpus)[0], 80)]
    # two lines that carry no tool id (losing one that does would orphan its pair: a finding)
    first, second = [i for i, line in enumerate(lines) if i >= 20 and b"tool_use" not in line][:2]
    lines[first] = b'{"type": "user", "message": {"role": "user", "content": "x"}} trailing garbage'
    lines[second] = b'{"type":"user","message":{"role":"user","content":"caf\xe9"}} \xff\xfe'
    path = tmp_path / "corrupt.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    proc = ctxwatch("replay", path)
    assert proc.returncode == 0, proc.stdout
    assert problems(proc.stderr) == [
        f"ctxwatch replay: {path}, line {first + 1}: skipped: corrupt JSON (Extra data, column 63)",
        f"ctxwatch replay: {path}, line {second + 1}: skipped: not UTF-8 text"]
    assert "2 skipped" in proc.stdout


def test_a_byte_that_is_not_utf8_inside_a_tool_call_costs_no_pair(corpus: Path, tmp_path: Path) -> None:
    """Review F5: one Latin-1 byte in a ``tool_use`` record's input skipped the record, and its result then
    read as an orphaned tool id (exit 1) the file does not have. The record is read with U+FFFD in place of
    the byte: the same pairs, mutations (but for the character's size) and exit code as the intact file."""
    source = compacted_claude_code(corpus)[0]
    raw = source.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(raw) if b'"type":"tool_use"' in line.replace(b" ", b"") and b'"input"' in line)
    damaged = tmp_path / "damaged.jsonl"
    line = raw[at]
    cut = line.index(b'"input"')
    raw[at] = line[:cut] + line[cut:].replace(b'":"', b'":"\xe9', 1)  # the input's first string gets a byte
    assert raw[at] != line
    damaged.write_bytes(b"\n".join(raw))
    want_code, want, _ = replay_json(source)
    code, got, err = replay_json(damaged)
    assert (code, err) == (want_code, "")
    for key in ("tool_pairs", "skipped"):
        assert got["sessions"][0][key] == want["sessions"][0][key], key

    def shape(doc: dict) -> list[tuple]:  # one more character in one message moves sizes and distances only
        return [(m["kind"], m["line"], m["messages"], m["orphans"]) for m in doc["sessions"][0]["mutations"]]
    assert shape(got) == shape(want)


@pytest.mark.parametrize(("name", "content", "reason"), [
    ("unknown.jsonl", b'{"event": "login", "user": 7}\n{"event": "logout", "user": 7}\n',
     "unrecognised session format"),
    ("unknown.json", json.dumps({"results": [1, 2, 3]}).encode(), "unrecognised session format"),
    ("binary.jsonl", bytes(range(256)) * 64, "is a binary file"),
    ("empty.jsonl", b"", "is empty"),
    ("blank.jsonl", b"\n\n   \n", "is empty"),
    ("corrupt.traj", b'{"trajectory": [{"messages": [}\n', "corrupt JSON"),
])
def test_unreadable_files_exit_2_with_one_line(tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    proc = ctxwatch("replay", path)
    assert proc.returncode == 2
    (problem,) = problems(proc.stderr)
    assert problem.startswith(f"ctxwatch replay: {path}") and reason in problem
    assert "UNREADABLE" in proc.stdout and "(exit 2)" in proc.stdout


def test_missing_file_and_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    proc = ctxwatch("replay", missing, tmp_path)
    assert proc.returncode == 2
    assert problems(proc.stderr) == [f"ctxwatch replay: {missing}: no such file",
                                     f"ctxwatch replay: {tmp_path}: is a directory, not a session file"]


def test_one_bad_file_does_not_hide_the_good_ones(corpus: Path, tmp_path: Path) -> None:
    good = openhands_session(corpus)
    _, alone, _ = replay_json(good)
    code, doc, err = replay_json(tmp_path / "missing.jsonl", good)
    assert code == 2 and len(problems(err)) == 1
    assert [s["status"] for s in doc["sessions"]] == ["unreadable", "ok"]
    assert doc["sessions"][1]["tool_pairs"] == alone["sessions"][0]["tool_pairs"]


def test_multi_gb_sparse_file_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.truncate(4 << 30)  # 4 GiB of zeros, no disk used
    proc = ctxwatch("replay", path, timeout=60)
    assert proc.returncode == 2
    (problem,) = problems(proc.stderr)
    assert problem == f"ctxwatch replay: {path}: is a binary file, not JSON or JSONL"


def test_multi_gb_file_with_a_valid_head_skips_its_overlong_line(corpus: Path, tmp_path: Path) -> None:
    """A recording cut off and padded to 2 GiB (as a crashed writer leaves it): the readable part
    is audited, the rest is one over-long line reported as skipped; memory stays bounded."""
    source, boundary = compacted_claude_code(corpus)
    path = tmp_path / "padded.jsonl"
    path.write_text("\n".join(first_lines(source, boundary + 6)) + "\n", encoding="utf-8")
    with path.open("r+b") as f:
        f.truncate(2 << 30)
    code, doc, err = replay_json(path, timeout=300)
    assert code == 0
    (problem,) = problems(err)
    assert problem == f"ctxwatch replay: {path}, line {boundary + 7}: skipped: line longer than 67108864 bytes"
    assert boundary in compaction_lines(doc)


def test_single_document_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.traj"
    path.write_bytes(b'{"trajectory": [' + b" " * 70_000)
    with path.open("r+b") as f:
        f.truncate(300 << 20)
    proc = ctxwatch("replay", path, timeout=60)
    assert proc.returncode == 2
    (problem,) = problems(proc.stderr)
    assert problem == f"ctxwatch replay: {path}: is 300 MiB, over the 256 MiB limit for single-document formats " \
                      "(raise max_document_bytes to read it)"


@pytest.mark.parametrize(("args", "message"), [
    ([], "the following arguments are required: PATH"),
    (["x.jsonl", "--format", "word"], "invalid choice: 'word'"),
    (["x.jsonl", "--literals", "-1"], "--literals must be >= 0"),
    (["x.jsonl", "--otlp", "127.0.0.1:4318"], "--otlp expects an http:// or https:// URL"),
])
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "x.jsonl").write_text("[]\n")
    proc = ctxwatch("replay", *args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_unwritable_html_target_exits_2(corpus: Path, tmp_path: Path) -> None:
    proc = ctxwatch("replay", openhands_session(corpus), "--html", tmp_path / "no" / "such" / "dir.html")
    assert proc.returncode == 2
    (problem,) = problems(proc.stderr)
    assert problem.startswith(f"ctxwatch replay: --html {tmp_path}/no/such/dir.html: cannot write")


def test_a_file_whose_every_record_is_skipped_is_unreadable_not_healthy(tmp_path: Path) -> None:
    bad = tmp_path / "onlybad.jsonl"
    bad.write_text('[{"role": "wizard", "content": "x"}]\n[{"role": "user", "content": 123}]\n')
    proc = ctxwatch("replay", bad)
    assert proc.returncode == 2
    assert f"{bad}, line 1:" in proc.stderr and "no readable record; 2 skipped" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("forced", ["codex", "swe_agent", "openhands", "gemini_cli", "messages_jsonl"])
def test_a_forced_format_under_which_nothing_parses_exits_2(corpus: Path, forced: str) -> None:
    path, _ = compacted_claude_code(corpus)
    proc = ctxwatch("replay", path, "--format", forced)
    assert proc.returncode == 2, proc.stdout
    (problem,) = problems(proc.stderr)
    assert problem == mismatch(path, forced, "claude_code")
    assert "UNREADABLE" in proc.stdout and "(exit 2)" in proc.stdout


def mismatch(path: Path, forced: str, detected: str) -> str:
    return (f"ctxwatch replay: {path}: not a {forced} session (--format {forced}); it reads as {detected}: "
            f"leave --format out or pass --format {detected}")


@pytest.mark.parametrize("kind", ["swe_agent", "openhands", "gemini_cli"])
def test_a_jsonl_format_forced_on_a_pretty_printed_document_names_the_mismatch(corpus: Path, kind: str) -> None:
    """Review L3: a document read line by line failed at 'line 1: truncated JSON' - the file was fine, the
    format was not; the one line names the format the file reads as."""
    documents = [p for p in of_kind(kind, corpus) if p.read_bytes().lstrip()[:1] in (b"{", b"[")]
    if not documents:
        pytest.skip(f"no {kind} document in the corpus")
    for forced in ("claude_code", "codex", "messages_jsonl"):
        proc = ctxwatch("replay", documents[0], "--format", forced)
        assert proc.returncode == 2, proc.stdout
        assert problems(proc.stderr) == [mismatch(documents[0], forced, kind)]
        assert "truncated" not in proc.stderr


def test_the_help_lists_every_format_replay_reads() -> None:
    proc = ctxwatch("replay", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for name in ("Claude Code", "Codex", "SWE-agent", "OpenHands", "Gemini CLI", "JSONL of message lists"):
        assert name in text, name


def test_a_forced_format_that_fits_reads_as_detected(corpus: Path) -> None:
    path, _ = compacted_claude_code(corpus)
    _, detected, _ = replay_json(path)
    code, forced, _ = replay_json(path, "--format", "claude_code")
    assert code == 0 and forced["sessions"] == detected["sessions"]


@pytest.mark.parametrize("kind", ["swe_agent", "openhands", "gemini_cli", "claude_code", "codex"])
def test_a_file_saved_with_a_byte_order_mark_reads_as_without_one(corpus: Path, tmp_path: Path, kind: str) -> None:
    """Review F5: a JSON document re-saved by a Windows editor (UTF-8 with a BOM) was "unrecognised session
    format", exit 2, while a JSONL session with one was detected; both read as the file without it."""
    original = of_kind(kind, corpus)[0]
    marked = tmp_path / original.name
    marked.write_bytes(b"\xef\xbb\xbf" + original.read_bytes())
    code, doc, stderr = replay_json(marked)
    expected_code, expected, _ = replay_json(original)
    assert "unrecognised" not in stderr
    (read,), (read_plain,) = doc["sessions"], expected["sessions"]
    assert (read["path"], read["bytes"]) == (str(marked), read_plain["bytes"] + 3)
    own = ("path", "bytes", "loop_id")  # a file recording no session id has a loop id named after its bytes
    assert code == expected_code
    assert {k: v for k, v in read.items() if k not in own} == {k: v for k, v in read_plain.items() if k not in own}


@pytest.mark.parametrize("small", [True, False])  # smaller than the 64 KiB sniffed, and larger
def test_garbage_appended_costs_only_its_lines_whatever_the_file_size(corpus: Path, tmp_path: Path,
                                                                     small: bool) -> None:
    source, _ = compacted_claude_code(corpus)
    lines, size = [], 0
    for line in source.read_bytes().splitlines(keepends=True):
        if (small and size + len(line) > 32 * 1024 and len(lines) >= 3) or (not small and size > 256 * 1024):
            break
        lines.append(line)
        size += len(line)
    head = b"".join(lines)
    assert (len(head) < 64 * 1024) == small
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(head)
    dirty = tmp_path / "dirty.jsonl"
    dirty.write_bytes(head + b"\x00\x01\x02 garbage \xff\xfe\n" + bytes(range(256)).replace(b"\n", b"") + b"\n")
    _, want, _ = replay_json(clean)
    code, got, err = replay_json(dirty)
    assert code == want["summary"]["exit_code"] and want["sessions"][0]["status"] == "ok"
    assert [(s["line"], s["reason"]) for s in got["sessions"][0]["skipped"]] == [
        (len(lines) + 1, "not UTF-8 text"), (len(lines) + 2, "not UTF-8 text")]
    for key in ("tool_pairs", "mutations", "steps", "messages"):
        assert got["sessions"][0][key] == want["sessions"][0][key]
    assert len(problems(err)) == 2


def test_truncated_line_names_the_column_where_it_ends(tmp_path: Path) -> None:
    record = json.dumps({"type": "user", "sessionId": "s", "uuid": "u1", "parentUuid": None,
                         "message": {"role": "user", "content": "caf\u00e9 \u2014 d\u00e9j\u00e0 vu, " * 5}},
                        ensure_ascii=False)
    cut = record[: record.index("vu") + 1]  # inside the string, after multi-byte characters
    path = tmp_path / "cut.jsonl"
    path.write_text(record + "\n" + cut, encoding="utf-8")
    code, doc, _ = replay_json(path)
    (skip,) = doc["sessions"][0]["skipped"]
    column = len(cut) + 1  # just past its last character
    assert skip == {"where": "line 2", "line": 2, "reason": f"truncated JSON (Unterminated string, column {column})"}


def test_terminal_escapes_from_a_session_never_reach_the_terminal(tmp_path: Path) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\x1b[31m\u202e"
    records = [
        {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
         "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s", "message": {
            "id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{hostile}", "name": "Bash",
                                                          "input": {}}]}},
        {"type": "assistant", "uuid": "a2", "parentUuid": "a1", "sessionId": "s", "message": {
            "id": "m2", "role": "assistant", "content": [{"type": "text", "text": "moving on"}]}},
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None, "sessionId": "s",
         "compactMetadata": {"trigger": hostile, "preTokens": 5}},
        {"type": "user", "uuid": "s1", "parentUuid": "b1", "sessionId": "s", "isCompactSummary": True,
         "message": {"role": "user", "content": f"summary {hostile}"}},
        {"type": "user", "uuid": "x1", "parentUuid": "s1", "sessionId": "s",
         "message": {"role": hostile, "content": "x"}},
    ]
    path = tmp_path / f"evil{hostile}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    proc = ctxwatch("replay", path)
    assert proc.returncode == 1  # the call cut off by the next turn is unpaired
    for stream in (proc.stdout, proc.stderr):
        assert not any(c in stream for c in "\x1b\x07\u202e"), stream
    assert "\\x1b]0;owned\\x07\\x1b[2J" in proc.stdout and "\\u202e" in proc.stdout
    assert "\\x1b" in proc.stderr  # the skipped record's reason names the role, escaped
