"""ctxwatch.fastjson: orjson is used only where it gives what `json` gives, value for value and byte for byte.

Every case below is compared with the standard library itself: `decoded` either refuses a text or
returns exactly ``json.loads``'s value (same types, same float bits, same key order), and `encoded`
either refuses a value or returns exactly ``json.dumps``'s text in UTF-8. The fast path is also
checked to be taken on the values the readers meet, so a refusal of everything would fail here.
"""

import contextlib
import json
import math

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxwatch.fastjson import MAX_OPENERS, REFUSED, decoded, encoded

# any text, lone surrogates and control characters included
TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
NUMBERS = st.one_of(st.integers(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(TEXT, inner, max_size=4)), max_leaves=20)


def same_value(a: object, b: object) -> bool:
    """Equal with the same types all the way down (1 is not 1.0, 0.0 is not -0.0) and the same key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (math.isnan(a) and math.isnan(b)))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def stdlib_dumps(value: object, sort_keys: bool) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys).encode(
        "utf-8", "surrogatepass")


@given(VALUES, st.booleans())
def test_a_decoded_text_is_what_json_reads(value: object, spaced: bool) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=1 if spaced else None)
    raw = text.encode("utf-8", "surrogatepass")
    for data in (raw, text):
        fast = decoded(data)
        if fast is not REFUSED:
            assert same_value(fast, json.loads(text))


@given(VALUES, st.booleans())
def test_an_encoded_value_is_what_json_writes(value: object, sort_keys: bool) -> None:
    fast = encoded(value, sort_keys=sort_keys)
    if fast is not None:
        assert fast == stdlib_dumps(value, sort_keys)


@given(VALUES, st.sampled_from(["", "\n", "\r\n", " \t\n"]))
def test_a_compact_text_is_what_json_reads(value: object, end: str) -> None:
    """Compact text, as agents write records (and as `decoded` reads without looking at its bytes when orjson
    writes back what it read): json's own compact text, and orjson's."""
    texts = [json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")]
    with contextlib.suppress(orjson.JSONEncodeError):  # a lone surrogate, an integer past 64 bits
        texts.append(orjson.dumps(value))
    for raw in texts:
        fast = decoded(raw + end.encode())
        if fast is not REFUSED:
            assert same_value(fast, json.loads(raw))
    if len(texts) == 2:  # what orjson writes, orjson reads as json does: taken whatever its digits and brackets
        assert same_value(decoded(texts[1] + end.encode()), json.loads(texts[1]))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_the_float_orjson_writes_reads_back_in_json_as_that_float(number: float) -> None:
    """What `_written_back` relies on: orjson writes a float as text that a correctly rounding reader reads as
    the float itself."""
    assert same_value(json.loads(orjson.dumps(number)), number)


@pytest.mark.parametrize("text", [
    '{"id":"an id 1234567890123456789 in a string"}', "[9223372036854775808,18446744073709551615]",
    '{"a":0.30000000000000004,"b":-0.0,"c":1e16}', "[" + ",".join(["[]"] * MAX_OPENERS) + "]",
    '{"a":[]}\r\n',
])
def test_compact_records_take_the_fast_path_whatever_their_digits(text: str) -> None:
    """orjson writes them back byte for byte, so json reads them as orjson did: no check of their digits
    (a 19-digit run was refused, even in a string) nor of their brackets (orjson writes 254 levels)."""
    fast = decoded(text.encode())
    assert fast is not REFUSED
    assert same_value(fast, json.loads(text))


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": [true, false, null], "a": 2}', '"\\u00e9t\\u00e9 \\ud83d\\ude00 \\u0000"', "-0", "-0.0", "1e-400",
    "0.30000000000000004", "1.7976931348623157e308", "5e-324", "123456789012345678", "-922337203685477580",
    " [1.5, 2E3, -7e-3] \n", '{"\\u0061": "\\/"}',
])
def test_plain_records_take_the_fast_path_and_read_as_json_does(text: str) -> None:
    fast = decoded(text.encode())
    assert fast is not REFUSED
    assert same_value(fast, json.loads(text))


@pytest.mark.parametrize("text", [
    "18446744073709551616", "-9223372036854775809", "[1, 123456789012345678901234567890]",
    "[18446744073709551616]", "[0.12345678901234567890123]", '{"a":1,"a":2,"b":12345678901234567890}',
    '{"a": "an id 1234567890123456789 in a string is refused too"}',  # spaced: the check cannot tell strings
    # from numbers
    "NaN", "[Infinity]", "-Infinity", "1e400", '"\\ud800"', '"\\udc00\\ud800"', "\ufeff{}", "[1,]", "{'a': 1}",
    "[" * (MAX_OPENERS + 1) + "]" * (MAX_OPENERS + 1),
])
def test_what_orjson_reads_otherwise_or_refuses_is_left_to_json(text: str) -> None:
    assert decoded(text.encode("utf-8", "surrogatepass")) is REFUSED
    assert decoded("\ud800" + text) is REFUSED  # a str that is not UTF-8


def test_nesting_up_to_the_bound_is_read() -> None:
    deep = "[" * MAX_OPENERS + "]" * MAX_OPENERS
    assert decoded(deep.encode()) == json.loads(deep)


class Subclassed(dict):
    def items(self):  # json writes what items() says; orjson would read the dict itself
        return [("z", 0)]


@pytest.mark.parametrize("value", [
    1.5, [1, 2.0], {"a": float("nan")}, {"a": 1e16}, 2**64, -(2**63) - 1, "\ud800", {"k": ["\udfff"]}, {1: "a"},
    Subclassed(a=1), [object()], [[[]]] * 5000,
])
def test_values_orjson_writes_otherwise_or_refuses_are_left_to_json(value: object) -> None:
    assert encoded(value, sort_keys=True) is None


def test_too_deep_a_value_is_left_to_json() -> None:
    value: list = []
    for _ in range(300):  # orjson stops at 254 levels
        value = [value]
    assert encoded(value) is None
    cycle: list = []
    cycle.append(cycle)
    cycle.append(cycle)
    assert encoded(cycle) is None  # never walked for ever


def test_message_bodies_take_the_fast_path() -> None:
    body = ["assistant", None, [["text", "é\n\"\\\x00\x1f\u2028"], ["tool_call", "toolu_1", "Bash", '{"a":1}'],
                                ["tool_result", "toolu_1", [["text", "ok"]], False]], None]
    fast = encoded(body, sort_keys=True)
    assert fast is not None
    assert fast == stdlib_dumps(body, True)
    assert encoded({"b": 1, "a": [True, None, 2**63 - 1, -(2**63)]}) == stdlib_dumps(
        {"b": 1, "a": [True, None, 2**63 - 1, -(2**63)]}, False)


@given(st.from_regex(r"-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?", fullmatch=True))
def test_numbers_as_written_read_as_json_reads_them(number: str) -> None:
    fast = decoded(f"[{number}]".encode())
    if fast is not REFUSED:
        assert same_value(fast, json.loads(f"[{number}]"))


def test_a_messages_kept_canonical_bytes_hold_no_more_than_their_length() -> None:
    """orjson's bytes carried a spare buffer: kept as every message's canonical rendering, they doubled the
    audit's heap (bench/bench_replay.py, 2.9 -> 5.8 MB on a 4 MB session). What a message keeps is its length."""
    import tracemalloc

    from ctxwatch.model import Message

    messages = [Message("user", f"{i} " + "word " * 3000) for i in range(40)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [m.canonical() for m in messages]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 1.2 * sum(map(len, kept)), (held, sum(map(len, kept)))
