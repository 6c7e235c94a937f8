"""Issue 18: ``ctxwatch watch`` following session files as an agent writes them, exporting to a real
monitor subprocess (``python -m ctxwatch_monitor --port 0 --state :memory:``) over OTLP/HTTP on 127.0.0.1.

The session is a real corpus Claude Code session (picked because it holds compactions and a
``microcompact_boundary``), written into a temporary HOME line by line by the test while the
watcher runs; the monitor's per-loop figures are compared with ``ctxwatch replay`` on the finished
file, the cycle times with the timestamps recorded in the file, the compaction counter's version label
and the tokens-before histogram with the version and ``preTokens`` the file records. Each compaction and
microcompaction must reach the monitor while the session is still being written, within `ARRIVAL_BOUND_S`
of its line being written: a bound generous enough for a loaded machine (a liveness check, not a latency figure — the
issue's 2 s is measured by bench/bench_watch.py, "pickup").
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePath

import pytest
from corpus_files import claude_code_compactions, claude_code_message_records, claude_code_microcompacts, jsonl, of_kind
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from replay_fixtures import claude_code_lines, ctxwatch, loop_detail, replay_json

from ctxwatch.demo.monitor_process import MonitorClient
from ctxwatch.telemetry.sequence import recorded_instance
from ctxwatch.watch.identity import HEAD_BYTES

DEADLINE_S = 180.0
ARRIVAL_BOUND_S = 30.0


def compacting_session(corpus: Path) -> Path:
    """A real Claude Code session with at least one compaction and one microcompaction."""
    picked = [p for p in of_kind("claude_code", corpus) if claude_code_compactions(p) and claude_code_microcompacts(p)]
    if not picked:
        pytest.skip("no corpus Claude Code session with a compaction and a microcompact_boundary")
    return picked[0]


@dataclass(frozen=True)
class Resumable:
    """A real Claude Code session with two compactions or more, to be written as `target` in a temporary
    HOME: its `lines`, the line of its first compaction's summary, and `cut`, a line inside the epoch that
    compaction starts (before the second)."""

    home: Path
    project: Path
    target: Path
    state: Path
    lines: list[str]
    summary: int
    cut: int


def resumable(corpus: Path, tmp_path: Path, session: str) -> Resumable:
    for path in of_kind("claude_code", corpus):
        boundaries = [n for n, _ in claude_code_compactions(path)]
        if len(boundaries) >= 2:
            summary = next(n for n, r in jsonl(path) if n > boundaries[0] and r.get("isCompactSummary") is True)
            home, project = claude_home(tmp_path)
            return Resumable(home, project, project / f"{session}-2222-4333-8444-555555555555.jsonl",
                             tmp_path / "state.json", lines_of(path), summary, (summary + boundaries[1]) // 2)
    pytest.skip("no corpus Claude Code session with two compactions")


def garble(path: Path, upto: int) -> None:
    """Overwrite the lines of `path` between its head (the first `HEAD_BYTES`, which name the session's agent
    version and project at any start) and byte `upto` in place with lines of the same lengths that hold no JSON:
    what a watcher reads of them again is skipped, and the session's figures change."""
    with path.open("r+b") as f:
        data = f.read(upto)
        start = data.find(b"\n", HEAD_BYTES) + 1
        assert 0 < start < upto, "the session has nothing to garble between its head and its summary"
        f.seek(start)
        f.write(b"\n".join(b"#" * len(line) for line in data[start:].split(b"\n")))


def claude_home(tmp_path: Path) -> tuple[Path, Path]:
    """A temporary HOME and the Claude Code project directory in it."""
    home = tmp_path / "home"
    project = home / ".claude" / "projects" / "-home-dev-shop"
    project.mkdir(parents=True)
    return home, project


def session_id(path: Path) -> str:
    return next(r["sessionId"] for _, r in claude_code_message_records(path) if isinstance(r.get("sessionId"), str))


class Watch:
    """``ctxwatch watch`` as a subprocess against a temporary HOME; stderr kept in a file."""

    def __init__(self, home: Path, url: str, state: Path, *args: str) -> None:
        self.log = (home / f"watch-{time.monotonic_ns()}.log").open("w+")
        cmd = [sys.executable, "-m", "ctxwatch.cli", "watch", "--otlp", url, "--state", str(state), "--poll", "0.05",
               "--rescan", "0.1", "--checkpoint", "0.2", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log,
                                     env={**os.environ, "HOME": str(home)})

    def stop(self, how: signal.Signals = signal.SIGTERM) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(how)
        code = self.proc.wait(timeout=120)
        self.log.seek(0)
        return code, self.log.read()


def lines_of(path: Path) -> list[str]:
    return [line if line.endswith("\n") else line + "\n" for line in path.read_text(encoding="utf-8").splitlines()]


def write_slowly(target: Path, lines: list[str], split_at: set[int] = frozenset(),
                 written: dict[int, float] | None = None, before: Callable[[int], None] = lambda number: None) -> None:
    """Append `lines` one by one as an agent would (flushed, a short pause); the lines numbered in
    `split_at` are written in two halves with a pause between (a half-written line), each after
    `before(number)` returns, and the moment each of them is complete goes into `written` (monotonic
    seconds by line number)."""
    with target.open("a", encoding="utf-8") as f:
        for number, line in enumerate(lines, 1):
            if number in split_at:
                before(number)
                f.write(line[: len(line) // 2])
                f.flush()
                time.sleep(0.3)
                line = line[len(line) // 2:]
            f.write(line)
            f.flush()
            if written is not None and number in split_at:
                written[number] = time.monotonic()
            time.sleep(0.0005)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def state_of(state: Path, path: Path) -> dict:
    try:
        return json.loads(state.read_text())["files"].get(str(path), {})
    except (FileNotFoundError, ValueError):
        return {}


def accepted_spans(client: MonitorClient) -> float:
    with urllib.request.urlopen(client.url + "/metrics", timeout=10) as resp:  # noqa: S310 - loopback
        text = resp.read().decode()
    match = re.search(r"^ctxwatch_monitor_spans_accepted_total (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def metric_samples(client: MonitorClient) -> list[Sample]:
    """Every sample of the monitor's /metrics."""
    with urllib.request.urlopen(client.url + "/metrics", timeout=10) as resp:  # noqa: S310 - loopback
        text = resp.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def recorded_s(path: Path, line: int) -> float:
    record = dict(jsonl(path))[line]
    return datetime.fromisoformat(record["timestamp"]).timestamp()


def history_resolution(at: float, first_seen: float) -> float:
    """How exactly the monitor's history keeps a time: a float32 offset from when it first saw the loop
    (about a second for a session recorded months ago), or a millisecond."""
    return max(1e-3, abs(at - first_seen) * 2.0 ** -23)


def cycles_of(session: dict) -> list[dict]:
    """The replay's mutations that are rewrite cycles of the alarm (a microcompaction, a rewind is none)."""
    return [m for m in session["mutations"] if m["cycle"] is not None]


def assert_matches_replay(detail: dict, session: dict) -> None:
    rewrites = [c for c in detail["history"] if c["kind"] != "append"]
    assert [c["kind"] for c in rewrites] == [m["kind"] for m in session["mutations"]]
    assert detail["cycles"] == len(cycles_of(session))
    assert detail["state"] == session["verdict"]["state"]
    for cycle, m in zip(rewrites, session["mutations"], strict=True):
        assert cycle["cycle"] == m["cycle"]
        if m["cycle"] is None:  # no hash distance on the span, as a live guard's of the same change
            assert cycle["d"] is None
        else:
            assert cycle["d"] == pytest.approx(m["hash_distance"], abs=1e-6)
        assert cycle["literals_before"] == m["literals"]["before"]
        if m["literals"]["lost"] is not None:
            assert cycle["literals_lost"] == m["literals"]["lost"]


def test_a_claude_code_session_written_live_reaches_the_monitor_as_replay_sees_it(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    original = compacting_session(corpus)
    home, project = claude_home(tmp_path)
    target = project / f"{session_id(original)}.jsonl"
    loop_id = f"claude-code-{session_id(original)}"
    lines = lines_of(original)
    marks = {n for n, _ in claude_code_compactions(original) + claude_code_microcompacts(original)}

    _, doc, _ = replay_json(original)  # what the finished file holds (the same bytes as `target` will)
    (expected,) = doc["sessions"]
    written: dict[int, float] = {}
    arrived: list[float] = []  # monotonic time at which the monitor first held cycle 1, 2, ...
    expected_cycles = cycles_of(expected)
    # the cycles the monitor holds once a mark is there (a microcompaction, no cycle, adds none)
    cycle_of = {m["line"]: sum(c["line"] <= m["line"] for c in expected_cycles) for m in expected["mutations"]}

    def after_the_previous_mark_arrived(number: int) -> None:
        """The agent goes on only once the last mark is at the monitor (or ARRIVAL_BOUND_S passed): a
        watcher that emitted only at the end of the file, or at its shutdown, fails below."""
        previous = [line for line in written if line < number]
        deadline = time.monotonic() + ARRIVAL_BOUND_S
        while previous and len(arrived) < cycle_of[max(previous)] and time.monotonic() < deadline:
            time.sleep(0.05)

    writer = threading.Thread(target=write_slowly,
                              args=(target, lines, marks, written, after_the_previous_mark_arrived))

    def count_arrivals() -> bool:
        cycles = (loop_detail(monitor.url, loop_id) or {}).get("cycles", 0)
        arrived.extend([time.monotonic()] * (cycles - len(arrived)))
        return cycles == len(expected_cycles) and not writer.is_alive()

    watch = Watch(home, monitor.url, tmp_path / "state.json")  # started before the session exists
    try:
        writer.start()
        wait_for(count_arrivals, "every mutation at the monitor")
    finally:
        writer.join()
        code, stderr = watch.stop()
    assert "Traceback" not in stderr and code in (0, 1), stderr
    _, doc, _ = replay_json(target)
    (session,) = doc["sessions"]
    assert session["mutations"] == expected["mutations"]
    late = {m["line"]: round(at - written[m["line"]], 1) for m, at in zip(cycles_of(session), arrived, strict=True)
            if m["line"] in marks and at - written[m["line"]] > ARRIVAL_BOUND_S}
    assert not late, f"reached the monitor long after their line was written (line: seconds): {late}"

    detail = loop_detail(monitor.url, loop_id)
    assert detail["agent"] == "claude-code"
    first_cwd = next(r["cwd"] for _, r in jsonl(original) if isinstance(r.get("cwd"), str))
    assert detail["service"] == PurePath(first_cwd).name
    assert_matches_replay(detail, session)
    marked = [m for m in session["mutations"] if m["line"] in marks]
    assert {m["line"] for m in marked} == marks  # every compaction and microcompaction, no other
    rewrites = [c for c in detail["history"] if c["kind"] != "append"]
    for cycle, m in zip(rewrites, session["mutations"], strict=True):
        recorded = recorded_s(target, m["line"])  # as recorded in the file, not when it was written here
        assert cycle["time"] == pytest.approx(recorded, abs=history_resolution(recorded, detail["first_seen"]))
    # issue 18: the compaction counter by the recorded version, the histogram of the recorded preTokens
    samples = metric_samples(monitor)
    versions = {s.labels["agent_version"] for s in samples if s.name == "ctxwatch_mutations_total" and s.value}
    assert versions == {next(r["version"] for _, r in jsonl(original) if isinstance(r.get("version"), str))}
    tokens = {s.labels["kind"]: s.value for s in samples if s.name == "ctxwatch_rewrite_tokens_before_sum"}
    recorded_tokens: dict[str, int] = {}
    for m in session["mutations"]:
        if m["pre_tokens"] is not None:
            recorded_tokens[m["kind"]] = recorded_tokens.get(m["kind"], 0) + m["pre_tokens"]
    assert recorded_tokens and tokens == recorded_tokens


def watch_first_part(monitor: MonitorClient, home: Path, state: Path, target: Path, lines: list[str],
                     how: signal.Signals = signal.SIGTERM) -> None:
    """Write `lines` to `target`, watch them until read and checkpointed, and stop the watcher with `how`."""
    target.write_text("".join(lines), encoding="utf-8")
    watch = Watch(home, monitor.url, state)
    try:
        wait_for(lambda: state_of(state, target).get("line") == len(lines) and accepted_spans(monitor) > 0,
                 "the first part read and checkpointed")
    finally:
        code, stderr = watch.stop(how)
    assert code in (0, 1) and "Traceback" not in stderr, stderr


def watch_the_rest(monitor: MonitorClient, home: Path, state: Path, target: Path, lines: list[str], start: int) -> str:
    """Write `lines` from `start` on to `target` slowly while a restarted watcher reads them to the end; its stderr."""
    write_slowly(target, lines[start:])
    watch = Watch(home, monitor.url, state)
    try:
        wait_for(lambda: state_of(state, target).get("line") == len(lines), "the rest read and checkpointed")
    finally:
        code, stderr = watch.stop()
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    return stderr


def test_a_restart_in_the_middle_of_a_file_neither_loses_nor_repeats_a_span(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    original = compacting_session(corpus)
    home, project = claude_home(tmp_path)
    lines = lines_of(original)
    half = claude_code_compactions(original)[0][0]  # stop between the boundary and its summary
    target = project / "11111111-2222-4333-8444-555555555555.jsonl"
    state = tmp_path / "state.json"

    watch_first_part(monitor, home, state, target, lines[:half], signal.SIGINT)  # Ctrl-C: as SIGTERM
    first_spans = state_of(state, target)["spans"]
    assert accepted_spans(monitor) == first_spans

    watch_the_rest(monitor, home, state, target, lines, half)
    restarted = state_of(state, target)["spans"]
    assert restarted > first_spans
    assert_sent_as_once(monitor, tmp_path, project, lines, target, restarted)


def assert_sent_as_once(monitor: MonitorClient, tmp_path: Path, project: Path, lines: list[str], target: Path,
                        spans: int) -> None:
    """The session `target` was watched as, its `lines` written whole to another file and read in one go with
    ``--once`` make the same spans and figures, and those match ``ctxwatch replay`` of that file; the monitor
    accepted each span once; and the restarted watcher went on as the session's instance."""
    again = project / "99999999-2222-4333-8444-555555555555.jsonl"
    again.write_text("".join(lines), encoding="utf-8")
    once = subprocess.run([sys.executable, "-m", "ctxwatch.cli", "watch", "--once", str(again), "--otlp", monitor.url,
                           "--state", str(tmp_path / "once.json")], capture_output=True, text=True, timeout=300)
    assert once.returncode in (0, 1) and "Traceback" not in once.stderr, once.stderr
    assert state_of(tmp_path / "once.json", again)["spans"] == spans
    assert accepted_spans(monitor) == 2 * spans  # none lost, none sent twice
    _, doc, _ = replay_json(again)
    first = loop_detail(monitor.url, "claude-code-" + target.stem)
    second = loop_detail(monitor.url, "claude-code-" + again.stem)
    assert_matches_replay(first, doc["sessions"][0])
    untimed = [[{k: v for k, v in c.items() if k != "time"} for c in loop["history"]] for loop in (first, second)]
    assert untimed[0] == untimed[1]  # times: to the monitor's resolution, which depends on first_seen
    # the restarted watcher went on as the same instance (a UUID v5 of the loop id), not as a restarted agent
    assert first["instance"] == recorded_instance(first["loop_id"]) and first["candidate_instance"] is None


def test_a_restart_after_a_compaction_resumes_there_and_never_reads_what_came_before(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    r = resumable(corpus, tmp_path, "22222222")
    home, project, target, state, lines, summary, cut = (r.home, r.project, r.target, r.state, r.lines, r.summary,
                                                         r.cut)
    watch_first_part(monitor, home, state, target, lines[:cut])
    resume = state_of(state, target)["resume"]
    assert (resume["line"], resume["offset"]) == (summary - 1, len("".join(lines[:summary - 1]).encode()))
    # small and text-free: offsets, counts, the detector's figures and a digest of the summary
    saved = state.read_text()
    assert len(saved.encode()) < 1500
    summary_text = json.loads(lines[summary - 1])["message"]["content"]
    summary_text = summary_text if isinstance(summary_text, str) else json.dumps(summary_text)
    assert all(word not in saved for word in re.findall(r"[A-Za-z]{12,}", summary_text))

    garble(target, resume["offset"])  # the lines before the summary: a resume that reads them fails below
    stderr = watch_the_rest(monitor, home, state, target, lines, cut)
    assert "skipped" not in stderr and "cannot resume" not in stderr, stderr
    assert_sent_as_once(monitor, tmp_path, project, lines, target, state_of(state, target)["spans"])


def test_a_resume_point_that_no_longer_fits_the_file_is_one_line_and_the_session_is_read_from_its_start(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    r = resumable(corpus, tmp_path, "44444444")
    target, state, lines = r.target, r.state, r.lines
    target.write_text("".join(lines[:r.cut]), encoding="utf-8")
    proc = ctxwatch("watch", "--once", target, "--otlp", monitor.url, "--state", state, timeout=300)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(state.read_text())
    entry = doc["files"][str(target)]
    entry["resume"]["after"] = "0" * 32  # not what the record there holds (as if the file were rewritten)
    state.write_text(json.dumps(doc), encoding="utf-8")
    with target.open("a", encoding="utf-8") as f:
        f.write("".join(lines[r.cut:]))
    proc = ctxwatch("watch", "--once", target, "--otlp", monitor.url, "--state", state, timeout=300)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    (note,) = [n for n in proc.stderr.splitlines() if "cannot resume" in n]
    assert note.startswith(f"ctxwatch watch: {target}: ") and "reading it again from its start" in note
    assert_sent_as_once(monitor, tmp_path, r.project, lines, target, state_of(state, target)["spans"])


def test_truncated_rotated_and_deleted_files_are_one_line_notes_and_the_watcher_goes_on(
        monitor: MonitorClient, tmp_path: Path) -> None:
    home, project = claude_home(tmp_path)
    lines = list(claude_code_lines(12, compact_every=4))
    doomed, shrunk, late, rotated = (project / f"{n}0000000-2222-4333-8444-555555555555.jsonl" for n in (1, 2, 3, 4))
    for path in (doomed, shrunk, rotated):
        path.write_text("".join(lines), encoding="utf-8")
    state = tmp_path / "state.json"
    watch = Watch(home, monitor.url, state)
    try:
        wait_for(lambda: all(state_of(state, p).get("line") == len(lines) for p in (doomed, shrunk, rotated)),
                 "all three read")
        doomed.unlink()
        shrunk.write_text("".join(lines[:3]), encoding="utf-8")
        fresh = rotated.with_suffix(".new")
        fresh.write_text("".join(lines[:5]), encoding="utf-8")
        fresh.replace(rotated)  # another file at the same path, shorter than what was read
        wait_for(lambda: state_of(state, shrunk).get("line") == 3, "the truncated file read again")
        wait_for(lambda: state_of(state, rotated).get("line") == 5, "the rotated file read from its start")
        assert state_of(state, rotated)["inode"] == rotated.stat().st_ino
        late.write_text("".join(lines), encoding="utf-8")
        wait_for(lambda: loop_detail(monitor.url, "claude-code-" + late.stem) is not None, "a session started later")
    finally:
        code, stderr = watch.stop()
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    notes = stderr.splitlines()
    assert [n for n in notes if str(doomed) in n] == [f"ctxwatch watch: {doomed}: deleted; no longer followed"]
    (truncated,) = [n for n in notes if str(shrunk) in n]
    assert "truncated" in truncated and "reading it again from its start" in truncated
    (replaced,) = [n for n in notes if str(rotated) in n]
    assert "replaced by another file" in replaced and "reading the new one from its start" in replaced
    assert str(doomed) not in json.loads(state.read_text())["files"]


def test_bad_usage_and_an_unreachable_endpoint_with_once_exit_2_in_one_line(tmp_path: Path) -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()  # nothing listens there now
    session = tmp_path / "s.jsonl"
    session.write_text("".join(claude_code_lines(3)), encoding="utf-8")
    cases = [("watch", "--otlp", "ftp://x", str(session)), ("watch", "--once", str(tmp_path / "missing.jsonl")),
             ("watch", "--once", str(session), "--otlp", f"http://127.0.0.1:{port}", "--state",
              str(tmp_path / "state.json"))]
    for args in cases:
        proc = ctxwatch(*args, env={**os.environ, "HOME": str(tmp_path)})
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.startswith("ctxwatch watch: "), proc.stderr
    assert "span export(s) failed" in proc.stderr


def test_once_catches_up_on_corpus_sessions_of_the_three_agents_as_replay_sees_them(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    files = [p for kind in ("claude_code", "codex", "gemini_cli") for p in of_kind(kind, corpus)[:2]]
    agents = {"claude_code": "claude-code", "codex": "codex", "gemini_cli": "gemini-cli"}
    for path in files:
        known = {loop["loop_id"] for loop in monitor.loops()}
        proc = ctxwatch("watch", "--once", path, "--otlp", monitor.url, "--state", tmp_path / "state.json",
                        timeout=300)
        assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, (path.name, proc.stderr)
        (new,) = [loop for loop in monitor.loops() if loop["loop_id"] not in known]
        _, doc, _ = replay_json(path)
        (session,) = doc["sessions"]
        assert new["agent"] == agents[session["format"]] and new["loop_id"].startswith(new["agent"] + "-")
        assert_matches_replay(loop_detail(monitor.url, new["loop_id"]), session)


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_an_idle_session_is_evicted_and_resumed_without_repeating_a_span(
        monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    r = resumable(corpus, tmp_path, "33333333")
    home, project, target, state, lines, half = r.home, r.project, r.target, r.state, r.lines, r.cut
    watch = Watch(home, monitor.url, state, "--idle", "60")
    try:
        wait_for(lambda: state.exists(), "the watcher running")
        idle_threads = threads_of(watch.proc.pid)  # following nothing yet
        target.write_text("".join(lines[:half]), encoding="utf-8")
        os.utime(target, (time.time() - 3600, time.time() - 3600))  # last written an hour ago
        wait_for(lambda: state_of(state, target).get("line") == half, "the old half read")
        wait_for(lambda: threads_of(watch.proc.pid) == idle_threads, "the caught-up old session evicted")
        evicted_spans = state_of(state, target)["spans"]
        garble(target, state_of(state, target)["resume"]["offset"])  # it resumes at the compaction, or fails below
        write_slowly(target, lines[half:])  # written now: resumed, and kept while it is fresh
        wait_for(lambda: state_of(state, target).get("line") == len(lines), "the rest read")
        assert threads_of(watch.proc.pid) == idle_threads + 1  # fresh: its session stays in memory
        wait_for(lambda: accepted_spans(monitor) == state_of(state, target)["spans"], "every span at the monitor")
    finally:
        code, stderr = watch.stop()
    assert code in (0, 1) and "Traceback" not in stderr, stderr
    assert "skipped" not in stderr and "cannot resume" not in stderr, stderr
    assert state_of(state, target)["spans"] > evicted_spans
    assert_sent_as_once(monitor, tmp_path, project, lines, target, state_of(state, target)["spans"])
