"""`current=` on check/resolve/apply/adopt/session_boundary: a loop that builds a new list each turn
(``messages = messages + [reply]``) says what it has now, and the turns it appended since the guard
last saw its context are kept verbatim, as for a list extended in place. Spans through the real
OpenTelemetry SDK."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import ContextGuard, OrphanedToolPairError
from ctxwatch.telemetry import MutationTelemetry

SYSTEM = {"role": "system", "content": "You are an inventory agent."}


def call(n: int) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function", "function": {"name": "lookup", "arguments": f'{{"sku": {n}}}'}}]}


def result(n: int) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{n}", "content": f"SKU-{n:05d}: {n * 7} units"}


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def guard_with(spans: InMemorySpanExporter) -> ContextGuard:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return ContextGuard("rebuilt", telemetry=MutationTelemetry(provider))


def observed_then_rebuilt(guard: ContextGuard) -> tuple[list, list]:
    """The model read [system, question, call 1, result 1]; the loop then built a new list with call 2
    and its result (not read yet). The summary folds everything before call 2, result 1 included."""
    seen = [SYSTEM, {"role": "user", "content": "Stock of SKU-00001 and SKU-00002?"}, call(1), result(1)]
    guard.observe(seen)
    now = seen + [call(2), result(2)]
    summary = [SYSTEM, {"role": "user", "content": "Earlier: SKU-00001: 7 units"}, now[4], now[5]]
    return now, summary


def test_a_rebuilt_list_given_as_current_keeps_the_unread_call_and_result_verbatim(spans):
    guard = guard_with(spans)
    now, summary = observed_then_rebuilt(guard)
    context = guard.apply(summary, kind="compact", current=now)
    assert context[-2] is now[4] and context[-1] is now[5]  # the caller's own objects, after the marker
    assert "elided" in context[1]["content"] and "SKU-00002" not in context[1]["content"]
    (span,) = [s for s in spans.get_finished_spans() if s.attributes["ctxwatch.mutation.kind"] == "compact"]
    assert (span.attributes["ctxwatch.decision"], span.attributes["ctxwatch.deferral.resolution"]) == \
        ("patch", "whole_pairs")
    assert guard.messages == context


def test_without_current_the_unread_call_is_read_from_the_proposal_and_kept(spans):
    """Review F3: the guard sees no list grow and the summary holds no message it observed last, but call 2
    is one it never saw: the model's reply, appended since. It and its result come back verbatim after the
    marker, as with current= (on main they were taken as the summary's own text and folded into the note)."""
    guard = guard_with(spans)
    now, summary = observed_then_rebuilt(guard)
    context = guard.apply(summary, kind="compact")
    assert context[-2] is now[4] and context[-1] is now[5]
    assert "elided" in context[1]["content"] and "SKU-00002" not in context[1]["content"]


def test_a_refusal_hands_back_the_rebuilt_lists_turns_in_guard_messages(spans):
    guard = guard_with(spans)
    now, _ = observed_then_rebuilt(guard)
    orphaning = [SYSTEM, now[5]]  # result 2 without its call
    with pytest.raises(OrphanedToolPairError):
        guard.apply(orphaning, kind="prune", current=now)
    assert guard.messages == now and guard.messages[-1] is now[-1]
    assert [s.attributes["ctxwatch.decision"] for s in spans.get_finished_spans()
            if s.attributes["ctxwatch.mutation.kind"] == "prune"] == ["abort"]


def test_check_with_current_evaluates_the_rewrite_on_top_of_the_appended_turns(spans):
    guard = guard_with(spans)
    now, _ = observed_then_rebuilt(guard)
    dropped = now[:4] + [now[4]]  # the rewrite drops result 2, which the model has not read
    report = guard.check(dropped, kind="prune", current=now)
    # docs/guard.md: dropping an unread turn is settled like a rewrite of the consumed prefix; the guard
    # keeps result 2 after call 2, so no pair is broken in what it stands for
    assert (report.decision, report.violations) == ("defer", ["prefix_identity"]), report.explain()
    orphaning = now[:3] + now[4:]  # drops result 1 (read): call 1 loses its result, whatever is kept after
    report = guard.check(orphaning, kind="prune", current=now)
    assert report.decision == "abort" and "tool_pairing" in report.violations
    assert report.findings[[f.invariant for f in report.findings].index("tool_pairing")].details[
        "tool_use_without_result"] == ["call_1"]


def test_session_boundary_with_current_keeps_the_last_answer_and_applies_the_queued_rewrite(spans):
    guard = ContextGuard("rebuilt", deferral="queue", telemetry=MutationTelemetry(TracerProvider()))
    now, summary = observed_then_rebuilt(guard)
    assert guard.apply(summary, kind="compact", current=now) == now  # queued: the context as it is
    answer = {"role": "assistant", "content": "SKU-00001: 7, SKU-00002: 14."}
    now = now + [answer]
    report = guard.session_boundary(current=now)
    assert report is not None and report.decision == "patch"
    assert guard.messages == summary + [answer] and guard.messages[-1] is answer


def test_before_anything_is_observed_current_is_the_context(spans):
    guard = guard_with(spans)
    guard.session_boundary(current=[SYSTEM])
    assert guard.messages == [SYSTEM]


def test_a_current_that_does_not_start_with_what_the_guard_saw_is_a_one_line_error(spans):
    guard = guard_with(spans)
    now, summary = observed_then_rebuilt(guard)
    edited = [SYSTEM, {"role": "user", "content": "something else"}, *now[2:]]
    with pytest.raises(ValueError, match=r"^current= must start with the context the guard last saw \(4 messages\)"
                       r".*message 1 is not the one it saw") as error:
        guard.apply(summary, kind="compact", current=edited)
    assert "\n" not in str(error.value) and "something else" not in str(error.value)
    with pytest.raises(ValueError, match="message 2 is not the one it saw"):
        guard.resolve(summary, kind="compact", current=now[:2])
    assert guard.context.messages[-1].digest == guard.bridge.to_model([result(1)])[0].digest  # nothing changed
