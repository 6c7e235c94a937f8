"""An OpenHands ``finish`` action is a message, not a pending tool call: OpenHands' ``ConversationMemory``
(openhands/memory/conversation_memory.py, ``_process_action``) drops the finish's tool call metadata and sends
its thought (with the model response's content on a line after it when it differs) as an assistant message;
no observation ever answers it. Read on the corpus's own OpenHands streams that end with one."""

from __future__ import annotations

from pathlib import Path

import corpus_files as raw
import pytest

from ctxwatch.invariants.pairing import index_pairs
from ctxwatch.replay.audit import audit_session
from ctxwatch.sessions import Snapshot, read_session


def _finishing() -> list[Path]:
    """The corpus OpenHands streams whose last action is the agent's finish call (with its model response)."""
    out = []
    for path in raw.of_kind("openhands"):
        actions = [e for e in raw.document(path) if "action" in e]
        if actions and actions[-1].get("action") == "finish" and actions[-1].get("tool_call_metadata"):
            out.append(path)
    return out


def _expected_text(finish: dict) -> str:
    thought = finish["args"].get("thought") or ""
    thought = thought.get("text", "") if isinstance(thought, dict) else thought
    content = finish["tool_call_metadata"]["model_response"]["choices"][0]["message"].get("content") or ""
    return content if not thought else thought if thought == content else thought + "\n" + content


@pytest.mark.parametrize("path", _finishing() or [pytest.param(None, marks=pytest.mark.skip("no finish in corpus"))],
                         ids=lambda p: p.name if p else "none")
def test_a_finish_is_the_last_assistant_message_not_a_pending_call(path: Path) -> None:
    finish = [e for e in raw.document(path) if e.get("action") == "finish"][-1]
    final = [e for e in read_session(path) if isinstance(e, Snapshot)][-1]
    last = final.messages[-1]
    assert (last.role, last.call_ids, last.text) == ("assistant", (), _expected_text(finish))
    assert finish["tool_call_metadata"]["tool_call_id"] not in index_pairs(final.messages).pending
    audit = audit_session(path)
    actions, observations = raw.openhands_tool_ids(path)  # the finish's call id left out: it is no call
    assert audit.pending == len(actions - observations)
    assert audit.tool_pairs == len(actions & observations)
