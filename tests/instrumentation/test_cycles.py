"""The measurement of d_t and r_t (`ctxwatch.cycles`) against a straightforward full recomputation.

`CycleMeter` takes shortcuts (fp(Q_t) from fp(Q_{t-1}), the loss looked up in Q_t itself, the
downstream count carried over from the previous buffer) and the guard's `measure_cycle` uses its
running literal counts; both must give exactly the figures of the definition, recomputed here from
scratch for every cycle: d from full fingerprints, the downstream literals of P_t, and the
downstream literals of the messages P_t loses that no message of Q_t holds.
"""

from collections import Counter
from collections.abc import Sequence

import pytest
from corpus_files import readable_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwatch import Message, TextPart, ToolCall, ToolResult
from ctxwatch.cycles import APPEND, OPAQUE, CycleFigures, CycleMeter, measure_cycle, no_cycle_reason
from ctxwatch.diff import Change
from ctxwatch.fingerprint import Fingerprinter, distance
from ctxwatch.literals import LiteralRegistry
from ctxwatch.model import Context
from ctxwatch.sessions import Mutation, read_session

Pair = tuple[Sequence[Message], Sequence[Message]]


Figures = tuple[str | None, float | None, int, frozenset[str], frozenset[str]]  # why no cycle, d, before, lost, hidden


def recomputed(pairs: list[Pair]) -> list[Figures]:
    """(why it is no cycle, d, downstream literals of P_t, lost, hidden) of every change among the pairs that
    is no pure append, each from scratch: d only for a cycle, from the buffer after the last cycle."""
    fingerprints, registry = Fingerprinter(), LiteralRegistry()
    last, out = None, []
    for pre, post in pairs:
        if [m.digest for m in post[: len(pre)]] == [m.digest for m in pre]:
            continue  # a pure append is no cycle
        reason = no_cycle_reason(Change.between(Context(tuple(pre)), tuple(post), "rewrite"))
        after = fingerprints.buffer(post)
        d = None if reason else distance(last if last is not None else fingerprints.buffer(pre), after)
        gone = Counter(m.digest for m in pre) - Counter(m.digest for m in post)
        removed = []
        for m in pre:
            if gone[m.digest] > 0:
                gone[m.digest] -= 1
                removed.append(m)
        left = frozenset(registry.downstream_of_all(removed) - registry.of_all(post))
        lost, hidden = (frozenset(), left) if reason == OPAQUE else (left, frozenset())
        out.append((reason, d, len(registry.downstream_of_all(pre)), lost, hidden))
        if reason is None:
            last = after
    return out


def _figures(f: CycleFigures) -> Figures:
    return f.no_cycle, f.d, f.literals_before, f.lost, f.hidden


def metered(pairs: list[Pair]) -> list[Figures]:
    """`CycleMeter.measure` of every pair that is no append; `CycleMeter.cycle`, on a meter of its own, gives the
    cycles among them."""
    meter, cycles = CycleMeter(), CycleMeter()
    out = [_figures(f) for f in (meter.measure(*p) for p in pairs) if f.no_cycle != APPEND]
    assert [_figures(f) for f in map(lambda p: cycles.cycle(*p), pairs) if f is not None] == [
        f for f in out if f[0] is None]
    return out


def guarded(pairs: list[Pair]) -> list[Figures]:
    """As the guard calls it: its running fingerprint and literal counts of P_t, Q_{t-1} moved by cycles only."""
    fingerprints, registry = Fingerprinter(), LiteralRegistry()
    last, out = None, []
    for pre, post in pairs:
        change = Change.between(Context(tuple(pre)), tuple(post), "rewrite")
        if change.is_append_only:
            continue
        counts = Counter(lit for m in pre for lit in registry.of(m))
        figures = measure_cycle(change, fingerprints.buffer(pre), last, registry, counts,
                                no_cycle=no_cycle_reason(change))
        assert figures.fp_after == fingerprints.buffer(post)
        out.append(_figures(figures))
        if figures.is_cycle:
            last = figures.fp_after
    return out


def corpus_pairs() -> list[tuple[str, list[Pair]]]:
    out = []
    for path in readable_files():
        pairs = [(e.before, e.after) for e in read_session(path) if isinstance(e, Mutation)]
        if pairs:
            out.append((path.name, pairs))
    return out


CORPUS_PAIRS = corpus_pairs()


@pytest.mark.skipif(not CORPUS_PAIRS, reason="no corpus session with a mutation")
@pytest.mark.parametrize(("name", "pairs"), CORPUS_PAIRS, ids=[name for name, _ in CORPUS_PAIRS])
def test_every_corpus_cycle_is_measured_as_its_full_recomputation(name, pairs):
    expected = recomputed(pairs)
    assert expected, f"{name}: no rewrite"
    assert metered(pairs) == expected
    assert guarded(pairs) == expected


# --- random buffers: literals that move, repeat, hide in tool output, and duplicated messages ------------
TOKENS = ["ORD-1042", "ORD-2077", "/srv/app/main.py", "src/lib/util.ts", "a1b2c3d4e5", "E1234", "ENOENT",
          "https://example.com/x/y", "`make test`", "12345", "3.14", "ledger", "invoice", "total", "the", "of"]


def texts():
    return st.lists(st.sampled_from(TOKENS), min_size=0, max_size=6).map(" ".join)


@st.composite
def messages(draw):
    kind = draw(st.sampled_from(["text", "call", "result", "mixed"]))
    n = draw(st.integers(0, 99))
    if kind == "text":
        return Message(draw(st.sampled_from(["system", "user", "assistant"])), [TextPart(draw(texts()))])
    if kind == "call":
        return Message("assistant", [ToolCall(f"call_{n:04d}", "run", f'{{"arg": "{draw(texts())}"}}')])
    if kind == "result":
        return Message("tool", [ToolResult(f"call_{n:04d}", draw(texts()))])
    return Message("user", [TextPart(draw(texts())), ToolResult(f"call_{n:04d}", draw(texts()))])


@st.composite
def loops(draw):
    """Successive (P_t, Q_t): each P_t is Q_{t-1} plus appends; Q_t keeps, drops, duplicates and adds."""
    buffer = draw(st.lists(messages(), min_size=1, max_size=12))
    pairs = []
    for _ in range(draw(st.integers(1, 5))):
        pre = buffer + draw(st.lists(messages(), max_size=4))
        kept = [m for m in pre if draw(st.booleans())]
        repeated = st.lists(st.sampled_from(pre), max_size=2) if pre else st.just([])
        extra = draw(st.lists(messages(), max_size=3)) + draw(repeated)
        at = draw(st.integers(0, len(kept)))
        buffer = kept[:at] + extra + kept[at:]
        pairs.append((pre, buffer))
    return pairs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loops())
def test_every_random_cycle_is_measured_as_its_full_recomputation(pairs):
    expected = recomputed(pairs)
    assert metered(pairs) == expected
    assert guarded(pairs) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(messages(), max_size=10), min_size=1, max_size=6))
def test_the_downstream_count_follows_any_sequence_of_buffers(buffers):
    registry, fresh = LiteralRegistry(), LiteralRegistry()
    for buffer in buffers:
        assert registry.downstream_count(buffer) == len(fresh.downstream_of_all(buffer))


@settings(max_examples=200, deadline=None)
@given(st.lists(messages(), max_size=10), st.lists(st.sampled_from(TOKENS + ["ORD-10", "main.py"]), max_size=8))
def test_held_by_is_the_candidates_the_messages_hold(buffer, candidates):
    registry = LiteralRegistry()
    registry.of_all(buffer[::2])  # some messages cached, some not
    assert registry.held_by(buffer, candidates) == set(candidates) & LiteralRegistry().of_all(buffer)


def test_a_registered_pattern_resets_the_downstream_count():
    registry = LiteralRegistry()
    buffer = [Message("user", [TextPart("order A-77 shipped")])]
    assert registry.downstream_count(buffer) == 0
    registry.register("order", r"\bA-\d+\b")
    assert registry.downstream_count(buffer) == 1


def test_small_rewrites_of_a_long_buffer_are_measured_as_their_full_recomputation():
    """P_t extends Q_{t-1} by a turn and Q_t rewrites the last two turns into a note: the shape where
    `CycleMeter` reaches fp(Q_t) through P_t rather than from the messages Q_{t-1} and Q_t do not share.
    (Dropping them without the note is a rewind, an elision: no cycle, and its d is not measured.)"""
    buffer = [Message("user", [TextPart(f"turn {i} of ORD-{1000 + i} in /srv/app/m{i}.py")]) for i in range(40)]
    pairs = []
    for i in range(6):
        pre = buffer + [Message("assistant", [TextPart(f"retry {i} E{1200 + i}")])]
        buffer = [*pre[:-2], Message("assistant", [TextPart(f"note {i}: retried")])]
        pairs.append((pre, buffer))
    expected = recomputed(pairs)
    assert len(expected) == 6 and all(reason is None and lost for reason, _, _, lost, _ in expected)
    assert metered(pairs) == expected
    assert guarded(pairs) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(messages(), max_size=8), st.data())
def test_the_downstream_count_follows_announced_rewrites_applied_or_not(buffer, data):
    """As the guard calls it: each check announces its rewrite; the next buffer extends the rewrite's
    result (applied), the buffer it rewrote (refused), or neither."""
    registry, fresh = LiteralRegistry(), LiteralRegistry()
    for _ in range(data.draw(st.integers(1, 6))):
        kept = [m for m in buffer if data.draw(st.booleans())]
        change = Change.between(Context(tuple(buffer)), tuple(kept + data.draw(st.lists(messages(), max_size=3))), "r")
        counted = registry.downstream_count(buffer, rewrite=(change.removed_messages, change.added_messages,
                                                             change.after_digests))
        assert counted == len(fresh.downstream_of_all(buffer))
        fate = data.draw(st.sampled_from(["applied", "refused", "other"]))
        base = list(change.after) if fate == "applied" else buffer if fate == "refused" else buffer[::-1]
        buffer = base + data.draw(st.lists(messages(), max_size=3))
