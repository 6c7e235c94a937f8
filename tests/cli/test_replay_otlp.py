"""Issue 7 §2 `--otlp URL`: the guard's spans backfilled into a real monitor subprocess
(`python -m ctxwatch_monitor --port 0 --state :memory:`) over real OTLP/HTTP on 127.0.0.1; the
monitor then tracks each session's loop, and its detector (record 003) reaches the replay's verdict.
Issue 18: the monitor's compaction counter carries each coding-agent session's recorded version, and its
tokens-before histogram holds the recorded ``preTokens`` of every Claude Code compaction."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import httpx
import pytest
from corpus_files import jsonl, kind_of, of_kind, readable_files
from prometheus_client.parser import text_string_to_metric_families
from replay_fixtures import (
    ctxwatch,
    fleet_samples,
    late_spans,
    loop_detail,
    recorded_project,
    replay_json,
    write_snapshots,
)

from ctxwatch.demo.monitor_process import MonitorClient
from ctxwatch.simulate.loops import absorption_loop
from ctxwatch.telemetry.sequence import recorded_instance


def agent_of(fmt: str) -> str:
    """The agent name a backfill sends for a session format (as `ctxwatch watch` names the coding agents)."""
    return {"claude_code": "claude-code", "codex": "codex", "gemini_cli": "gemini-cli"}.get(fmt, fmt)


def test_backfill_into_a_monitor(monitor: MonitorClient, corpus: Path, tmp_path: Path) -> None:
    contracting = write_snapshots(tmp_path / "absorbing.jsonl",
                                  [b for c in absorption_loop(2).cycles for b in (c.pre, c.post)])
    files = [*readable_files(corpus), contracting]
    proc = ctxwatch("replay", *files, "--otlp", monitor.url)
    assert proc.returncode == 1 and proc.stderr == ""  # 1: the absorbing loop's contraction
    _, doc, _ = replay_json(*files)

    loops = {loop["loop_id"]: loop for loop in monitor.loops()}
    assert set(loops) == {s["loop_id"] for s in doc["sessions"]}
    for session in doc["sessions"]:
        loop = loops[session["loop_id"]]
        # one loop, one service label: a coding-agent session's project, as `ctxwatch watch` labels it
        assert (loop["agent"], loop["service"]) == (agent_of(session["format"]),
                                                     recorded_project(Path(session["path"]), session["format"]))
        # the monitor's detector is fed the replay's cycles only: a mutation that is no cycle (a microcompaction,
        # a rewind, an opaque compaction) comes with no hash distance, as a live guard's span of it would
        assert loop["cycles"] == sum(m["cycle"] is not None for m in session["mutations"])
        assert loop["state"] == session["verdict"]["state"]
        detail = loop_detail(monitor.url, session["loop_id"])
        rewrites = [c for c in detail["history"] if c["kind"] != "append"]
        assert [c["kind"] for c in rewrites] == [m["kind"] for m in session["mutations"]]
        for cycle, m in zip(rewrites, session["mutations"], strict=True):
            assert cycle["decision"] == "patch" and cycle["cycle"] == m["cycle"]
            if m["cycle"] is None:
                assert cycle["d"] is None and m["hash_distance"] is None
            else:
                assert cycle["d"] == pytest.approx(m["hash_distance"], abs=1e-6)
            assert cycle["literals_before"] == m["literals"]["before"]
            if m["literals"]["lost"] is None:  # an opaque compaction: its loss is unknown on both sides
                assert cycle["r"] is None and m["literals"]["hidden"] > 0
            else:
                assert cycle["literals_lost"] == m["literals"]["lost"]

    assert any(loops[s["loop_id"]]["cycles"] >= 2 for s in doc["sessions"] if s["format"] == "claude_code")
    appends_only = [s for s in doc["sessions"] if not s["mutations"]]
    assert appends_only and all(loops[s["loop_id"]]["cycles"] == 0 for s in appends_only)  # tracked, nothing to judge
    absorbing = doc["sessions"][-1]
    assert loops[absorbing["loop_id"]]["state"] == "contracting"
    assert loops[absorbing["loop_id"]]["flagged_cycle"] == absorbing["verdict"]["entered_at"]
    assert loops[absorbing["loop_id"]]["onset"] == absorbing["verdict"]["onset"]
    _versions_and_tokens_before_reach_the_metrics(monitor.url, files, doc)


def _recorded_version(path: Path) -> str | None:
    """The agent version a Claude Code or Codex file records first, read from its raw records."""
    for _, record in jsonl(path):
        if record.get("type") == "session_meta":  # Codex
            version = (record.get("payload") or {}).get("cli_version")
        else:  # Claude Code: on every record
            version = record.get("version")
        if isinstance(version, str):
            return version
    return None


def _versions_and_tokens_before_reach_the_metrics(url: str, files: list[Path], doc: dict) -> None:
    samples = [s for f in text_string_to_metric_families(httpx.get(url + "/metrics", timeout=30).text)
               for s in f.samples]
    versions: dict[str, set[str]] = {}
    for s in samples:
        if s.name == "ctxwatch_mutations_total" and s.value:
            versions.setdefault(s.labels["agent"], set()).add(s.labels["agent_version"])
    for fmt in ("claude_code", "codex"):
        recorded = {_recorded_version(f) for f in files if kind_of(f) == fmt}
        assert recorded and None not in recorded and versions[agent_of(fmt)] == recorded, fmt
    assert versions["swe_agent"] == {""}  # not a coding agent `ctxwatch watch` follows: no version read
    pre_tokens = [m["pre_tokens"] for s in doc["sessions"] if s["format"] == "claude_code" for m in s["mutations"]
                  if m["kind"] == "compact" and m["pre_tokens"] is not None]
    assert pre_tokens
    tokens: dict[str, float] = {}  # summed over the sessions' service labels (their projects)
    for s in samples:
        if s.name.startswith("ctxwatch_rewrite_tokens_before_") and s.labels.get("agent") == agent_of("claude_code") \
                and s.labels.get("kind") == "compact" and s.labels.get("le") in (None, "+Inf"):
            tokens[s.name] = tokens.get(s.name, 0) + s.value
    assert tokens == {"ctxwatch_rewrite_tokens_before_sum": sum(pre_tokens),
                      "ctxwatch_rewrite_tokens_before_count": len(pre_tokens),
                      "ctxwatch_rewrite_tokens_before_bucket": len(pre_tokens)}
    assert not [s for s in samples if s.name.startswith("ctxwatch_rewrite_tokens_before_")
                and s.labels.get("agent") not in (agent_of("claude_code"), None) and s.value]  # only Claude Code


def test_loop_id_is_derived_from_the_file_and_agent_can_be_named(monitor: MonitorClient, corpus: Path,
                                                                 tmp_path: Path) -> None:
    original = of_kind("openhands", corpus)[0]
    copy = tmp_path / "elsewhere" / original.name
    copy.parent.mkdir()
    shutil.copy(original, copy)
    _, doc, _ = replay_json(original, copy)
    first, second = doc["sessions"]
    assert first["loop_id"] == second["loop_id"] and first["loop_id"].startswith("replay-openhands__")
    proc = ctxwatch("replay", copy, "--otlp", monitor.url, "--agent", "triage-bot", "--service", "audits")
    assert proc.returncode == 0, proc.stderr
    (loop,) = monitor.loops()
    assert (loop["loop_id"], loop["agent"], loop["service"]) == (first["loop_id"], "triage-bot", "audits")


def test_unreachable_endpoint_exits_2_with_one_line(corpus: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    path = of_kind("openhands", corpus)[0]
    proc = ctxwatch("replay", path, "--otlp", f"http://127.0.0.1:{port}", timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert lines == [f"ctxwatch replay: --otlp http://127.0.0.1:{port}: 1 span export(s) failed "
                     "(is a monitor or collector listening there?)"]


@pytest.mark.parametrize("header", [None, "Authorization=Bearer%20wrong"], ids=["no token", "wrong token"])
def test_a_refused_export_names_the_status_and_the_token(header: str | None, tmp_path: Path, corpus: Path) -> None:
    """A monitor started with ``--token`` answers 401 to a sender without the right one (review F6: the one
    line said "is a monitor or collector listening there?"). replay and watch name the status and the
    setting to check; the monitor holds nothing from them."""
    import os

    from ctxwatch.demo.monitor_process import MonitorProcess

    process = MonitorProcess(":memory:", "--grpc-port", "off", "--token", "s3cret").start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        if header:
            env["OTEL_EXPORTER_OTLP_HEADERS"] = header
        path = of_kind("openhands", corpus)[0]
        proc = ctxwatch("replay", path, "--otlp", process.client.url, env=env)
        assert (proc.returncode, proc.stderr.splitlines()) == (2, [
            f"ctxwatch replay: --otlp {process.client.url}: 1 span export(s) failed "
            "(refused: HTTP 401 Unauthorized; check the token, OTEL_EXPORTER_OTLP_HEADERS)"])
        home = tmp_path / "home"
        (home / ".claude" / "projects" / "p").mkdir(parents=True)
        smallest = min(of_kind("claude_code", corpus), key=lambda p: p.stat().st_size)
        shutil.copy(smallest, home / ".claude" / "projects" / "p" / "s.jsonl")
        watch = ctxwatch("watch", "--once", "--otlp", process.client.url, "--state", tmp_path / "watch.json",
                         env={**env, "HOME": str(home)})
        assert watch.returncode == 2  # --once: what was read did not reach the endpoint
        (line,) = watch.stderr.splitlines()  # said once, not again when the exporter closes
        assert line.startswith(f"ctxwatch watch: --otlp {process.client.url}: ") and line.endswith(
            "span export(s) failed (refused: HTTP 401 Unauthorized; check the token, OTEL_EXPORTER_OTLP_HEADERS)"
            "; the watcher goes on")
        headers = {"Authorization": "Bearer s3cret"}
        assert httpx.get(process.client.url + "/api/loops", headers=headers, timeout=10).json()["loops"] == []
    finally:
        process.close()


def test_a_second_backfill_of_a_session_is_the_same_instance_and_changes_nothing(monitor: MonitorClient,
                                                                                 tmp_path: Path) -> None:
    """A backfill numbers its session as a UUID v5 of the loop id on every run (review D2): sent again, its
    spans are duplicates (late), not a restarted agent that would start the loop over; and the fleet metrics
    do not count them again either (review L1: `ctxwatch_mutations_total` doubled while the loop did not)."""
    buffers = [b for c in absorption_loop(2).cycles for b in (c.pre, c.post)]
    session = write_snapshots(tmp_path / "absorbing.jsonl", buffers)
    assert ctxwatch("replay", session, "--otlp", monitor.url).returncode == 1
    (loop,) = monitor.loops()
    first = loop_detail(monitor.url, loop["loop_id"])
    assert first is not None and first["state"] == "contracting"
    assert first["instance"] == recorded_instance(loop["loop_id"])
    fleet = fleet_samples(monitor.url)
    mutations = sum(v for series, v in fleet.items() if series.startswith("ctxwatch_mutations_total{"))
    assert mutations == first["sequence"]  # one per span of the session
    assert ctxwatch("replay", session, "--otlp", monitor.url).returncode == 1
    again = loop_detail(monitor.url, loop["loop_id"])
    assert again is not None and again["candidate_instance"] is None
    assert {k: v for k, v in again.items() if k != "last_seen"} == {k: v for k, v in first.items() if k != "last_seen"}
    assert late_spans(monitor.url) == first["sequence"]  # every span of the second run
    assert fleet_samples(monitor.url) == fleet
