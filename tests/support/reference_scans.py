"""Straightforward references for the two scans behind every measurement, written for clarity, not
speed: every default literal pattern, as documented, over the whole text (`ctxwatch.literals` scans
only candidate tokens, skips patterns by prefilter and compiles some patterns in an equivalent form),
and a message's fingerprint contribution from a regular expression's words and a histogram of lane
codes (`ctxwatch.fingerprint` splits the translated UTF-8 bytes and counts the codes of a whole
update at once). The optimised paths must give the same values, bit for bit."""

from __future__ import annotations

import re
from collections import Counter

import xxhash

from ctxwatch.fingerprint import FEATURE_SEED, LANES, PUNCTUATION
from ctxwatch.literals import CONTAINER_PATTERNS, DEFAULT_PATTERNS
from ctxwatch.model import Message

_COMPILED = {name: re.compile(pattern) for name, pattern in DEFAULT_PATTERNS.items()}
# a whole white-space-delimited token holding a digit, / _ : or -, or two capitals
_CANDIDATE = re.compile(r"(?<!\S)(?=\S*?[\d/_:-]|[^\sA-Z]*[A-Z][^\sA-Z]*[A-Z])\S+")
_WORD = re.compile(r"[^\s" + re.escape(PUNCTUATION) + r"]+")


def reference_extract(text: str) -> frozenset[str]:
    """Every default pattern over the whole text; matches inside longer atomic matches dropped,
    matches inside containers kept; values with fewer than two letters or digits dropped."""
    spans = []
    for name, pattern in _COMPILED.items():
        g = 1 if pattern.groups else 0
        spans += [(m.start(g), -m.end(g), name in CONTAINER_PATTERNS, m.group(g))
                  for m in pattern.finditer(text) if m.group(g)]
    found, reach = set(), -1
    for start, neg_end, container, value in sorted(spans):
        if -neg_end <= reach and start < reach:
            continue
        if sum(c.isalnum() for c in value) >= 2:
            found.add(value)
        if not container:
            reach = max(reach, -neg_end)
    return frozenset(found)


def reference_candidates(text: str) -> list[tuple[int, str]]:
    """(offset, token) of every token that could hold a token-local literal, in text order."""
    return [(m.start(), m.group()) for m in _CANDIDATE.finditer(text)]


def reference_features(message: Message) -> set[str]:
    """Lower-cased word bigrams (a word: a run of neither white space nor punctuation)."""
    words = _WORD.findall(message.text.lower())
    if len(words) > 1:
        return {f"{a} {b}" for a, b in zip(words, words[1:], strict=False)}
    if words:
        return set(words)
    return {f"\x00{message.role}\x00{message.digest_hex}"}


def reference_lanes(message: Message, lanes: int = LANES, seed: int = FEATURE_SEED) -> list[int]:
    """The message's signed lane vector: each feature's xxh3-64 picks a lane and a sign."""
    codes = Counter(xxhash.xxh3_64_intdigest(f, seed) % (2 * lanes) for f in reference_features(message))
    vector = [0] * lanes
    for code, count in codes.items():
        vector[code // 2] += count if code % 2 else -count
    return vector
