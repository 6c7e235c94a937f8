"""Issue 14 "Must show", planted cases: one tool call or one tool result removed from a real Claude
Code session makes `ctxwatch replay` exit 1 naming the id and the line that introduced it (listed
once); a resume-after-``/exit`` branch inside a merged user message is reported as a rewind.

Every case is made from a corpus file picked by what it holds, and the expected ids and lines
are read from the planted file itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import corpus_files as raw
import pytest
from replay_fixtures import ctxwatch, replay_json, write_snapshots

from ctxwatch.model import Message, ToolCall


def single_block(record: dict, kind: str) -> str | None:
    """The tool id of a record whose message is exactly one `kind` block, else None."""
    content = record["message"].get("content")
    if isinstance(content, list) and len(content) == 1 and content[0].get("type") == kind:
        return content[0]["id" if kind == "tool_use" else "tool_use_id"]
    return None


def plant(corpus: Path, tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A copy of a compacted Claude Code session without the line of one `kind` block, taken from the
    middle of its first epoch (its pair before the first compaction); and the id that lost its pair."""
    for path in raw.of_kind("claude_code", corpus):
        compactions = raw.claude_code_compactions(path)
        if not compactions:
            continue
        calls, results = raw.claude_code_tool_ids(path)
        first = compactions[0][0]
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        candidates = [(n, cid) for n, record in raw.claude_code_message_records(path)
                      if n < first and (cid := single_block(record, kind)) is not None
                      and calls.get(cid, first) < results.get(cid, first) < first - 20]
        if candidates:
            n, cid = candidates[len(candidates) // 2]
            planted = tmp_path / f"planted-{kind}.jsonl"
            planted.write_text("".join(lines[: n - 1] + lines[n:]), encoding="utf-8")
            return planted, cid
    pytest.skip("no compacted Claude Code session with a tool pair inside its first epoch")


@pytest.mark.parametrize(("removed", "left"), [("tool_use", "tool_result"), ("tool_result", "tool_use")])
def test_one_side_of_a_pair_removed_exits_1_naming_the_id_and_its_line(corpus: Path, tmp_path: Path,
                                                                     removed: str, left: str) -> None:
    planted, cid = plant(corpus, tmp_path, removed)
    calls, results = raw.claude_code_tool_ids(planted)
    line = (results if left == "tool_result" else calls)[cid]  # in the planted file
    assert cid not in (calls if left == "tool_result" else results)

    code, doc, err = replay_json(planted)
    assert code == 1 and err == ""
    (session,) = doc["sessions"]
    assert session["tool_pairs"]["orphans_in_buffers"] == [{"id": cid, "where": f"line {line}", "kind": left}]
    (finding,) = session["session_findings"]
    assert finding["invariant"] == "tool_pairing" and finding["enforced"]
    assert f"{cid} ({left} at line {line})" in finding["message"]
    assert session["findings"] == 1 and doc["summary"]["with_findings"] == 1
    assert all(m["orphans"] == {"tool_use": [], "tool_result": []} for m in session["mutations"])

    proc = ctxwatch("replay", planted)
    assert proc.returncode == 1
    assert proc.stdout.count(cid) == 1, proc.stdout  # listed once, in the finding
    assert f"{cid} ({left} at line {line})" in proc.stdout and "(exit 1)" in proc.stdout


def test_a_late_result_of_a_call_dropped_in_flight_is_named_at_its_own_line(corpus: Path, tmp_path: Path) -> None:
    """Review F3: the result of a call a compaction dropped in flight, recorded just after the summary, is an
    orphan of the new epoch; it was named at the call's line (the first record naming the id), not its own."""
    for path in raw.of_kind("claude_code", corpus):
        dropped = [(boundary, calls[0]) for boundary, calls in raw.claude_code_in_flight(path).items() if calls]
        if dropped:
            break
    else:
        pytest.skip("no Claude Code session in the corpus drops a call in flight")
    boundary, (cid, call_line) = dropped[0]
    summary_line, _ = raw.claude_code_summary_after(path, boundary)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    summary, after = json.loads(lines[summary_line - 1]), json.loads(lines[summary_line])
    late = {**{k: summary[k] for k in ("isSidechain", "userType", "sessionId", "timestamp") if k in summary},
            "type": "user", "parentUuid": summary["uuid"], "uuid": f"late-{cid}",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": "done"}]}}
    after["parentUuid"] = late["uuid"]
    planted = tmp_path / path.name
    planted.write_text("".join(lines[:summary_line] + [json.dumps(late) + "\n", json.dumps(after) + "\n"]
                               + lines[summary_line + 1:]), encoding="utf-8")

    code, doc, _ = replay_json(planted)
    (session,) = doc["sessions"]
    assert code == 1
    assert [o for o in session["tool_pairs"]["orphans_in_buffers"] if o["id"] == cid] == [
        {"id": cid, "where": f"line {summary_line + 1}", "kind": "tool_result"}]
    in_flight = [t for m in session["mutations"] for t in m["in_flight_dropped"] if t["id"] == cid]
    assert in_flight == [{"id": cid, "where": f"line {call_line}", "kind": "tool_use"}]


def test_resume_branch_inside_a_merged_user_message_is_a_rewind(corpus: Path, tmp_path: Path) -> None:
    """A resume after /exit re-parents the next turn onto an earlier user record. With the turn in
    between removed (as when nothing was written for it), the user records of the abandoned branch
    join that user message, and the branch cuts them off inside it."""
    for path in raw.of_kind("claude_code", corpus):
        records = dict(raw.jsonl(path))
        by_uuid = {r.get("uuid"): n for n, r in records.items()}
        for branch in raw.claude_code_branches(path):
            ancestor = by_uuid.get(records[branch].get("parentUuid"))
            between = [n for n in range(ancestor + 1 if ancestor else branch, branch)
                       if records.get(n, {}).get("type") == "assistant"]
            turns = {records[n]["message"].get("id") for n in between}
            if ancestor and records[ancestor]["type"] == "user" and records[branch]["type"] == "assistant" \
                    and len(turns) == 1 and any(records.get(n, {}).get("type") == "user"
                                                for n in range(between[-1] + 1, branch)):
                break
        else:
            continue
        break
    else:
        pytest.skip("no Claude Code session with a resume branch onto a user record")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    planted = tmp_path / "resumed.jsonl"
    planted.write_text("".join(line for n, line in enumerate(lines, 1) if n not in set(between)), encoding="utf-8")
    at = branch - len(between)

    code, doc, _ = replay_json(planted)
    assert code == 0
    rewinds = [m for m in doc["sessions"][0]["mutations"] if m["source"] == "claude_code.rewind"]
    (rewind,) = [m for m in rewinds if m["line"] == at]
    assert rewind["kind"] == "prune" and rewind["messages"]["before"] == rewind["messages"]["after"]
    assert rewind["size"]["after"] < rewind["size"]["before"]  # the abandoned records cut from the message
    assert rewind["messages"]["elided"] == 1


def test_synthetic_resume_inside_a_merged_user_message(tmp_path: Path) -> None:
    """The same shape written out: a tool result, the /exit records joined to it, then a turn whose
    parent is the tool result."""
    def record(kind: str, uuid: str, parent: str | None, content: object, **extra: object) -> str:
        message = {"role": kind, "content": content, **({"id": f"msg_{uuid}"} if kind == "assistant" else {})}
        return json.dumps({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "isSidechain": False,
                           "message": message, **extra}) + "\n"

    path = tmp_path / "resume.jsonl"
    path.write_text("".join([
        record("user", "u0", None, "List the migrations"),
        record("assistant", "a1", "u0",
               [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]),
        record("user", "r1", "a1", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "001_init.sql"}]),
        record("user", "c1", "gone-record", "<local-command-caveat>Caveat: local commands</local-command-caveat>",
               isMeta=True),
        record("user", "c2", "c1", "<command-name>/exit</command-name>"),
        record("user", "c3", "c2", "<local-command-stdout>Bye!</local-command-stdout>"),
        record("assistant", "a2", "r1", [{"type": "text", "text": "No response requested."}]),
    ]), encoding="utf-8")
    code, doc, _ = replay_json(path)
    assert code == 0
    session = doc["sessions"][0]
    (rewind,) = session["mutations"]
    assert (rewind["kind"], rewind["source"], rewind["line"]) == ("prune", "claude_code.rewind", 7)
    assert rewind["messages"] == {"before": 3, "after": 3, "kept": 2, "dropped": 0, "added": 0, "elided": 1,
                                  "rewritten": 0}
    assert session["tool_pairs"] == {"paired": 1, "pending": 0, "orphans_in_buffers": []}
    assert session["messages"] == 4  # user, assistant, the tool result alone, the new turn


def test_an_unpaired_id_in_a_snapshot_file_is_named_by_the_line_it_came_in(tmp_path: Path) -> None:
    user, call = Message("user", "Deploy ORD-1042"), Message("assistant", [ToolCall("call_7", "deploy", "{}")])
    done = Message("assistant", "Deployed.")
    path = write_snapshots(tmp_path / "buffers.jsonl", [[user], [user, call], [user, call, done]])
    code, doc, _ = replay_json(path)
    assert code == 1
    (session,) = doc["sessions"]
    assert session["tool_pairs"]["orphans_in_buffers"] == [{"where": "line 2", "id": "call_7", "kind": "tool_use"}]


def _answered(message: dict) -> list[str]:
    return list(message.get("tool_call_ids") or []) if message.get("role") == "tool" else []


def _called(message: dict) -> list[str]:
    return [c["id"] for c in message.get("tool_calls") or [] if isinstance(c, dict) and "id" in c]


def _swe_agent_step(corpus: Path, answers: int) -> tuple[Path, dict, int, str]:
    """A SWE-agent trajectory (its document), a step that is neither its first nor its last and a call id
    answered by exactly `answers` tool messages of that step's buffer and by some of the steps' before and after."""
    for path in raw.of_kind("swe_agent", corpus):
        doc = json.loads(path.read_text())
        steps = doc.get("trajectory") or []
        for s in range(1, len(steps) - 1):
            here = [i for m in steps[s].get("messages") or [] for i in _answered(m)]
            around = [{i for m in steps[t].get("messages") or [] for i in _answered(m)} for t in (s - 1, s + 1)]
            for cid in dict.fromkeys(here):
                if here.count(cid) == answers and all(cid in ids for ids in around):
                    return path, doc, s, cid
    pytest.skip(f"no corpus SWE-agent step answers a call id {answers} time(s), answered in the next step too")


@pytest.mark.parametrize("answers", [1, 2])
def test_tool_results_removed_from_one_swe_agent_step_count_each_call_id_once(corpus: Path, tmp_path: Path,
                                                                             answers: int) -> None:
    """docs/replay.md: tool pairs are the distinct call ids answered over the whole session, unpaired ids each
    listed once. A step whose buffer lost the result(s) of one call id (answered again in the next step) orphans
    that id once, though the trajectory reuses it; and the id answered again is one pair, not two."""
    original, doc, s, cid = _swe_agent_step(corpus, answers)
    steps = doc["trajectory"]
    distinct = {i for st in steps for m in st.get("messages") or [] for i in _answered(m)} & {
        i for st in steps for m in st.get("messages") or [] for i in _called(m)}
    steps[s]["messages"] = [m for m in steps[s]["messages"] if cid not in _answered(m)]
    path = tmp_path / original.name
    path.write_text(json.dumps(doc))
    code, out, _ = replay_json(path)
    assert code == 1
    (session,) = out["sessions"]
    orphaned = [m["orphans"]["tool_use"] for m in session["mutations"] if cid in m["orphans"]["tool_use"]]
    assert orphaned == [[cid]]
    assert session["tool_pairs"]["paired"] == len(distinct)


def test_a_gemini_cli_tool_call_with_an_empty_result_is_unanswered(corpus: Path, tmp_path: Path) -> None:
    """Gemini CLI sends no functionResponse for a recorded ``"result": []`` (``convertSessionToClientHistory``
    adds a list result's parts, none): the call is unanswered, named by id and JSON path, and no pair."""
    for original in raw.of_kind("gemini_cli", corpus):
        doc = json.loads(original.read_text())
        records = doc.get("messages") if isinstance(doc, dict) else None
        at = [(n, k) for n, r in enumerate((records or [])[:-1]) for k, c in enumerate(r.get("toolCalls") or [])
              if isinstance(c, dict) and c.get("result")]
        if at:
            break
    else:
        pytest.skip("no corpus Gemini CLI JSON session with a tool result before its last record")
    n, k = at[0]
    _, intact, _ = replay_json(original)
    call = records[n]["toolCalls"][k]
    call["result"] = []
    path = tmp_path / original.name
    path.write_text(json.dumps(doc))
    code, out, _ = replay_json(path)
    assert code == 1
    (session,) = out["sessions"]
    (orphan,) = session["tool_pairs"]["orphans_in_buffers"]
    assert (orphan["id"], orphan["kind"]) == (call["id"], "tool_use") and orphan["where"].startswith(f"messages[{n}]")
    assert session["tool_pairs"]["paired"] == intact["sessions"][0]["tool_pairs"]["paired"] - 1
