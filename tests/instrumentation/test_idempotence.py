"""Record 003's re-application stability test: rewrite(rewrite(B)) vs rewrite(B), with drift figures."""

from __future__ import annotations

import pytest

from ctxwatch.errors import InvalidContextError, NonIdempotentRewriteError
from ctxwatch.idempotence import check_idempotence, order_changes
from ctxwatch.model import Message
from ctxwatch.simulate.loops import SimulatedAgent
from ctxwatch.simulate.rewriters import ExtractiveSummarizer, SalienceReranker


def _sample(seed: int = 3, turns: int = 10) -> list[Message]:
    return SimulatedAgent(seed).opening(turns)


def test_record_003_ordering_inversion_reranking_is_not_idempotent():
    """Record 003, signal 3: salience recomputed against an already reordered buffer."""
    result = check_idempotence(SalienceReranker(), _sample())
    assert not result.stable
    assert result.drift.order_changes > 0 and result.drift.distance == 0.0  # same bytes, another order
    assert result.trend == "not converging"
    with pytest.raises(NonIdempotentRewriteError, match=r"out of order") as info:
        result.raise_if_unstable()
    assert f"{result.drift.order_changes} of {result.drift.surviving}" in str(info.value)


def test_reranking_against_a_stable_index_is_idempotent():
    """Record 003's condition of validity: salience computed against a stable, non-rewritten index."""
    sample = _sample()
    scores = SalienceReranker().scores(sample)
    index = {sample[i].digest: s for i, s in scores.items()}
    result = check_idempotence(SalienceReranker(index=index), sample)
    assert result.stable and result.trend == "idempotent"
    result.raise_if_unstable()


def test_a_ratio_summarizer_keeps_compressing_and_a_budget_summarizer_converges():
    sample = _sample(turns=12)
    ratio = check_idempotence(ExtractiveSummarizer(0.5, preserve_literals=True), sample)
    assert not ratio.stable and ratio.drift.length_ratio < 0.9 and ratio.drift.literal_drift == 0.0
    budget = check_idempotence(ExtractiveSummarizer(0.5, budget=300, preserve_literals=True), sample, rounds=4)
    assert budget.trend.startswith("converges after")
    assert budget.rounds[-1].distance == 0.0


def test_literal_drift_is_reported_with_the_lost_literals():
    sample = [Message("user", "see OPS-1234 and /srv/app/config.yaml"), Message("assistant", "ok")]

    def forgetful(messages):  # drops one literal more on every pass
        text = messages[0].text
        for lit in ("/srv/app/config.yaml", "OPS-1234"):
            if lit in text:
                return [Message("user", text.replace(lit, "it", 1)), *messages[1:]]
        return list(messages)

    result = check_idempotence(forgetful, sample, tolerance=1.0)
    assert result.drift.literals_lost == frozenset({"OPS-1234"}) and result.drift.literal_drift == 1.0
    assert not result.stable


def test_identity_is_idempotent_in_a_provider_format():
    sample = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix BUG-2001"}]
    result = check_idempotence(lambda msgs: [dict(m) for m in msgs], sample)
    assert result.stable and result.drift.distance == 0.0 and result.drift.messages == (2, 2)


def test_errors_name_the_application_that_failed():
    calls = []

    def breaks_second_time(messages):
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("boom")
        return messages

    with pytest.raises(RuntimeError, match="application 2"):
        check_idempotence(breaks_second_time, _sample())
    with pytest.raises(InvalidContextError, match="output of application 1"):
        check_idempotence(lambda msgs: [42], _sample())
    with pytest.raises(ValueError, match="rounds"):
        check_idempotence(lambda m: m, _sample(), rounds=0)


def test_order_changes_counts_the_fewest_moves():
    a = [Message("user", t) for t in "abcdef"]
    assert order_changes(a, a) == (0, 6)
    assert order_changes(a, [a[1], a[0], *a[2:]]) == (1, 6)
    assert order_changes(a, list(reversed(a))) == (5, 6)
    assert order_changes(a, [a[0], Message("user", "z"), a[2]]) == (0, 2)
