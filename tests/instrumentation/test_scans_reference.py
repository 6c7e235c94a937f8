"""The two scans behind every measurement give, bit for bit, what their straightforward references
give (tests/support/reference_scans.py): the literal sets of `LiteralRegistry` (candidate tokens,
prefilters, patterns compiled to begin with a character class) and the fingerprint contributions of
`Fingerprinter` (split of the translated bytes, lane codes counted per update), on every message of
every readable corpus session and on generated texts built from the characters each fast path treats
specially."""

from __future__ import annotations

import pytest
from corpus_files import readable_files
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_scans import reference_candidates, reference_extract, reference_features, reference_lanes

from ctxwatch.fingerprint import Fingerprinter, message_features
from ctxwatch.literals import LiteralRegistry, _Candidates, literal_text
from ctxwatch.model import Message, TextPart, ToolCall, ToolResult
from ctxwatch.sessions import Mutation, Snapshot, read_session


def corpus_messages() -> list[Message]:
    """Every distinct message of every readable corpus session (snapshots, and both sides of mutations)."""
    found: dict[int, Message] = {}
    for path in readable_files():
        for event in read_session(path):
            if isinstance(event, Snapshot):
                buffers = [event.messages]
            elif isinstance(event, Mutation):
                buffers = [event.before, event.after]
            else:
                continue
            for buffer in buffers:
                for m in buffer:
                    found.setdefault(m.digest, m)
    return list(found.values())


CORPUS_MESSAGES = corpus_messages()


def assert_same_as_reference(messages: list[Message]) -> None:
    registry, fingerprinter = LiteralRegistry(), Fingerprinter()
    for m in messages:
        for text in {literal_text(m), literal_text(m, tool_output=False)}:
            assert registry.extract(text) == reference_extract(text), text[:200]
            candidates, expected = _Candidates(text), reference_candidates(text)
            assert candidates.joined == "\n".join(token for _, token in expected)
            assert candidates._origins == [offset for offset, _ in expected]  # what user patterns are ordered by
        assert message_features(m) == reference_features(m), m.text[:200]
        contribution = fingerprinter.message(m)
        assert fingerprinter.decode(contribution.packed) == reference_lanes(m), m.text[:200]
        assert contribution.features == len(reference_features(m))
    total = [sum(lane) for lane in zip(*map(reference_lanes, messages), strict=True)] if messages else None
    buffer = fingerprinter.buffer(messages)
    assert total is None or buffer.vector == total


@pytest.mark.skipif(not CORPUS_MESSAGES, reason="no readable corpus session")
def test_every_corpus_message_scans_as_its_reference():
    assert len(CORPUS_MESSAGES) > 100  # the corpus was read, not skipped
    assert_same_as_reference(CORPUS_MESSAGES)


# what the fast paths treat specially: the candidate marks (digits, / _ : -, capitals), white space
# that is not a space (str.split and \s must agree), punctuation (a word break), non-ASCII letters
# and digits, and literal-shaped pieces
PIECES = ["INV-20418", "deadbeef12", "550e8400-e29b-41d4-a716-446655440000", "https://x.io/a/b.", "/etc/app.yaml",
          "src/app/main.py", "ERR_CONN_RESET", "EACCES", "E2BIG", "call_7f3a", "0.75", "123456", "`config_path`",
          "C:\\Users\\bob\\f.txt", "0xdeadbeef1", "NASA", "The", "McDonald", "aB", "Ab", "ledger", "ÉCOLE", "straße",
          "İstanbul", "中文", "٣٤٥٦٧", "x/y", "a:b", "-", "_", "/", ":", "(see", "e.g.", "foo,bar", "it's", "ab—cd"]
SEPARATORS = [" ", "", "\n", "\t", "  ", "\u00a0", "\u2003", "\x1c", "\u3000", ".", ", ", "/", "-", "`"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(SEPARATORS)), max_size=30),
       st.text(max_size=40))
def test_generated_texts_scan_as_their_reference(pieces, noise):
    text = "".join(p + s for p, s in pieces) + noise
    messages = [Message("user", [TextPart(text)]),
                Message("assistant", [TextPart(noise), ToolCall("call_1", "run", f'{{"cmd": "{text[:60]!r}"}}')]),
                Message("tool", [ToolResult("call_1", text)])]
    assert_same_as_reference(messages)
