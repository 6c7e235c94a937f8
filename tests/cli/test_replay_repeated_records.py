"""A Claude Code record logged twice (the same ``uuid``: claude-code#66947, ctxrs/ctx#663) is one record, as Claude
Code's own loader reads it (one record per uuid): every corpus Claude Code session with 5 % of its records logged
again (seeded; right after themselves or up to 300 lines later; byte for byte or with other metadata) replays, in
``ctxwatch replay --json``, to the original's document (mutations, findings, tool pairs, steps, lines put back to
the original's), with its exit code. Before the fix a copied tool result was a second result (a ``tool_pairing``
finding, exit 1) and a copied record a rewind."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus_files import CORPUS, of_kind
from repeated_records import variants
from replay_fixtures import replay_json

SESSIONS = of_kind("claude_code", CORPUS)
_FILE_FIGURES = ("path", "bytes")  # the file's own: another file


def _session(document: dict) -> dict:
    (session,) = document["sessions"]
    return {k: v for k, v in session.items() if k not in _FILE_FIGURES}


@pytest.mark.parametrize("original", SESSIONS, ids=lambda p: p.name[:48])
def test_records_logged_twice_replay_as_the_original(original: Path, tmp_path: Path) -> None:
    code, document, _ = replay_json(original)
    expected = _session(document)
    for v in variants(original):
        assert v.copies, v.name
        path = v.write(tmp_path / original.name)
        got_code, got, _ = replay_json(path)
        assert (got_code, v.in_original(_session(got))) == (code, expected), v.name
