"""Replay's audit stays linear in the file: a mutation of a long buffer is not measured by walking the
whole buffer again (issue 14: a crafted Claude Code file once took 57 s for 7 MB).

Counted, never timed: the digests the downstream tally compares to find that P_t extends Q_{t-1}, the
meter's own comparison of the two, and how the common prefix of a rewind's buffers is found. Each of
those was a pass over the whole buffer at every mutation (O(m·n) over the file); the audit knows the
answers from following its buffer, so each must cost nothing that grows with the buffer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxwatch import cycles, diff, literals
from ctxwatch.replay import audit_session
from ctxwatch.replay import buffer as replay_buffer


def _record(kind: str, uuid: str, parent: str | None, message: dict) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": "linear", "type": kind,
                       "uuid": uuid, "message": message}) + "\n"


def _rewinding_session(path: Path, turns: int) -> Path:
    """`turns` short turns; every other user record goes back to the turn before (a rewind), naming a
    ticket of its own, so every rewind also loses a literal."""
    lines = [_record("user", "u0", None, {"role": "user", "content": "Plan the migration of ORD-1042"})]
    for i in range(turns):
        lines.append(_record("assistant", f"a{i}", f"u{i}", {"id": f"msg_{i}", "role": "assistant",
                                                            "content": [{"type": "text", "text": f"step {i}"}]}))
        lines.append(_record("user", f"u{i + 1}", f"a{i - 1}" if i % 2 else f"a{i}",
                             {"role": "user", "content": f"go on with OPS-{i:05d}"}))
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture
def counted(monkeypatch):
    """Counts of the comparisons an audit makes (see the module docstring)."""
    counts = {"tally_compared": 0, "meter_compared": 0, "prefix_guessed": 0, "prefix_searched": 0}
    extends, fingerprint_after, common_prefix = literals._extends, cycles.CycleMeter._fingerprint_after, \
        diff.common_prefix

    def counting_extends(digests, prefix):
        counts["tally_compared"] += len(prefix)
        return extends(digests, prefix)

    def counting_fingerprint_after(self, change, extends_last=False):
        if not extends_last:
            counts["meter_compared"] += len(self._last_digests)
        return fingerprint_after(self, change, extends_last)

    def counting_common_prefix(a, b, guess=None):
        found = common_prefix(a, b, guess)
        counts["prefix_guessed" if guess == found else "prefix_searched"] += guess is not None
        return found

    monkeypatch.setattr(literals, "_extends", counting_extends)
    monkeypatch.setattr(cycles.CycleMeter, "_fingerprint_after", counting_fingerprint_after)
    monkeypatch.setattr(replay_buffer, "common_prefix", counting_common_prefix)
    return counts


@pytest.mark.parametrize("turns", [100, 800])
def test_a_rewind_is_measured_without_walking_the_buffer_again(tmp_path: Path, counted, turns: int) -> None:
    audit = audit_session(_rewinding_session(tmp_path / f"rewinds-{turns}.jsonl", turns))
    assert audit.readable, audit.error
    rewinds = [m for m in audit.mutations if m.source == "claude_code.rewind"]
    assert len(rewinds) == turns // 2
    assert all(m.lost for m in rewinds[1:])  # every rewind after the first loses its ticket
    assert max(m.messages.before for m in rewinds) > turns // 2  # the buffer grew with the file
    assert counted["tally_compared"] == 0
    assert counted["meter_compared"] == 0
    assert counted["prefix_guessed"] == len(rewinds) and counted["prefix_searched"] == 0
