"""Review F5: a Codex tool call the user interrupted (Esc) has its `function_call` in the rollout and never its
output; `turn_aborted` and the user's next message follow. Codex does not send that history as recorded: before
each request `ContextManager::normalize_history` puts an output "aborted" right after every call that has none.
The reader rebuilds what was sent, so a healthy interrupted session is no `tool_pairing` finding (it was exit 1)."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

import corpus_files as raw
import pytest
from replay_fixtures import ctxwatch

from ctxwatch.adapters import openai_responses
from ctxwatch.model import ToolResult
from ctxwatch.sessions import Snapshot, read_session


def rollouts_with_calls() -> list[Path]:
    return [p for p in raw.of_kind("codex") if any(r.get("type") == "response_item"
                                                   and r["payload"].get("type") == "function_call_output"
                                                   for _, r in raw.jsonl(p))]


def interrupted(source: Path, tmp_path: Path, of: Collection[str] | None = None) -> tuple[Path, str]:
    """`source` with one call's output dropped (one of the calls `of`, when given), as Codex writes an
    interrupt; and that call's id."""
    records = [r for _, r in raw.jsonl(source)]
    outputs = [i for i, r in enumerate(records) if r.get("type") == "response_item"
               and r["payload"].get("type") == "function_call_output" and (of is None or r["payload"]["call_id"] in of)]
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
    # review F4: reported as aborted, by id and the call's line, and no tool pair (no tool answered it)
    assert session["details"]["aborted_calls"] == [{"id": call_id, "where": f"line {call_line(path, call_id)}"}]
    assert session["tool_pairs"]["paired"] == answered(path)
    table = ctxwatch("replay", path, timeout=300).stdout
    assert f"{call_id} (line {call_line(path, call_id)})" in table


def call_line(path: Path, call_id: str) -> int:
    """The line of the call `call_id` in `path`."""
    return next(n for n, r in raw.jsonl(path) if r.get("type") == "response_item"
                and r["payload"].get("call_id") == call_id and not r["payload"]["type"].endswith("_output"))


def answered(path: Path) -> int:
    """How many call ids of `path` have a call and an output recorded."""
    items = [r["payload"] for _, r in raw.jsonl(path) if r.get("type") == "response_item"]
    calls = {i.get("call_id") for i in items if not i.get("type", "").endswith("_output")}
    return len(calls & {i.get("call_id") for i in items if i.get("type", "").endswith("_output")})


def test_a_lost_output_with_no_abort_recorded_is_a_finding_naming_the_call(rollout, tmp_path) -> None:
    """Review F4: a ``function_call_output`` missing from the rollout with no ``turn_aborted`` recorded (a
    truncated copy, a crash) was answered "aborted" silently and counted as a pair: exit 0, the id nowhere. Codex
    only answers so the calls of an interrupted turn; here the call is an orphan of the requests sent."""
    records = [r for _, r in raw.jsonl(rollout)]
    outputs = [i for i, r in enumerate(records) if r.get("type") == "response_item"
               and r["payload"].get("type") == "function_call_output"]
    drop = outputs[len(outputs) // 2]
    call_id = records[drop]["payload"]["call_id"]
    path = tmp_path / rollout.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:drop] + records[drop + 1:]))

    result = ctxwatch("replay", "--json", path, timeout=300)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    line = call_line(path, call_id)
    assert [o for o in session["tool_pairs"]["orphans_in_buffers"] if o["id"] == call_id] == [
        {"id": call_id, "where": f"line {line}", "kind": "tool_use"}]
    assert f"{call_id} (tool_use at line {line})" in session["session_findings"][0]["message"]
    assert session["tool_pairs"]["paired"] == answered(path)
    assert "aborted_calls" not in session["details"]


def test_an_interrupted_call_a_compaction_keeps_is_still_answered_aborted(rollout, tmp_path) -> None:
    """A compaction whose replacement history keeps the interrupted call (still without output): the requests
    after it answer it "aborted" as before, and it is listed once."""
    path, call_id = interrupted(rollout, tmp_path)
    records = [r for _, r in raw.jsonl(path)]
    call = next(r["payload"] for r in records if r.get("type") == "response_item"
                and r["payload"].get("call_id") == call_id)
    stop = next(i for i, r in enumerate(records) if r.get("type") == "response_item"
                and r["payload"].get("role") == "user" and "stop, do something else" in json.dumps(r))
    answer = next(i for i in range(stop, len(records)) if records[i].get("type") == "response_item"
                  and records[i]["payload"].get("role") != "user")  # the reply to the request sent after the stop
    records = records[:answer + 1]
    stamp = records[-1]["timestamp"]
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go on"}]}
    reply = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "going on"}]}
    records += [{"timestamp": stamp, "type": "compacted",
                 "payload": {"message": "", "replacement_history": [user, call]}},
                {"timestamp": stamp, "type": "response_item", "payload": reply}]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    result = ctxwatch("replay", "--json", path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    assert session["tool_pairs"]["orphans_in_buffers"] == []
    assert session["details"]["aborted_calls"] == [{"id": call_id, "where": f"line {call_line(path, call_id)}"}]


def test_a_call_still_running_at_the_end_of_the_file_stays_pending(rollout, tmp_path) -> None:
    records = [r for _, r in raw.jsonl(rollout)]
    last_call = max(i for i, r in enumerate(records) if r.get("type") == "response_item"
                    and r["payload"].get("type") == "function_call")
    path = tmp_path / rollout.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:last_call + 1]))
    [final] = [e for e in read_session(path) if isinstance(e, Snapshot) and e.final]
    call_id = records[last_call]["payload"]["call_id"]
    assert not any(call_id in m.result_ids for m in final.messages)


def _items(records: list[dict]) -> list[tuple[int, dict]]:
    return [(i, r["payload"]) for i, r in enumerate(records) if r.get("type") == "response_item"]


def answered_late(source: Path, tmp_path: Path) -> tuple[Path, str]:
    """`source` with one call interrupted as `interrupted` writes it, and the call's real output recorded later,
    after the next request's reasoning and the output of the call that request made (what a tool that finished
    after the interrupt leaves): Codex sent "aborted" for it in that request, and only the real output after."""
    records = [r for _, r in raw.jsonl(source)]
    for drop, item in _items(records):
        if item.get("type") != "function_call_output":
            continue
        rest = records[drop + 1:]
        kinds = [(j, p.get("type")) for j, p in _items(rest)]
        upto = next((j for j, kind in kinds if kind in ("message", "function_call_output")), None)
        if upto is not None and kinds and rest[upto]["payload"]["type"] == "function_call_output" \
                and "reasoning" in [kind for j, kind in kinds if j < upto]:
            break
    else:
        pytest.skip("no call followed by reasoning and another call's output in this rollout")
    stamp = records[drop]["timestamp"]
    planted = records[:drop] + [
        {"timestamp": stamp, "type": "event_msg", "payload": {"type": "turn_aborted", "reason": "interrupted"}},
        {"timestamp": stamp, "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "stop, do something else"}]}},
    ] + rest[:upto + 1] + [records[drop]] + rest[upto + 1:]
    path = tmp_path / source.name
    path.write_text("".join(json.dumps(r) + "\n" for r in planted))
    return path, records[drop]["payload"]["call_id"]


def results_of(call_id: str, snapshot: Snapshot) -> list[tuple[int, str]]:
    return [(i, p.output) for i, m in enumerate(snapshot.messages) for p in m.parts
            if isinstance(p, ToolResult) and p.call_id == call_id]


def test_a_real_output_recorded_after_the_aborted_one_is_the_only_one_sent_from_then_on(rollout, tmp_path) -> None:
    """Codex normalizes a copy of the history for each prompt (`ContextManager::for_prompt` on `clone_history()`),
    never the history: once the real output is recorded, the prompts carry it where it was recorded, and no
    "aborted" one. The reader kept its "aborted" output in the buffer and appended the real one: two results for
    one call, a tool_pairing finding (exit 1) on a session Codex sent healthy."""
    path, call_id = answered_late(rollout, tmp_path)
    snapshots = [e for e in read_session(path) if isinstance(e, Snapshot)]
    with_call = [s for s in snapshots if any(call_id in m.call_ids for m in s.messages)]
    aborted = [s for s in with_call if any(output == "aborted" for _, output in results_of(call_id, s))]
    assert aborted, "the request before the real output carries the aborted one"
    after = [s for s in with_call if s.line > aborted[-1].line]
    assert after
    for snapshot in after:
        [(at, output)] = results_of(call_id, snapshot)
        assert output != "aborted"
        assert at > next(i for i, m in enumerate(snapshot.messages) if m.text == "stop, do something else")

    result = ctxwatch("replay", "--json", path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    assert session["tool_pairs"]["orphans_in_buffers"] == []
    assert session["findings"] == 0 and session["session_findings"] == []


def local_shell(source: Path, tmp_path: Path, *, call_ids: bool = True) -> tuple[Path, list[str]]:
    """`source` with every ``exec_command`` function_call recorded as the ``local_shell_call`` item Codex records
    for its local shell tool (answered by a ``function_call_output`` of its ``call_id``); with `call_ids` False,
    without one (Codex's is optional) and the outputs, which nothing can name then, left out."""
    records = [json.loads(json.dumps(r)) for _, r in raw.jsonl(source)]  # a copy: the raw records are cached
    shell: list[str] = []
    for _, item in _items(records):
        if item.get("type") == "function_call" and item.get("name") == "exec_command":
            shell.append(item["call_id"])
            command = {"type": "exec", "command": ["bash", "-lc", item["arguments"]]}
            item.clear()
            item.update({"type": "local_shell_call", "call_id": shell[-1] if call_ids else None,
                         "status": "completed", "action": command})
    if not call_ids:
        records = [r for r in records if not (r.get("type") == "response_item"
                                              and r["payload"].get("call_id") in set(shell))]
    path = tmp_path / source.name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, shell


def test_local_shell_calls_are_calls_answered_by_their_outputs(rollout, tmp_path) -> None:
    """A ``local_shell_call`` was read as an opaque item, so each ``function_call_output`` answering it was an
    orphan: a tool_pairing finding per shell command (exit 1) on a healthy session."""
    original = ctxwatch("replay", "--json", rollout, timeout=300)
    path, shell = local_shell(rollout, tmp_path)
    if not shell:
        pytest.skip("no exec_command call in this rollout")
    [final] = [e for e in read_session(path) if isinstance(e, Snapshot) and e.final]
    calls = {c.id: c for m in final.messages for c in m.tool_calls}
    assert {calls[i].name for i in shell if i in calls} == {"local_shell"}

    result = ctxwatch("replay", "--json", path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    [before] = json.loads(original.stdout)["sessions"]
    assert session["tool_pairs"] == before["tool_pairs"]
    assert session["findings"] == 0 and session["session_findings"] == []


def test_a_local_shell_call_without_call_id_is_no_call_awaiting_an_output(rollout, tmp_path) -> None:
    path, shell = local_shell(rollout, tmp_path, call_ids=False)
    if not shell:
        pytest.skip("no exec_command call in this rollout")
    events = list(read_session(path))
    assert not any(i in m.call_ids for e in events if isinstance(e, Snapshot) for m in e.messages for i in shell)
    result = ctxwatch("replay", "--json", path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [session] = json.loads(result.stdout)["sessions"]
    assert session["tool_pairs"]["pending"] == 0 and session["tool_pairs"]["orphans_in_buffers"] == []


def test_an_interrupted_local_shell_call_is_answered_by_a_function_call_output(rollout, tmp_path) -> None:
    (tmp_path / "shell").mkdir()
    shelled, shell = local_shell(rollout, tmp_path / "shell")
    if not shell:
        pytest.skip("no exec_command call in this rollout")
    path, call_id = interrupted(shelled, tmp_path, of=shell)
    sent = next(s for s in read_session(path) if isinstance(s, Snapshot) and not s.final
                and any(call_id in m.call_ids for m in s.messages))
    at = next(i for i, m in enumerate(sent.messages) if call_id in m.call_ids)
    assert sent.messages[at].tool_calls[0].name == "local_shell"
    assert [(p.call_id, p.output) for p in sent.messages[at + 1].parts] == [(call_id, "aborted")]
    assert sent.messages[at + 1].extra == openai_responses.read(
        {"type": "function_call_output", "call_id": call_id, "output": "aborted"}, None).extra
