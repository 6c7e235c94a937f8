"""One coding-agent session is one agent on every board, whether it is backfilled or followed live (review L2).

``ctxwatch replay --otlp`` and ``ctxwatch watch --once`` read the same corpus session of each agent ``watch``
follows and export to one real monitor subprocess over OTLP/HTTP on 127.0.0.1: both loops carry the same
``gen_ai.agent.name`` — ``claude-code``, ``codex``, ``gemini-cli`` (issue 18) — not the replay's format
name beside the watcher's agent name, which split one agent into two ``agent`` label values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_files import of_kind
from replay_fixtures import ctxwatch, replay_json

from ctxwatch.demo.monitor_process import MonitorClient

AGENTS = (("claude_code", "claude-code"), ("codex", "codex"), ("gemini_cli", "gemini-cli"))


@pytest.mark.parametrize(("kind", "agent"), AGENTS)
def test_replay_and_watch_send_the_same_agent_name(monitor: MonitorClient, corpus: Path, tmp_path: Path, kind: str,
                                                   agent: str) -> None:
    files = sorted(of_kind(kind, corpus), key=lambda p: p.stat().st_size)
    if not files:
        pytest.skip(f"no {kind} session in the corpus")
    path = files[0]  # the shortest: the name is what is compared
    replayed = ctxwatch("replay", path, "--otlp", monitor.url, timeout=300)
    assert replayed.returncode in (0, 1), replayed.stderr
    watched = ctxwatch("watch", "--once", path, "--otlp", monitor.url, "--state", tmp_path / "state.json",
                       timeout=300)
    assert watched.returncode in (0, 1) and "Traceback" not in watched.stderr, watched.stderr
    _, doc, _ = replay_json(path)
    (session,) = doc["sessions"]
    loops = {loop["loop_id"]: loop["agent"] for loop in monitor.loops()}
    (live,) = [loop_id for loop_id in loops if loop_id != session["loop_id"]]
    assert loops == {session["loop_id"]: agent, live: agent}
