"""Review F5: a Codex tool call the user interrupted (Esc) has its `function_call` in the rollout and never its
output; `turn_aborted` and the user's next message follow. Codex does not send that history as recorded: before
each request `ContextManager::normalize_history` puts an output "aborted" right after every call that has none.
The reader rebuilds what was sent, so a healthy interrupted session is no `tool_pairing` finding (it was exit 1)."""

from __future__ import annotations

import json
from pathlib import Path

import corpus_files as raw
import pytest
from replay_fixtures import ctxwatch

from ctxwatch.model import ToolResult
from ctxwatch.sessions import Snapshot, read_session


def rollouts_with_calls() -> list[Path]:
    return [p for p in raw.of_kind("codex") if any(r.get("type") == "response_item"
                                                   and r["payload"].get("type") == "function_call_output"
                                                   for _, r in raw.jsonl(p))]


def interrupted(source: Path, tmp_path: Path) -> tuple[Path, str]:
    """`source` with one call's output dropped, as Codex writes an interrupt; and that call's id."""
    records = [r for _, r in raw.jsonl(source)]
    outputs = [i for i, r in enumerate(records) if r.get("type") == "response_item"
               and r["payload"].get("type") == "function_call_output"]
    drop = outputs[len(outputs) // 2]
    nxt = next(j for j in range(drop + 1, len(records)) if records[j].get("type") == "response_item"
               and records[j]["payload"].get("role") == "user")
    stamp = records[drop]["timestamp"]
    planted = records[:drop] + [
        {"timestamp": stamp, "type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}},
        {"timestamp": stamp, "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "stop, do something else"}]}},
    ] + records[nxt + 1:]
    path = tmp_path / source.name
    path.write_text("".join(json.dumps(r) + "\n" for r in planted))
    return path, records[drop]["payload"]["call_id"]


@pytest.fixture(params=rollouts_with_calls(), ids=lambda p: p.name[:40])
def rollout(request) -> Path:
    return request.param


def test_an_interrupted_call_is_answered_aborted_as_codex_sends_it(rollout, tmp_path) -> None:
    path, call_id = interrupted(rollout, tmp_path)
    snapshots = [e for e in read_session(path) if isinstance(e, Snapshot)]
    sent = next(s for s in snapshots if any(call_id in m.call_ids for m in s.messages) and not s.final)
    at = next(i for i, m in enumerate(sent.messages) if call_id in m.call_ids)
    answer = sent.messages[at + 1]
    assert [(p.call_id, p.output) for p in answer.parts if isinstance(p, ToolResult)] == [(call_id, "aborted")]
    assert sent.messages[at + 2].text == "stop, do something else"

    result = ctxwatch("replay", "--json", path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    assert session["tool_pairs"]["orphans_in_buffers"] == []
    assert session["findings"] == 0 and session["session_findings"] == []


def test_a_call_still_running_at_the_end_of_the_file_stays_pending(rollout, tmp_path) -> None:
    records = [r for _, r in raw.jsonl(rollout)]
    last_call = max(i for i, r in enumerate(records) if r.get("type") == "response_item"
                    and r["payload"].get("type") == "function_call")
    path = tmp_path / rollout.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:last_call + 1]))
    [final] = [e for e in read_session(path) if isinstance(e, Snapshot) and e.final]
    call_id = records[last_call]["payload"]["call_id"]
    assert not any(call_id in m.result_ids for m in final.messages)
