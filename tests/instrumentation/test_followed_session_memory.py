"""A followed session's memory follows its current buffer, not the file: the text a compaction dropped is
not held (measured with tracemalloc while the stream waits at the end of the file, as ``watch`` does)."""

from __future__ import annotations

import gc
import json
import random
import string
import tracemalloc
from pathlib import Path

import pytest
from opentelemetry.trace import NoOpTracerProvider

from ctxwatch.contraction import DetectorConfig
from ctxwatch.literals import LiteralRegistry
from ctxwatch.replay.audit import Auditor, SessionAudit, feed
from ctxwatch.replay.backfill import Backfill
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.watch.live import LiveSession
from ctxwatch.watch.tail import Tail

OUTPUT_CHARS = 1_000_000


def _record(kind: str, uuid: str, parent: str | None, **fields: object) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": "memory", "type": kind,
                       "uuid": uuid, **fields}) + "\n"


def _session(path: Path, output: str, ends_at_summary: bool) -> None:
    """A tool call whose result is `output`, a compaction, and (unless `ends_at_summary`) two short turns."""
    say = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    lines = [
        _record("user", "u1", None, message={"role": "user", "content": "List the build outputs of ORD-1042"}),
        _record("assistant", "a1", "u1", message={"id": "msg_1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls -R build"}}]}),
        _record("user", "r1", "a1", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": output}]}),
        _record("assistant", "a2", "r1", message={"id": "msg_2", **say}),
        _record("system", "b1", None, subtype="compact_boundary", content="Conversation compacted",
                compactMetadata={"trigger": "auto", "preTokens": 250_000}),
        _record("user", "s1", "b1", isCompactSummary=True,
                message={"role": "user", "content": "Summary: the build outputs of ORD-1042 were listed."}),
        _record("assistant", "a3", "s1", message={"id": "msg_3", **say}),
        _record("user", "u2", "a3", message={"role": "user", "content": "Go on"}),
        _record("assistant", "a4", "u2", message={"id": "msg_4", **say}),
    ]
    path.write_text("".join(lines[:6] if ends_at_summary else lines), encoding="utf-8")


def _held_when_caught_up(path: Path) -> tuple[int, Auditor]:
    """Bytes of Python heap the session's reader, audit and span emitter hold while it waits for more."""
    held: list[int] = []
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]

        def caught_up() -> bool:
            gc.collect()
            held.append(tracemalloc.get_traced_memory()[0] - start)
            return False

        session = LiveSession(Tail(path), "claude_code", caught_up, lambda _note: None)
        registry = LiteralRegistry()
        auditor = Auditor(SessionAudit(str(path), "memory", DetectorConfig(), format="claude_code"), session,
                          registry)
        backfill = Backfill(MutationTelemetry(NoOpTracerProvider(), capture_content=False), lambda: None,
                            loop_id="memory", agent="claude-code", service="memory", registry=registry)
        feed(session, auditor, backfill, final=False)
    finally:
        tracemalloc.stop()
    return held[0], auditor


@pytest.mark.parametrize("ends_at_summary", [False, True])
def test_a_followed_session_does_not_hold_the_text_its_compaction_dropped(tmp_path, ends_at_summary):
    output = "".join(random.Random(18).choices(string.ascii_letters + " \n", k=OUTPUT_CHARS))  # unique text
    path = tmp_path / "session.jsonl"
    _session(path, output, ends_at_summary)
    held, auditor = _held_when_caught_up(path)
    (compaction,) = auditor.audit.mutations
    assert compaction.kind == "compact" and compaction.size_before > OUTPUT_CHARS  # the text was read and measured
    assert auditor.buffer.size < 1000  # what is left after the compaction is short
    # the text itself is held twice over (its JSON string and its message): 2.1 MB when the dropped epoch was kept
    assert held < OUTPUT_CHARS / 4, f"{held} bytes held after a compaction dropped {OUTPUT_CHARS} characters"
