"""`Change`: the messages a proposal removes and adds are the multiset differences of the two buffers."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwatch import Message, TextPart
from ctxwatch.diff import Change, common_prefix
from ctxwatch.model import Context

MESSAGES = [Message("user", [TextPart(t)]) for t in "abcd"]
buffers = st.lists(st.sampled_from(MESSAGES), max_size=8)


def texts(messages):
    return Counter(m.text for m in messages)


@settings(max_examples=400, deadline=None)
@given(buffers, buffers)
def test_removed_and_added_are_the_multiset_differences(before, after):
    change = Change.between(Context(tuple(before)), tuple(after), "rewrite")
    assert texts(change.removed_messages) == texts(before) - texts(after)
    assert texts(change.added_messages) == texts(after) - texts(before)


def test_a_digest_wanted_once_among_two_copies_is_taken_once():
    a, b, c, d = MESSAGES
    change = Change.between(Context((a, c, c, d, a)), (b, c, d, d), "rewrite")
    assert [m.text for m in change.added_messages] == ["b", "d"]
    assert [m.text for m in change.removed_messages] == ["a", "c", "a"]


@settings(max_examples=400, deadline=None)
@given(buffers, buffers)
def test_the_common_prefix_and_suffix_are_the_longest_runs_both_sides_share(before, after):
    change = Change.between(Context(tuple(before)), tuple(after), "rewrite")
    p, s = change.prefix_len, change.suffix_len
    assert before[:p] == after[:p] and (p == min(len(before), len(after)) or before[p] != after[p])
    assert p + s <= min(len(before), len(after))
    assert before[len(before) - s:] == after[len(after) - s:]
    assert p + s == min(len(before), len(after)) or before[-s - 1] != after[-s - 1]


@settings(max_examples=400, deadline=None)
@given(buffers, buffers, st.none() | st.integers(-1, 9))
def test_a_guessed_common_prefix_is_only_taken_when_it_is_the_common_prefix(before, after, guess):
    """A reader's hint (where it says the change starts) is checked: a wrong one gives the same answer."""
    a, b = tuple(before), tuple(after)
    assert common_prefix(a, b, guess) == Change.between(Context(a), b, "rewrite").prefix_len
