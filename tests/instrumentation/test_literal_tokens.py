"""Literals read token by token (`ctxwatch.token_cache`) are exactly the literals of the whole-text
scan every registry made before (`LiteralRegistry.extract_whole`; test_scans_reference.py checks `extract`
against the plain reference on the corpus): on every text of every readable corpus session, on generated
texts mixing ids, paths, UUIDs, numbers, punctuation and white space, with a cache that is warm,
cold or tiny; a registry with a pattern of its own scans the whole text; the cache stays bounded."""

from __future__ import annotations

import string

import pytest
from corpus_files import readable_files
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_scans import reference_extract

from ctxwatch.literals import LiteralRegistry, literal_text
from ctxwatch.model import Message
from ctxwatch.sessions import Mutation, Snapshot, read_session
from ctxwatch.token_cache import TOKEN_LIMIT, TokenCache

WHITE_SPACE = [chr(c) for c in range(0x3001) if chr(c).isspace()]  # every white space character but none above


def session_texts(path) -> list[str]:
    """Every distinct text literals are read from in one session: each message, with and without its tool output."""
    seen: dict[int, Message] = {}
    for event in read_session(path):
        buffers = [event.messages] if isinstance(event, Snapshot) else [event.before, event.after] \
            if isinstance(event, Mutation) else []
        for buffer in buffers:
            for m in buffer:
                seen.setdefault(m.digest, m)
    return list(dict.fromkeys(text for m in seen.values()
                              for text in (literal_text(m), literal_text(m, tool_output=False))))


def tiny(registry: LiteralRegistry) -> LiteralRegistry:
    """`registry` with a token cache of 64 tokens of at most 12 characters, texts split 200 characters at a time."""
    registry._tokens = TokenCache(registry._token_literals, limit=64, max_token=12, window=200)
    return registry


@pytest.mark.parametrize("path", readable_files(), ids=lambda p: p.name[:60])
def test_every_corpus_text_has_the_literals_of_the_whole_text_scan(path):
    texts = session_texts(path)
    assert texts  # the session was read
    warm, small = LiteralRegistry(), tiny(LiteralRegistry())  # one registry per file, as replay has
    for text in texts:
        expected = warm.extract_whole(text)
        assert warm.extract(text) == expected, text[:200]
        assert small.extract(text) == expected, text[:200]
    assert 0 < len(warm._tokens) <= TOKEN_LIMIT and len(small._tokens) <= 64


IDS = [st.uuids().map(str), st.uuids().map(lambda u: str(u).upper()),
       st.integers(0, 10**12).map(str), st.floats(0, 1e6, allow_nan=False).map(str),
       st.from_regex(r"[A-Z]{1,6}-\d{1,5}", fullmatch=True),  # tickets, and near misses
       st.from_regex(r"(call|toolu|fc|msg|run)_[A-Za-z0-9_-]{0,8}", fullmatch=True),
       st.from_regex(r"(0x)?[0-9a-fA-F]{3,12}", fullmatch=True),
       st.from_regex(r"E[A-Z0-9]{1,10}|[A-Z][A-Z0-9]{0,4}(_[A-Z0-9]{1,4}){0,3}", fullmatch=True),
       st.from_regex(r"(~|\.{1,2})?/?([\w.@+-]{1,6}/){0,3}[\w.@+-]{0,6}(\.[a-z]{1,4})?", fullmatch=True),
       st.from_regex(r"(https?|s3|file)://[a-z.]{1,8}(/[\w.,;:!?-]{0,6}){0,3}", fullmatch=True),
       st.from_regex(r"[A-Za-z]:\\([\w ]{1,5}\\){0,2}[\w.]{0,6}", fullmatch=True),
       st.from_regex(r"`[^`\n]{0,12}`?", fullmatch=True),
       st.sampled_from(["The", "NASA", "ledger", "e.g.", "İstanbul", "straße", "٣٤٥٦٧", "中文", "v1.2.3", "a:b"]),
       st.text(string.punctuation, min_size=1, max_size=3)]
PIECE = st.one_of(*IDS)
SEPARATOR = st.one_of(st.sampled_from(WHITE_SPACE), st.text(st.sampled_from(WHITE_SPACE), max_size=3),
                      st.sampled_from(["", ".", ", ", "/", "-", "`", "(", ")", '"', "\\n", ":", "_"]))
TEXT = st.lists(st.tuples(PIECE, SEPARATOR), max_size=25).map(lambda pairs: "".join(p + s for p, s in pairs))
WARM = LiteralRegistry()  # shared by every example: a cache warmed by the texts before


@settings(max_examples=250, deadline=None)
@given(TEXT, st.text(max_size=30))
def test_generated_texts_have_the_literals_of_the_whole_text_scan(text, noise):
    assert WARM.extract_whole(text) == reference_extract(text)
    for t in (text, noise + text + noise):
        expected = WARM.extract_whole(t)
        assert WARM.extract(t) == expected
        assert LiteralRegistry().extract(t) == expected  # cold
        assert tiny(LiteralRegistry()).extract(t) == expected


def test_a_pattern_of_ones_own_is_matched_in_the_whole_text():
    # across white space, and hiding the tickets it holds (an atomic match): no token split could find that
    registry = LiteralRegistry(extra={"pair": r"[A-Z]+-\d{3,} [A-Z]+-\d{3,}"})
    assert registry.extract("see ABC-123 DEF-456 now") == {"ABC-123 DEF-456"}
    later = LiteralRegistry()
    assert later.extract("see ABC-123 DEF-456 now") == {"ABC-123", "DEF-456"}
    later.register("pair", r"[A-Z]+-\d{3,} [A-Z]+-\d{3,}")
    assert later.extract("see ABC-123 DEF-456 now") == {"ABC-123 DEF-456"}


def test_each_distinct_token_is_computed_once_while_it_is_kept():
    computed: list[str] = []

    def upper(tokens: list[str]) -> list[frozenset[str]]:
        computed.extend(tokens)
        return [frozenset({t.upper()}) for t in tokens]

    cache = TokenCache(upper)
    assert cache.union("a b\ta\u3000c") == {"A", "B", "C"}
    assert cache.union("c b d") == {"C", "B", "D"}
    assert sorted(computed) == ["a", "b", "c", "d"]


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from(["x", "y", "z", "1", "-", *WHITE_SPACE[:6]]), max_size=300),
       st.integers(1, 8), st.integers(1, 6), st.integers(1, 50))
def test_the_cache_is_bounded_and_gives_the_union_of_its_tokens(text, limit, max_token, window):
    cache = TokenCache(lambda tokens: [frozenset({t, t[::-1]}) for t in tokens], limit=limit, max_token=max_token,
                       window=window)
    for _ in range(2):
        assert cache.union(text) == {v for t in text.split() for v in (t, t[::-1])}
        assert len(cache) <= limit
        assert all(len(token) <= max_token for token in cache._kept)
