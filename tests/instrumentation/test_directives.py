"""Directive co-location (record 003): finding the rewrite directive in the buffer, and holding it
out of band with strip-then-reinject."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ctxwatch.directives import DEFAULT_MARKERS, find_directives, out_of_band, strip_directives
from ctxwatch.errors import NonIdempotentRewriteError
from ctxwatch.model import Message
from ctxwatch.simulate.rewriters import ExtractiveSummarizer, InstructionAbsorbingRewriter

SYSTEM = Message("system", "You are an agent. Compress To\n  Essentials every ten steps.")
USER_DIRECTIVE = Message("user", "Now summarize the notes, please.")


def _payload(n: int) -> list[Message]:
    return [Message("assistant", f"Step {i} checked the deploy of /srv/app/step_{i}.py. It passed.") for i in range(n)]


def test_record_003_markers_are_found_case_and_whitespace_insensitively():
    msgs = [SYSTEM, *_payload(2), USER_DIRECTIVE]
    assert find_directives(msgs) == [(0, "compress to essentials"), (3, "summarize the notes")]
    assert {"compress to essentials", "remove redundant", "summarize the notes"} <= set(DEFAULT_MARKERS)


# text made of the markers' words and their pieces, in mixed case, between every kind of white space
PIECES = st.sampled_from(["compress", "Compress", "to", "ESSENTIALS", "essential", "the", "notes", "summarize", "re",
                          "dundant", "remove", "low-", "salience", "x", "İ", "ß", "\u0130ndex"])
GAPS = st.sampled_from([" ", "  ", "\n", "\t", "\u00a0", "\u2003", "\u3000", "", "-"])
TEXTS = st.lists(st.tuples(PIECES, GAPS), max_size=12).map(lambda ts: "".join(p + g for p, g in ts))
MARKERS = st.lists(st.lists(PIECES, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=4)


@given(st.lists(TEXTS, max_size=4), st.one_of(st.just(list(DEFAULT_MARKERS)), MARKERS))
@example(["Now COMPRESS\u2003to\n essentials", "drop LOW-SALIENCE", "compress the notes"], list(DEFAULT_MARKERS))
@example(["\u0130ndex the notes", "ß"], ["i\u0307ndex", "SS", "ß"])
def test_markers_are_found_as_in_the_normalised_text(texts, markers):
    def normalised(text: str) -> str:
        return " ".join(text.lower().split())
    expected = [(i, marker) for i, text in enumerate(texts) for marker in markers
                if normalised(marker) in normalised(text)]
    assert find_directives([Message("user", text) for text in texts], markers) == expected


def test_custom_markers_replace_the_defaults_and_bad_markers_are_refused():
    msgs = [Message("user", "Shrink the Scratchpad now")]
    assert find_directives(msgs) == []
    assert find_directives(msgs, ["shrink the scratchpad"]) == [(0, "shrink the scratchpad")]
    with pytest.raises(ValueError, match="non-empty"):
        find_directives(msgs, ["  "])


def test_strip_then_reinject_puts_directives_back_verbatim_in_place():
    middle = Message("user", "Also: remove redundant steps.")
    payload = _payload(4)
    msgs = [SYSTEM, payload[0], payload[1], middle, payload[2], payload[3], USER_DIRECTIVE]
    stripped = strip_directives(msgs)
    assert list(stripped.payload) == payload
    # the rewrite keeps payload[1] (the middle directive's anchor) and replaces the rest
    summary = Message("assistant", "Summary: steps 0-3 passed.")
    assert stripped.reinject([summary, payload[1]]) == [SYSTEM, summary, payload[1], middle, USER_DIRECTIVE]
    # when the anchor does not survive, the middle directive goes right after the leading ones
    assert stripped.reinject([summary]) == [SYSTEM, middle, summary, USER_DIRECTIVE]


def test_out_of_band_rewrite_never_sees_the_directive():
    seen = []

    def rewrite(messages):
        seen.extend(messages)
        return ExtractiveSummarizer(0.5, keep_last=1)(messages)

    msgs = [SYSTEM, *_payload(6), USER_DIRECTIVE]
    out = out_of_band(rewrite)(msgs)
    assert not find_directives(seen)
    assert out[0] == SYSTEM and out[-1] == USER_DIRECTIVE and len(out) < len(msgs)


def test_out_of_band_refuses_a_rewrite_that_absorbs_its_directive():
    """Record 003, signal 1 at its source: the rewrite writes its directive into the buffer."""
    wrapped = out_of_band(InstructionAbsorbingRewriter(0.5))
    with pytest.raises(NonIdempotentRewriteError, match="instruction absorption"):
        wrapped(_payload(6))
