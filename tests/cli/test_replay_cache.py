"""Issue 16, what rewrites cost, on recorded sessions: ``ctxwatch replay --otlp`` carries the prompt-cache
figures Claude Code records on every assistant turn (``message.usage``: ``cache_read_input_tokens``,
``cache_creation_input_tokens``) onto the backfilled spans, each response once, and every recorded
compaction says how much consumed context it invalidated; a real monitor subprocess sums them per loop."""

from __future__ import annotations

from pathlib import Path

from corpus_files import claude_code_compactions, claude_code_message_records, of_kind
from replay_fixtures import ctxwatch, replay_json

from ctxwatch.demo.monitor_process import MonitorClient


def recorded_cache(path: Path) -> tuple[int, int]:
    """(cache reads, cache writes) the file records: the usage of each assistant turn (``message.id``),
    counted once though Claude Code repeats it on every line of the turn."""
    seen: set[str] = set()
    read = written = 0
    for _, record in claude_code_message_records(path):
        message = record["message"]
        usage = message.get("usage")
        if record["type"] != "assistant" or not isinstance(usage, dict) or message.get("id") in seen:
            continue
        seen.add(message.get("id"))
        read += usage.get("cache_read_input_tokens") or 0
        written += usage.get("cache_creation_input_tokens") or 0
    return read, written


def test_claude_code_cache_figures_and_compaction_costs_reach_the_monitor(monitor: MonitorClient,
                                                                         corpus: Path) -> None:
    files = [p for p in of_kind("claude_code", corpus) if recorded_cache(p)[0] > 0]
    assert files, "the corpus holds Claude Code sessions with prompt-cache usage"
    proc = ctxwatch("replay", *files, "--otlp", monitor.url)
    assert proc.returncode in (0, 1) and proc.stderr == ""
    _, doc, _ = replay_json(*files)
    loops = {loop["loop_id"]: loop for loop in monitor.loops()}
    compacted = 0
    for path, session in zip(files, doc["sessions"], strict=True):
        cache = loops[session["loop_id"]]["cache"]
        assert (cache["read_tokens"], cache["creation_tokens"]) == recorded_cache(path), path.name
        if claude_code_compactions(path):
            compacted += 1
            # a compaction replaces the history the model read with its summary: the cache from message 0 on
            assert cache["invalidated_tokens"] > 0 and cache["invalidated_chars"] >= cache["invalidated_tokens"]
    assert compacted
