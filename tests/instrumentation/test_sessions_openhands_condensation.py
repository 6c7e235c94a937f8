"""Review F10/F11 (session 7): OpenHands condensations read as OpenHands' `View.from_events` builds
what the model sees (openhands/memory/view.py, conversation_memory.py).

The streams are the corpus's own OpenHands events (the file with the most tool pairs), re-numbered
and written to a temporary directory with condensation actions as the LLMSummarizingCondenser
writes them. The expected buffers are worked out here from the raw events: the summary offset counts
view events (not messages, not state changes), only the latest summary is in the view, and a call or
result whose partner a condensation forgot is not sent.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import corpus_files as raw
import pytest

from ctxwatch.invariants.pairing import index_pairs
from ctxwatch.model import Message
from ctxwatch.replay.audit import audit_session
from ctxwatch.sessions import Mutation, Snapshot, read_session


def tool_pairs(events: list[dict]) -> list[tuple[dict, dict]]:
    """(action, observation) of every answered tool call, in stream order."""
    observations = {e["cause"]: e for e in events if "observation" in e and e.get("tool_call_metadata")}
    return [(e, observations[e["id"]]) for e in events
            if "action" in e and e.get("tool_call_metadata") and e["id"] in observations]


def _template() -> list[dict]:
    streams = [d for d in map(raw.document, raw.of_kind("openhands")) if isinstance(d, list)]
    best = max(streams, key=lambda d: len(tool_pairs(d)), default=[])
    if len(tool_pairs(best)) < 4 or not any(e.get("action") == "message" and e.get("source") == "user" for e in best):
        pytest.skip("no corpus OpenHands stream with a user message and 4 answered tool calls")
    return best


def first_user_message(events: list[dict]) -> dict:
    return next(e for e in events if e.get("action") == "message" and e.get("source") == "user")


def pair(template: tuple[dict, dict], ids: tuple[int, int], new_call: str, response_id: str) -> list[dict]:
    """A copy of a corpus tool pair under new event ids, call id and model response id."""
    action, observation = copy.deepcopy(template[0]), copy.deepcopy(template[1])
    action["id"], observation["id"], observation["cause"] = ids[0], ids[1], ids[0]
    for event in (action, observation):
        event["tool_call_metadata"]["tool_call_id"] = new_call
        event["tool_call_metadata"]["model_response"]["id"] = response_id
    calls = action["tool_call_metadata"]["model_response"]["choices"][0]["message"].get("tool_calls") or []
    for call in calls[:1]:
        call["id"] = new_call
    return [action, observation]


def condensation(event_id: int, forgotten: list[int], summary: str | None = None, offset: int | None = None) -> dict:
    args: dict = {"forgotten_event_ids": forgotten, "forgotten_events_start_id": None,
                  "forgotten_events_end_id": None, "summary": summary, "summary_offset": offset}
    return {"id": event_id, "source": "agent", "action": "condensation", "message": "condensed", "args": args}


def write(tmp_path: Path, events: list[dict]) -> Path:
    path = tmp_path / "openhands-events.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    return path


def mutations(path: Path) -> list[Mutation]:
    return [e for e in read_session(path) if isinstance(e, Mutation)]


def final(path: Path) -> tuple[Message, ...]:
    return [e for e in read_session(path) if isinstance(e, Snapshot) and e.final][0].messages


def assert_paired(messages: tuple[Message, ...]) -> None:
    pairs = index_pairs(messages)
    assert not pairs.orphan_calls and not pairs.orphan_results


def summarized(tmp_path: Path, events: list[dict]) -> tuple[tuple[Message, ...], int, Path]:
    """The buffer after the one condensation of `events` (checked to leave no orphan), where its summary is,
    and the file."""
    path = write(tmp_path, events)
    (mutation,) = mutations(path)
    assert_paired(mutation.after)
    return mutation.after, mutation.after.index(mutation.summary), path


def call_id(event: dict) -> str:
    return event["tool_call_metadata"]["tool_call_id"]


def test_summary_offset_counts_the_events_of_a_parallel_response(tmp_path: Path) -> None:
    """keep_first=5: user, calls A and B of one response, their results -- 5 view events but 4 messages."""
    stream = _template()
    corpus_pairs = tool_pairs(stream)
    a = pair(corpus_pairs[0], (20, 21), "toolu_A", "resp-1")
    b = pair(corpus_pairs[1], (22, 23), "toolu_B", "resp-1")
    call = a[0]["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"][0]
    for action in (a[0], b[0]):  # one response recorded with both calls, as OpenHands records each action
        action["tool_call_metadata"]["model_response"]["choices"][0]["message"]["tool_calls"] = [
            dict(call, id="toolu_A"), dict(call, id="toolu_B")]
    events = [first_user_message(stream), a[0], b[0], a[1], b[1]]
    events += pair(corpus_pairs[2], (30, 31), "toolu_C", "resp-2")
    events += pair(corpus_pairs[3], (32, 33), "toolu_D", "resp-3")
    events += pair(corpus_pairs[0], (34, 35), "toolu_E", "resp-4")
    events.append(condensation(40, [30, 31, 32, 33], "Checked the workspace.", 5))
    after, at, path = summarized(tmp_path, events)
    # OpenHands inserts it after the fifth kept event, the result of call B; E's pair follows it whole
    assert [m.role for m in after[:at]] == ["user", "assistant", "tool", "tool"]
    assert after[at - 1].result_ids == ("toolu_B",) and after[at + 1].call_ids == ("toolu_E",)
    assert audit_session(path).findings() == []


def test_summary_offset_counts_no_state_change_but_every_view_event(tmp_path: Path) -> None:
    """The whole corpus stream (state changes and null observations included: not in OpenHands' view) with
    a recall observation after the user message (in the view, no message of the reader): offset 4 is after
    the first tool pair."""
    stream = copy.deepcopy(_template())
    user = first_user_message(stream)
    recall = {"id": 1000, "source": "environment", "observation": "recall", "cause": user["id"],
              "content": "Added workspace context", "extras": {"recall_type": "workspace_context"}}
    stream.insert(stream.index(user) + 1, recall)
    first, second = tool_pairs(stream)[:2]
    stream.append(condensation(1001, [second[0]["id"], second[1]["id"]], "Edited a file.", 4))
    after, at, path = summarized(tmp_path, stream)
    assert at == 3 and after[0].role == "user" and after[1].call_ids == (call_id(first[0]),)
    assert after[2].result_ids == (call_id(first[0]),)
    assert audit_session(path).findings() == []


def test_a_response_straddling_the_offset_goes_after_the_summary(tmp_path: Path) -> None:
    """Offset 2 ends between the first call and its result: OpenHands sends the response once its result is in."""
    stream = copy.deepcopy(_template())
    first, second = tool_pairs(stream)[:2]
    stream.append(condensation(1001, [second[0]["id"], second[1]["id"]], "Edited a file.", 2))
    after, at, _ = summarized(tmp_path, stream)
    assert at == 1 and after[2].call_ids == (call_id(first[0]),)


def test_only_the_latest_summary_is_in_the_buffer(tmp_path: Path) -> None:
    """Two summarizing condensations, then one that only forgets: the view holds the latest summary, so
    what the second summary drops of the first is lost."""
    stream = copy.deepcopy(_template())
    pairs = tool_pairs(stream)
    ids = [[action["id"], observation["id"]] for action, observation in pairs]
    one = "SUMMARY ONE: wrote /workspace/first_draft.txt"
    two = "SUMMARY TWO: wrote the app"
    stream.insert(stream.index(pairs[2][0]), condensation(2000, ids[1], one, 1))
    stream.insert(stream.index(pairs[3][0]), condensation(2001, ids[2], two, 1))
    stream.append(condensation(2002, ids[0]))
    path = write(tmp_path, stream)
    first, second, third = mutations(path)
    texts = [m.text for m in final(path)]
    assert two in texts and one not in texts
    assert [m.text for m in second.before].count(one) == 1
    assert [m.text for m in second.after].count(one) == 0 and second.after[1].text == two
    assert third.kind == "prune" and third.after[1].text == two and third.after.count(third.after[1]) == 1
    audit = audit_session(path)
    assert "/workspace/first_draft.txt" in audit.mutations[1].lost
    assert audit.findings() == []


def test_a_pair_the_condensation_splits_is_not_sent(tmp_path: Path) -> None:
    """Forgetting a call but not its result (and a result but not the others of its response): OpenHands sends
    neither half, so the buffer has no orphan and the mutation counts the split pairs."""
    stream = copy.deepcopy(_template())
    pairs = tool_pairs(stream)
    stream.append(condensation(3000, [pairs[1][0]["id"]]))
    path = write(tmp_path, stream)
    (mutation,) = mutations(path)
    split_call = call_id(pairs[1][0])
    assert split_call in index_pairs(mutation.before).calls
    assert split_call not in {i for m in mutation.after for i in m.call_ids + m.result_ids}
    assert mutation.details == {"forgotten_events": 1, "split_tool_pairs": 1}
    assert_paired(mutation.after)
    assert audit_session(path).findings() == []


def test_a_split_parallel_response_leaves_whole(tmp_path: Path) -> None:
    corpus_pairs = tool_pairs(_template())
    a = pair(corpus_pairs[0], (20, 21), "toolu_A", "resp-1")
    b = pair(corpus_pairs[1], (22, 23), "toolu_B", "resp-1")
    events = [first_user_message(_template()), a[0], b[0], a[1], b[1]]
    events += pair(corpus_pairs[2], (30, 31), "toolu_C", "resp-2")
    events.append(condensation(40, [23]))
    path = write(tmp_path, events)
    (mutation,) = mutations(path)
    assert [m.role for m in mutation.before] == ["user", "assistant", "tool", "tool", "assistant", "tool"]
    assert [m.call_ids + m.result_ids for m in mutation.after] == [(), ("toolu_C",), ("toolu_C",)]
    assert mutation.details["split_tool_pairs"] == 1
    assert audit_session(path).findings() == []


def test_a_result_of_a_call_forgotten_in_flight_is_not_sent(tmp_path: Path) -> None:
    """A condensation recorded while a call ran forgets the call: its result, recorded later, never reaches
    the model. The audit warns of the call dropped in flight; no unpaired id is found in a buffer."""
    stream = copy.deepcopy(_template())
    action, _ = tool_pairs(stream)[-1]
    stream.insert(stream.index(action) + 1, condensation(4000, [action["id"]]))
    path = write(tmp_path, stream)
    assert call_id(action) not in {i for m in final(path) for i in m.call_ids + m.result_ids}
    audit = audit_session(path)
    assert audit.findings() == [] and not audit.buffer_orphans
    assert [t.id for t in audit.mutations[0].in_flight] == [call_id(action)]
