"""A Claude Code session continued after an upgrade of the agent: Claude Code writes ``version`` on every
record, and what the agent did after the upgrade is counted under the new version, by ``ctxwatch replay
--otlp`` and ``ctxwatch watch`` alike (a real monitor subprocess on 127.0.0.1; its
``ctxwatch_mutations_total`` by ``agent_version``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from replay_fixtures import claude_code_lines, ctxwatch

from ctxwatch.demo.monitor_process import MonitorClient

OLD, NEW = "2.1.39", "2.2.0"


def upgraded_session(path: Path) -> Path:
    """A generated Claude Code session of 12 turns compacted every 4, whose records after the first
    compaction carry the new version (the session resumed after an upgrade)."""
    lines, upgraded = [], False
    for line in claude_code_lines(12, compact_every=4):
        record = json.loads(line)
        if upgraded:
            record["version"] = NEW
        upgraded = upgraded or record.get("isCompactSummary") is True
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def compactions_by_version(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "ctxwatch_mutations_total" and s.labels.get("kind") == "compact" and s.value:
                version = s.labels["agent_version"]
                counts[version] = counts.get(version, 0) + s.value
    return counts


@pytest.mark.parametrize("command", ["replay", "watch"])
def test_compactions_after_an_upgrade_count_under_the_new_version(monitor: MonitorClient, tmp_path: Path,
                                                                  command: str) -> None:
    path = upgraded_session(tmp_path / "00000000-0000-4000-8000-00000000abcd.jsonl")
    args = ("replay", path) if command == "replay" else ("watch", "--once", path, "--state", tmp_path / "state.json")
    proc = ctxwatch(*args, "--otlp", monitor.url, timeout=300)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    assert compactions_by_version(monitor.url) == {OLD: 1, NEW: 2}
