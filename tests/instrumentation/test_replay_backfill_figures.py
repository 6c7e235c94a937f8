"""The backfill's append spans carry the figures of whole buffers, though it follows them by their changes.

For corpus sessions picked by what they hold (compactions, microcompactions, resume branches), every
``append`` span's size before / after and literal count before equal those recomputed from the whole
buffers the reader yields (the sum of `Message.size`, the distinct literals of every message); and every
compaction and microcompaction span carries the ``preTokens`` its boundary record holds
(``ctxwatch.tokens.before``; issue 18), no other span any.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from backfill_spans import backfilled
from corpus_files import (
    claude_code_branches,
    claude_code_compactions,
    claude_code_microcompacts,
    claude_code_pre_tokens,
    of_kind,
)

from ctxwatch import semconv
from ctxwatch.literals import LiteralRegistry
from ctxwatch.sessions import Mutation, read_session

CHANGING = [p for p in of_kind("claude_code") if claude_code_compactions(p) or claude_code_microcompacts(p)
            or claude_code_branches(p)]


def _whole_buffer_appends(path: Path) -> list[tuple[int, int, int]]:
    """(size before, size after, literals before) of each append, from the whole buffers."""
    registry, current, out = LiteralRegistry(), (), []
    for event in read_session(path):
        buffer = event.before if isinstance(event, Mutation) else event.messages
        if buffer != current:
            out.append((sum(m.size for m in current), sum(m.size for m in buffer), len(registry.of_all(current))))
        current = event.after if isinstance(event, Mutation) else buffer
    return out


@pytest.mark.parametrize("path", CHANGING, ids=lambda p: p.name[:60])
def test_append_spans_carry_the_whole_buffers_figures(path: Path) -> None:
    audit, spans = backfilled(path, "claude-code")
    assert audit.readable and audit.mutations
    appends = [(s.attributes[semconv.SIZE_BEFORE], s.attributes[semconv.SIZE_AFTER],
                s.attributes[semconv.LITERALS_BEFORE])
               for s in spans if s.attributes[semconv.MUTATION_KIND] == "append"]
    assert appends == _whole_buffer_appends(path)


@pytest.mark.parametrize("path", CHANGING, ids=lambda p: p.name[:60])
def test_compaction_spans_carry_the_recorded_tokens_before(path: Path) -> None:
    _, spans = backfilled(path, "claude-code")
    carried = [(s.attributes[semconv.MUTATION_KIND], s.attributes[semconv.TOKENS_BEFORE]) for s in spans
               if semconv.TOKENS_BEFORE in s.attributes]
    micro = [r["microcompactMetadata"]["preTokens"] for _, r in claude_code_microcompacts(path)
             if isinstance((r.get("microcompactMetadata") or {}).get("preTokens"), int)]
    assert [t for kind, t in carried if kind == "compact"] == claude_code_pre_tokens(path)
    assert [t for kind, t in carried if kind == "prune"] == micro
    assert {kind for kind, _ in carried} <= {"compact", "prune"}
