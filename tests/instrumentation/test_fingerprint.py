"""The buffer fingerprint (issue 3, DESIGN.md "The contraction regime"): locality-sensitive, stable
across processes, and incremental — an updated fingerprint equals a full recompute."""

from __future__ import annotations

import random
import statistics
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwatch.fingerprint import Fingerprinter, distance, message_features
from ctxwatch.model import Message, OpaquePart
from ctxwatch.simulate.text import VOCABULARY, TextGen

FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.4, 0.7)


def _buffer(seed: int, n: int = 25, sentences: int = 14) -> list[Message]:
    gen = TextGen(seed)
    return [gen.message("user" if i % 2 else "assistant", sentences) for i in range(n)]


def _replace_words(messages: list[Message], fraction: float, rng: random.Random) -> list[Message]:
    """Replace `fraction` of the words of every message (half by vocabulary words, half by new tokens)."""
    out = []
    for m in messages:
        words = m.text.split()
        for i in rng.sample(range(len(words)), round(fraction * len(words))):
            words[i] = rng.choice(VOCABULARY) if rng.random() < 0.5 else f"w{rng.getrandbits(32):x}"
        out.append(Message(m.role, " ".join(words)))
    return out


def test_identical_buffers_are_at_distance_zero_and_distance_is_symmetric():
    fpr = Fingerprinter()
    a, b = _buffer(1), _buffer(2)
    assert distance(fpr.buffer(a), fpr.buffer(list(a))) == 0.0
    assert distance(fpr.buffer(a), fpr.buffer(b)) == distance(fpr.buffer(b), fpr.buffer(a))
    # two texts of one Zipf vocabulary still share their common-word bigrams ("of the"): far, not 1
    assert 0.5 < distance(fpr.buffer(a), fpr.buffer(b)) <= 1.0


def test_empty_buffer_is_at_distance_one_from_any_other():
    fpr = Fingerprinter()
    assert distance(fpr.buffer(()), fpr.buffer(())) == 0.0
    assert distance(fpr.buffer(()), fpr.buffer(_buffer(3, n=1))) == 1.0


def test_distance_grows_with_the_fraction_of_words_changed_over_many_seeds():
    """The property tested, over 30 seeds of a 25-message (~4,000-word) buffer: (1) the mean distance
    strictly increases with the fraction of words replaced; (2) in every seed, a fraction at least
    twice another gives a strictly larger distance; (3) the full curve is monotone in >= 90% of seeds."""
    fpr = Fingerprinter()
    curves = []
    for seed in range(30):
        base = _buffer(seed)
        rng = random.Random(seed)
        fp = fpr.buffer(base)
        curves.append([distance(fp, fpr.buffer(_replace_words(base, f, rng))) for f in FRACTIONS])
    means = [statistics.mean(c[i] for c in curves) for i in range(len(FRACTIONS))]
    assert all(a < b for a, b in zip(means, means[1:], strict=False)), means
    for curve in curves:
        for i, fi in enumerate(FRACTIONS):
            for j, fj in enumerate(FRACTIONS):
                if fj >= 2 * fi:
                    assert curve[j] > curve[i], (fi, fj, curve)
    monotone = sum(all(a <= b for a, b in zip(c, c[1:], strict=False)) for c in curves)
    assert monotone >= 27, monotone


def test_fingerprint_is_the_same_in_another_process_with_another_hash_seed():
    msgs = _buffer(7, n=5)
    here = Fingerprinter().buffer(msgs).vector
    code = ("from ctxwatch.fingerprint import Fingerprinter\nfrom ctxwatch.simulate.text import TextGen\n"
            "g = TextGen(7)\nmsgs = [g.message('user' if i % 2 else 'assistant', 14) for i in range(5)]\n"
            "print(Fingerprinter().buffer(msgs).vector)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}, check=True)
    assert out.stdout.strip() == str(here)


# a tool output with more distinct bigrams (1,499) than 2 · lanes: its contribution is kept packed
LONG = Message("tool", " ".join(f"line{i}" for i in range(1500)))
POOL = _buffer(11, n=12, sentences=3) + [Message("user", ""), Message("user", [OpaquePart("image", '{"a":1}')]), LONG]


def test_a_short_message_is_kept_as_its_lane_codes_and_a_long_one_packed():
    fpr = Fingerprinter()
    short, long = fpr.message(POOL[0]), fpr.message(LONG)
    assert short.codes is not None and len(short.codes) == short.features < 2 * fpr.lanes
    assert long.codes is None and long.features == 1499
    assert fpr.buffer([POOL[0], LONG]).packed == short.packed + long.packed


@settings(max_examples=60, deadline=None)
@given(start=st.lists(st.integers(0, len(POOL) - 1), max_size=10),
       edits=st.lists(st.tuples(st.booleans(), st.integers(0, len(POOL) - 1)), max_size=12))
def test_incremental_fingerprint_equals_full_recompute(start, edits):
    fpr = Fingerprinter(cache_limit=4)  # a small cache: evictions must not change results
    buffer = [POOL[i] for i in start]
    fp = fpr.buffer(buffer)
    for add, i in edits:
        if add:
            buffer.append(POOL[i])
            fp = fp.updated((), [POOL[i]])
        elif buffer:
            gone = buffer.pop(i % len(buffer))
            fp = fp.updated([gone], ())
    full = Fingerprinter().buffer(buffer)
    assert fp == full
    assert fp.vector == full.vector
    assert fpr.buffer(buffer, base=fpr.buffer([POOL[i] for i in start])) == full


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 30), st.booleans(), st.integers(0, len(POOL) - 1)), max_size=25),
       reads=st.lists(st.integers(0, 30), max_size=12))
def test_every_earlier_fingerprint_stays_its_own_buffer_after_updates_from_any_version(steps, reads):
    """Updates share one member map between versions: updating an old version (a refused rewrite's
    base, a branch), a refused update and reading versions in any order must each still give the
    fingerprint of its own buffer."""
    fpr = Fingerprinter()
    versions = [([], fpr.buffer(()))]
    for pick, add, i in steps:
        buffer, fp = versions[pick % len(versions)]
        if add:
            versions.append(([*buffer, POOL[i]], fp.updated((), [POOL[i]])))
        elif POOL[i] in buffer:
            rest = list(buffer)
            rest.remove(POOL[i])
            versions.append((rest, fp.updated([POOL[i]], [POOL[(i + 1) % len(POOL)]])))
            versions[-1][0].append(POOL[(i + 1) % len(POOL)])
        else:
            with pytest.raises(ValueError, match="not in this buffer"):
                fp.updated([POOL[(i + 1) % len(POOL)], POOL[i]], [POOL[i]])
    for pick in [*reads, *range(len(versions))]:
        buffer, fp = versions[pick % len(versions)]
        full = Fingerprinter().buffer(buffer)
        assert fp == full and fp.counts() == full.counts() and fp.size == len(buffer)


def test_a_rewrite_of_five_of_five_hundred_messages_touches_five_contributions():
    fpr = Fingerprinter()
    msgs = _buffer(5, n=500, sentences=2)
    fp = fpr.buffer(msgs)
    new = list(msgs)
    gen = TextGen(99)
    for i in (3, 100, 200, 300, 499):
        new[i] = gen.message("assistant", 2)
    fpr.clear()
    after = fpr.buffer(new, base=fp)
    assert fpr.cached == 5
    assert after == Fingerprinter().buffer(new)
    assert 0.0 < distance(fp, after) < 0.2


def test_removing_a_message_not_in_the_buffer_is_refused():
    fpr = Fingerprinter()
    fp = fpr.buffer(_buffer(1, n=2))
    with pytest.raises(ValueError, match="not in this buffer"):
        fp.updated([Message("user", "never added")], ())


def test_fingerprints_of_different_configurations_cannot_be_compared():
    with pytest.raises(ValueError, match="lanes, seed"):
        distance(Fingerprinter().buffer(_buffer(1, 2)), Fingerprinter(lanes=256).buffer(_buffer(1, 2)))
    with pytest.raises(ValueError, match="power of two"):
        Fingerprinter(lanes=100)


def test_a_message_without_words_still_counts():
    fpr = Fingerprinter()
    text = _buffer(2, n=3)
    a = fpr.buffer(text + [Message("user", [OpaquePart("image", '{"png":"AAAA"}')])])
    b = fpr.buffer(text + [Message("user", [OpaquePart("image", '{"png":"BBBB"}')])])
    assert distance(a, b) > 0.0
    assert message_features(Message("user", "one")) == {"one"}


@given(st.sampled_from((8, 64, 512)).flatmap(
    lambda lanes: st.lists(st.integers(-(2**31) + 1, 2**31 - 1), min_size=lanes, max_size=lanes)))
def test_a_packed_sum_decodes_to_its_signed_lanes(lanes):
    packed = sum(value << (32 * i) for i, value in enumerate(lanes))
    assert Fingerprinter(len(lanes)).decode(packed) == lanes
