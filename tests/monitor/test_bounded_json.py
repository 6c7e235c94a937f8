"""`bounded_json.loads` reads what `json.loads` reads, refuses what it refuses, and any depth besides.

Hypothesis compares the two on generated documents (written compactly or with whitespace) and on the same
texts cut short or with one character changed; then documents nested past `json.loads`'s reach: the values
outside the deep part are read as `json.loads` reads them, the part past `MAX_DEPTH` is `TOO_DEEP`, and the
charges follow the values read in Python.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwatch_monitor import bounded_json
from ctxwatch_monitor.bounded_json import CHARGE_VALUES, MAX_DEPTH, TOO_DEEP

CASES = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=12))
_DOCUMENTS = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=30)


def _outcome(read: Any, text: str) -> Any:
    try:
        return ("value", read(text))
    except ValueError:
        return ("refused",)


@CASES
@given(document=_DOCUMENTS, indent=st.sampled_from([None, 0, 2]), ascii_only=st.booleans())
def test_reads_what_json_loads_reads(document: Any, indent: int | None, ascii_only: bool) -> None:
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    assert bounded_json.loads(text) == json.loads(text)
    assert bounded_json.loads(text.encode("utf-16")) == json.loads(text.encode("utf-16"))


@CASES
@given(document=_DOCUMENTS, cut=st.integers(min_value=0), at=st.integers(min_value=0),
       char=st.sampled_from(list('[]{}",: x0-.eE\\\ufeff')))
def test_refuses_what_json_loads_refuses(document: Any, cut: int, at: int, char: str) -> None:
    text = json.dumps(document)
    for garbled in (text[: cut % (len(text) + 1)], text[: at % len(text)] + char + text[at % len(text) + 1:]):
        assert _outcome(bounded_json.loads, garbled) == _outcome(json.loads, garbled)


@pytest.mark.parametrize("opening, closing", [("[", "]"), ('{"k":', "}")])
def test_any_depth_is_read_and_cut_at_max_depth(opening: str, closing: str) -> None:
    depth = 50_000
    text = '{"before": [1, {"a": "b"}], "deep": [[[[[' + opening * depth + "7" + closing * depth + ']]]]], "after": 2}'
    with pytest.raises(RecursionError):
        json.loads(text)
    charges: list[int] = []
    document = bounded_json.loads(text, lambda: charges.append(1))
    assert document["before"] == [1, {"a": "b"}] and document["after"] == 2
    value, level = document["deep"], 2
    while value is not TOO_DEEP:
        value = value[0] if isinstance(value, list) else value["k"]
        level += 1
    assert level == MAX_DEPTH + 1
    assert depth // CHARGE_VALUES <= len(charges) <= depth // CHARGE_VALUES + 2
    with pytest.raises(json.JSONDecodeError):
        bounded_json.loads(text.replace("7", "7,", 1))


def test_what_the_c_scanner_reads_is_not_charged() -> None:
    """The top levels (above a span) are read in Python, each span by json.loads's scanner: a body of many
    shallow spans and one deep one is charged for the deep one."""
    span = json.dumps({"name": "s", "attributes": [{"key": "k", "value": {"stringValue": "v" * 100}}] * 20})
    deep = "[" * 5000 + "]" * 5000
    text = '{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join([span] * 500 + [deep]) + "]}]}]}"
    charges: list[int] = []
    spans = bounded_json.loads(text, lambda: charges.append(1))["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert spans[:500] == [json.loads(span)] * 500
    assert len(charges) == 1 + 5000 // CHARGE_VALUES
