"""A Codex ``tool_search_call`` and its ``tool_search_output`` (codex-rs/protocol ``ResponseItem::ToolSearchCall`` /
``ToolSearchOutput``: ``call_id``, ``execution``, ``arguments`` / ``status``, ``tools``) are a call and its output,
paired by ``call_id`` as Codex pairs them (context_manager/normalize.rs); they were read as opaque items. Built
from the corpus rollout with one function call and its output rewritten in that shape."""

from __future__ import annotations

import json
from pathlib import Path

import corpus_files as raw
import pytest
from replay_fixtures import ctxwatch

from ctxwatch.model import ToolCall, ToolResult
from ctxwatch.sessions import Snapshot, read_session


def rollouts_with_calls() -> list[Path]:
    return [p for p in raw.of_kind("codex") if any(r.get("type") == "response_item"
                                                   and r["payload"].get("type") == "function_call_output"
                                                   for _, r in raw.jsonl(p))]


@pytest.fixture(params=rollouts_with_calls(), ids=lambda p: p.name[:40])
def rollout(request) -> list[dict]:
    return [json.loads(json.dumps(r)) for _, r in raw.jsonl(request.param)]  # raw.jsonl's records are shared


def searched(records: list[dict], tmp_path: Path, *, answered: bool = True) -> tuple[Path, str]:
    """`records` with the middle function call after their last compaction made a client tool search (its output
    too, or dropped with the rest of the turn, which the user interrupted: ``turn_aborted``, then the user's next
    message); and its call id."""
    items = [i for i, r in enumerate(records) if r.get("type") == "response_item"]
    compacted = max((i for i, r in enumerate(records) if r.get("type") == "compacted"), default=-1)
    calls = [i for i in items if i > compacted and records[i]["payload"].get("type") == "function_call"]
    at = calls[len(calls) // 2]
    call_id = records[at]["payload"]["call_id"]
    records[at]["payload"] = {"type": "tool_search_call", "call_id": call_id, "status": "completed",
                              "execution": "client", "arguments": {"query": "calendar create", "limit": 1}}
    out = next(i for i in items if records[i]["payload"].get("type") == "function_call_output"
               and records[i]["payload"]["call_id"] == call_id)
    if answered:
        records[out]["payload"] = {"type": "tool_search_output", "call_id": call_id, "status": "completed",
                                   "execution": "client", "tools": [{"type": "function", "name": "create_event"}]}
    else:
        nxt = next(j for j in items if j > out and records[j]["payload"].get("role") == "user")
        records[out:nxt] = [{"timestamp": records[out].get("timestamp"), "type": "event_msg",
                             "payload": {"type": "turn_aborted", "reason": "interrupted"}}]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, call_id


def test_a_tool_search_is_a_call_and_its_output(rollout, tmp_path) -> None:
    path, call_id = searched(rollout, tmp_path)
    [final] = [e for e in read_session(path) if isinstance(e, Snapshot) and e.final]
    [call] = [p for m in final.messages for p in m.parts if isinstance(p, ToolCall) and p.id == call_id]
    assert call.name == "tool_search" and json.loads(call.arguments) == {"query": "calendar create", "limit": 1}
    [result] = [p for m in final.messages for p in m.parts if isinstance(p, ToolResult) and p.call_id == call_id]
    assert json.loads(result.output) == [{"type": "function", "name": "create_event"}]

    replay = ctxwatch("replay", "--json", path, timeout=300)
    assert replay.returncode == 0, replay.stdout[-2000:] + replay.stderr[-2000:]
    [session] = json.loads(replay.stdout)["sessions"]
    assert session["tool_pairs"]["orphans_in_buffers"] == [] and session["findings"] == 0


def test_an_unanswered_tool_search_is_answered_as_codex_answers_it(rollout, tmp_path) -> None:
    path, call_id = searched(rollout, tmp_path, answered=False)
    sent = next(s for s in read_session(path) if isinstance(s, Snapshot) and not s.final
                and any(call_id in m.call_ids for m in s.messages))
    at = next(i for i, m in enumerate(sent.messages) if call_id in m.call_ids)
    [answer] = [p for p in sent.messages[at + 1].parts if isinstance(p, ToolResult)]
    assert (answer.call_id, json.loads(answer.output)) == (call_id, [])
