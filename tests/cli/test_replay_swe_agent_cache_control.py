"""A SWE-agent trajectory recorded with its ``cache_control`` history processor (the Anthropic config)
replays as the same trajectory without it: the processor turns the last two user/tool messages' string
content into a one-text-block list carrying the breakpoint (on a tool message, on the message itself),
and two steps later the message is its string again (the processor runs on copies). Neither is an
edit of a consumed message (adapters/_shape), so the mutations found, the verdict and the findings are the same.
The corpus files with per-step buffers are rewritten that way into a temporary file (read in place,
never copied into the project)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import corpus_files as raw
import pytest
from replay_fixtures import replay_json

SWE_AGENT_BUFFERS = [p for p in raw.of_kind("swe_agent")
                     if all("messages" in step for step in raw.document(p)["trajectory"])]
ELIDED = re.compile(r"^Old environment output: \(\d+ lines omitted\)")
BREAKPOINT = {"type": "ephemeral"}


def _with_cache_control(trajectory: list[dict]) -> list[dict]:
    """Each step's buffer as the processor leaves it when it runs on copies (after a processor that
    deep-copies the history, such as ``remove_regex``): the last two user/tool messages a one-text-block
    list with the breakpoint, every other message its string again."""
    out = []
    for step in trajectory:
        buffer = [dict(m) for m in step["messages"]]
        for i in [i for i, m in enumerate(buffer) if m["role"] in ("user", "tool")][-2:]:
            m = buffer[i]
            if isinstance(m["content"], str) and not ELIDED.match(m["content"]):
                block: dict = {"type": "text", "text": m["content"]}
                if m["role"] == "user":
                    block["cache_control"] = dict(BREAKPOINT)
                else:  # SWE-agent's workaround: a tool message's breakpoint on the message itself
                    m["cache_control"] = dict(BREAKPOINT)
                m["content"] = [block]
        out.append({**step, "messages": buffer})
    return out


def _outcome(doc: dict) -> dict:
    (session,) = doc["sessions"]
    return {k: v for k, v in session.items() if k not in ("path", "loop_id", "bytes")}


@pytest.mark.parametrize("path", SWE_AGENT_BUFFERS, ids=lambda p: p.name[:60])
def test_a_trajectory_with_cache_control_replays_as_the_one_without(path: Path, tmp_path: Path) -> None:
    doc = raw.document(path)
    cached = tmp_path / path.name
    cached.write_text(json.dumps({**doc, "trajectory": _with_cache_control(doc["trajectory"])}), encoding="utf-8")
    assert "cache_control" in cached.read_text(encoding="utf-8")
    code, plain, _ = replay_json(path)
    code_cached, with_breakpoints, _ = replay_json(cached)
    assert code == code_cached == 0
    assert _outcome(with_breakpoints) == _outcome(plain)
