"""One coding-agent session is one loop of one agent on every board, whether it is backfilled or followed
live (review L2, issue 18: "each session is a loop (loop id from the session id)").

``ctxwatch watch --once`` and then ``ctxwatch replay --otlp`` read the same corpus session of each agent
``watch`` follows and export to one real monitor subprocess over OTLP/HTTP on 127.0.0.1: the monitor holds
one loop, with the loop id the replay's JSON names (``<agent>-<session id>``, the id the file records) and
the agent name ``claude-code``, ``codex``, ``gemini-cli``. Both number the session's spans alike (the same
guard instance, a UUID v5 of the loop id, and the same sequence numbers), so the replay after the watcher
sends duplicates only: the loop and the fleet counters stay as the watcher left them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_files import document, jsonl, of_kind
from replay_fixtures import ctxwatch, fleet_samples, late_spans, loop_detail, recorded_project, replay_json

from ctxwatch.demo.monitor_process import MonitorClient
from ctxwatch.telemetry.sequence import recorded_instance

AGENTS = (("claude_code", "claude-code"), ("codex", "codex"), ("gemini_cli", "gemini-cli"))


def recorded_session_id(path: Path, kind: str) -> str:
    """The session id the file records, read here straight from its records."""
    if kind == "codex":
        return next(r["payload"]["id"] for _, r in jsonl(path) if r.get("type") == "session_meta")
    records = [r for _, r in jsonl(path)] if path.suffix == ".jsonl" else [document(path)]
    return next(r["sessionId"] for r in records if isinstance(r, dict) and "sessionId" in r)


def export(step: str, path: Path, url: str, state: Path) -> None:
    """``ctxwatch watch --once`` or ``ctxwatch replay --otlp`` of `path` into the monitor at `url`."""
    args = ("watch", "--once", path, "--state", state) if step == "watch" else ("replay", path)
    proc = ctxwatch(*args, "--otlp", url, timeout=300)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr


def unchanged(detail: dict, *ignored: str) -> dict:
    return {k: v for k, v in detail.items() if k not in ("last_seen", *ignored)}


@pytest.mark.parametrize(("kind", "agent"), AGENTS)
@pytest.mark.parametrize("order", [("watch", "replay"), ("replay", "watch")])
def test_replay_and_watch_send_one_loop_of_the_same_agent(monitor: MonitorClient, corpus: Path, tmp_path: Path,
                                                          kind: str, agent: str, order: tuple[str, str]) -> None:
    files = sorted(of_kind(kind, corpus), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip(f"no {kind} session in the corpus")
    path = files[0]  # the shortest: the naming and the numbering are what is compared
    _, doc, _ = replay_json(path)
    (session,) = doc["sessions"]
    loop_id = session["loop_id"]
    assert loop_id == f"{agent}-{recorded_session_id(path, kind)}"

    first_step, second_step = order
    export(first_step, path, monitor.url, tmp_path / "state.json")
    assert [(loop["loop_id"], loop["agent"]) for loop in monitor.loops()] == [(loop_id, agent)]
    first = loop_detail(monitor.url, loop_id)
    assert first is not None and first["instance"] == recorded_instance(loop_id) and first["sequence"] > 0
    fleet = fleet_samples(monitor.url)
    assert late_spans(monitor.url) == 0

    export(second_step, path, monitor.url, tmp_path / "state.json")
    assert [(loop["loop_id"], loop["agent"]) for loop in monitor.loops()] == [(loop_id, agent)]
    again = loop_detail(monitor.url, loop_id)
    assert again is not None and again["candidate_instance"] is None
    assert again["service"] == first["service"] == recorded_project(path, kind)  # one loop, one service label
    if second_step == "watch":  # every span the watcher sends was one the replay had sent: nothing moves
        assert unchanged(again) == unchanged(first)
        assert 0 < late_spans(monitor.url) <= first["sequence"]
        assert fleet_samples(monitor.url) == fleet
    else:  # the replay's spans the watcher sent are duplicates; it also sends the append of the buffer left at
        # the end of the file, which the watcher passes over until the session goes on (`feed(final=False)`)
        assert late_spans(monitor.url) == first["sequence"]
        assert again["sequence"] - first["sequence"] in (0, 1)
        assert unchanged(again, "sequence") == unchanged(first, "sequence")
        moved = {series for series, value in fleet_samples(monitor.url).items() if fleet.get(series) != value}
        assert not [series for series in moved if 'kind="' in series and 'kind="append"' not in series], moved
