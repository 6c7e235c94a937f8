"""Issue 7 §2 "Must show": `ctxwatch replay` run as a user runs it on the real sessions of
../shared/corpus (read in place), checked against what the raw files say.

- Claude Code: the compaction found at its boundary record (line 714, summary at 715), the
  literal-like strings present before the boundary and absent after it counted and listed, no
  orphan (177 pairs, none across the boundary) — record 000 pairing, record 003 literals.
- Codex: the `compacted` record (line 1788) and the hash tags carried over into
  `replacement_history` (none of them counted lost).
- SWE-agent: its 13 buffers, the outputs elided in place, and the shrink at step 7.
- OpenHands: its pair (and pending finish call) and no mutation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from replay_fixtures import ctxwatch, replay_json

from ctxwatch.literals import LiteralRegistry


def one(corpus: Path, pattern: str) -> Path:
    (path,) = corpus.glob(pattern)
    return path


def strings(value: object):
    """Every string in a decoded JSON value, and each object also as JSON text (tool inputs)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        yield json.dumps(value, ensure_ascii=False)
        yield json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def test_claude_code_compaction_at_its_boundary_literals_lost_and_no_orphan(corpus: Path) -> None:
    path = one(corpus, "claude-code__marot-spotter__*.jsonl")
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    assert (session["format"], session["records"], session["status"]) == ("claude_code", 1593, "ok")
    (m,) = session["mutations"]
    assert (m["kind"], m["source"], m["line"], m["where"]) == ("compact", "claude_code.compact_boundary", 714,
                                                               "line 714")
    assert (m["trigger"], m["pre_tokens"], m["summary"]) == ("auto", 167731, {"line": 715, "chars": 12181})
    assert m["messages"]["after"] == 1 and m["messages"]["dropped"] == m["messages"]["before"]
    assert m["size"]["before"] > 20 * m["size"]["after"]

    # no orphan: nothing orphaned by the compaction, nothing unpaired in any buffer, all 177 pairs found
    assert m["orphans"] == {"tool_use": [], "tool_result": []}
    assert session["tool_pairs"] == {"paired": 177, "pending": 0, "orphans_in_buffers": []}

    # the literal-like strings present before the boundary and absent after it, from the raw file
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[713])["subtype"] == "compact_boundary"
    registry = LiteralRegistry()
    before: set[str] = set()
    for raw in lines[:713]:
        record = json.loads(raw)
        if isinstance(record.get("message"), dict) and not record.get("isSidechain"):
            for text in strings(record["message"]):
                before |= registry.extract(text)
    summary = json.loads(lines[714])["message"]["content"]
    after = registry.extract(summary if isinstance(summary, str) else "\n".join(strings(summary)))
    lost = set(m["literals"]["lost_values"])
    assert len(lost) == m["literals"]["lost"] > 50  # downstream literals only (docs/alarm.md, "Literals")
    assert lost <= before, sorted(lost - before)[:5]
    assert not lost & after
    assert 0 < m["literals"]["before"] - m["literals"]["lost"] <= len(after)  # what was kept is in the summary
    assert m["hash_distance"] > 0.5 and m["contraction"]["state"] == "healthy"


def test_claude_code_table_shows_the_row(corpus: Path) -> None:
    path = one(corpus, "claude-code__marot-spotter__*.jsonl")
    _, doc, _ = replay_json(path)
    m = doc["sessions"][0]["mutations"][0]
    proc = ctxwatch("replay", path)
    assert proc.returncode == 0 and proc.stderr == ""
    row = next(line for line in proc.stdout.splitlines() if "claude_code.compact_boundary" in line)
    assert "line 714" in row and "compact" in row
    assert f"{m['literals']['lost']}/{m['literals']['before']}" in row
    assert f"{m['size']['before']:,} -> {m['size']['after']:,}" in row
    assert "cycle 1: summary of 12,181 chars at line 715, trigger auto, 167,731 tokens before" in proc.stdout
    assert f"cycle 1: lost {m['literals']['lost']} literal(s)" in proc.stdout
    assert "findings: none" in proc.stdout and "(exit 0)" in proc.stdout


def test_codex_compacted_record_and_hash_tags_carried_over(corpus: Path) -> None:
    path = one(corpus, "codex__*.jsonl")
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    assert session["format"] == "codex" and session["tool_pairs"]["paired"] == 365
    assert session["tool_pairs"]["orphans_in_buffers"] == []
    (m,) = session["mutations"]
    assert (m["kind"], m["source"], m["line"]) == ("compact", "codex.compacted", 1788)
    assert m["details"] == {"replacement_items": 40} and m["messages"]["after"] == 40
    assert m["orphans"] == {"tool_use": [], "tool_result": []}

    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1787])
    assert record["type"] == "compacted"
    tag = re.compile(r"sha=([0-9a-f]{8})")
    carried = set(tag.findall(json.dumps(record["payload"]["replacement_history"])))
    earlier = set(tag.findall("\n".join(lines[:1787])))
    assert len(carried & earlier) == 40
    lost = set(m["literals"]["lost_values"])
    assert not carried & lost, "a hash tag carried into replacement_history was counted lost"
    assert m["literals"]["before"] - m["literals"]["lost"] >= 40
    # 34 of the 40 replacement items are earlier messages verbatim
    assert m["messages"]["kept"] == 34


def test_swe_agent_buffers_elided_outputs_and_shrink_at_step_7(corpus: Path) -> None:
    path = one(corpus, "swe-agent__*.traj")
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    assert session["steps"] == 13 and session["format"] == "swe_agent"
    mutations = session["mutations"]
    trajectory = json.loads(path.read_text(encoding="utf-8"))["trajectory"]
    marker = re.compile(r"^Old environment output: \(\d+ lines omitted\)")

    def elided(step: int) -> int:
        return sum(bool(marker.match(str(msg.get("content", "")))) for msg in trajectory[step]["messages"])

    assert mutations and all((m["kind"], m["source"]) == ("prune", "snapshot_diff") for m in mutations)
    for m in mutations:
        step = m["step"]
        assert m["where"] == f"trajectory[{step}]"
        assert m["messages"]["elided"] == elided(step) - elided(step - 1) >= 1
        assert m["messages"]["dropped"] == 0 and m["orphans"] == {"tool_use": [], "tool_result": []}
    shrink = next(m for m in mutations if m["step"] == 7)
    assert shrink["size"]["after"] < shrink["size"]["before"]
    assert shrink["size"]["before"] - shrink["size"]["after"] == max(
        m["size"]["before"] - m["size"]["after"] for m in mutations)


def test_openhands_pairs_and_no_mutation(corpus: Path) -> None:
    path = one(corpus, "openhands__*.json")
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    assert session["mutations"] == [] and session["findings"] == 0
    assert session["tool_pairs"] == {"paired": 1, "pending": 1, "orphans_in_buffers": []}
    assert session["verdict"]["state"] == "healthy"
    proc = ctxwatch("replay", path)
    assert proc.returncode == 0
    assert "1 tool pairs (1 pending), 0 mutation(s)" in proc.stdout
    assert "no context mutation" in proc.stdout


def test_whole_corpus_in_one_run(corpus: Path) -> None:
    files = sorted(p for p in corpus.iterdir() if p.suffix != ".md")
    code, doc, err = replay_json(*files)
    assert code == 0 and err == ""
    assert [s["path"] for s in doc["sessions"]] == [str(p) for p in files]
    assert doc["schema"] == "ctxwatch.replay" and doc["version"] == 1
    assert doc["summary"] == {"sessions": 5, "unreadable": 0, "with_findings": 0,
                              "mutations": sum(len(s["mutations"]) for s in doc["sessions"]), "exit_code": 0}
    assert len({s["loop_id"] for s in doc["sessions"]}) == 5
