"""Review F2: `ctxwatch replay` of a format that records whole buffers judges a recorded step that
elides an old tool output in place *and* appends the next turn as the guard judges the same change live:
the guard takes the turns the caller appended since its last observe() as appended first, and the change
left, the elision, is no cycle of the alarm (docs/replay.md; docs/alarm.md "What is a cycle"). Replay
takes the turns the buffer after ends with from the model's reply on as appended
(`sessions.events.buffer_change`): no d, no verdict, nothing fed to the detector, and the appended turn
not counted as added. A summary the rewrite writes at the end is still the rewrite's own: a cycle in both.

Each case is run through the CLI as a user runs it, and through a live `ContextGuard` given the same
buffers: on a messages JSONL file written here, and on the corpus SWE-agent trajectory whose steps elide
old outputs ("Old environment output: (N lines omitted)"), picked by content.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import corpus_files as raw
import pytest
from replay_fixtures import replay_json

from ctxwatch import ContextGuard
from ctxwatch.sessions.swe_agent import chat_message

OUT = "AUTHORS.rst LICENSE RELEASING.md performance/ src/ CHANGELOG.rst MANIFEST.in tests/ docs/ setup.cfg " * 6
SYSTEM = {"role": "system", "content": "You are a coding agent. Fix issue MM-1867 in src/marshmallow/fields.py."}
USER = {"role": "user", "content": "Please fix the TimeDelta serialization bug (issue MM-1867)."}


def call(n: int, command: str) -> dict:
    return {"role": "assistant", "content": f"Step {n}.", "tool_calls": [
        {"id": f"call_{n}", "type": "function", "function": {"name": "bash", "arguments": json.dumps(
            {"command": command})}}]}


def result(n: int, content: str) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": content}


CALL1, OUT1 = call(1, "ls"), result(1, OUT)
CALL2, OUT2 = call(2, "open src/marshmallow/fields.py"), result(2, "1: import datetime\n2: class TimeDelta(Field): ...")
CLEARED = result(1, "Old environment output: (7 lines omitted)")
SUMMARY = {"role": "user", "content": "Summary so far: listed the repository; the bug is in TimeDelta."}

# (name, buffer before, buffer after, the turns appended before the change, whether the change is a cycle)
CASES = [
    ("elision plus the next turn", [SYSTEM, USER, CALL1, OUT1], [SYSTEM, USER, CALL1, CLEARED, CALL2, OUT2],
     [CALL2, OUT2], False),
    ("elision alone", [SYSTEM, USER, CALL1, OUT1], [SYSTEM, USER, CALL1, CLEARED], [], False),
    ("summary written at the end", [SYSTEM, USER, CALL1, OUT1, CALL2, OUT2], [SYSTEM, USER, SUMMARY], [], True),
    ("summary at the end, then the next turn", [SYSTEM, USER, CALL1, OUT1],
     [SYSTEM, USER, SUMMARY, CALL2, OUT2], [CALL2, OUT2], True),
]


def live(before: list[dict], after: list[dict], appended: list[dict]) -> float | None:
    """The hash distance a live guard gives the change (None: no cycle of the alarm), the caller having
    observed `before` and appended `appended` to it since."""
    guard = ContextGuard("f2-live", agent="test")
    guard.observe(before)
    report, _ = guard.resolve(after, current=[*before, *appended])
    return report.hash_distance


@pytest.mark.parametrize(("before", "after", "appended", "cycle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_replay_judges_a_recorded_change_as_the_live_guard(tmp_path: Path, before: list[dict], after: list[dict],
                                                            appended: list[dict], cycle: bool) -> None:
    path = tmp_path / "buffers.jsonl"
    path.write_text("".join(json.dumps(b) + "\n" for b in (before, after)))
    code, doc, _ = replay_json(path)
    assert code == 0
    (mutation,) = doc["sessions"][0]["mutations"]
    assert (mutation["cycle"] is not None) == (live(before, after, appended) is not None) == cycle
    if not cycle:
        assert mutation["no_cycle"] == "elision" and mutation["hash_distance"] is None
        assert mutation["messages"]["added"] == 0 and mutation["messages"]["after"] == len(after)


MARKER = re.compile(r"^Old environment output: \(\d+ lines omitted\)")
SWE_AGENT_ELIDING = [p for p in raw.of_kind("swe_agent") if any(
    MARKER.match(str(msg.get("content", ""))) for step in raw.document(p).get("trajectory", ())
    for msg in step.get("messages", ()))]


@pytest.mark.parametrize("path", SWE_AGENT_ELIDING, ids=lambda p: p.name[:60])
def test_corpus_elision_steps_are_no_cycle_as_for_the_guard(path: Path) -> None:
    code, doc, _ = replay_json(path)
    assert code == 0
    (session,) = doc["sessions"]
    mutations = session["mutations"]
    assert mutations
    trajectory = raw.document(path)["trajectory"]
    for m in mutations:
        before = [chat_message(msg) for msg in trajectory[m["step"] - 1]["messages"]]
        after = [chat_message(msg) for msg in trajectory[m["step"]]["messages"]]
        # SWE-agent elides in place: the buffer after keeps every message of the one before, then its new turn
        assert [msg["role"] for msg in after[: len(before)]] == [msg["role"] for msg in before]
        assert live(before, after, after[len(before):]) is None
        assert (m["cycle"], m["no_cycle"], m["hash_distance"], m["contraction"]) == (None, "elision", None, None)
        assert m["messages"]["added"] == 0 and m["messages"]["elided"] >= 1
    assert session["verdict"]["explanation"] == "healthy: no rewrite cycle recorded, nothing to judge"
