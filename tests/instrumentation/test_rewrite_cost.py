"""What rewrites cost the provider's prompt cache (issue 16), on the real guard and the OpenTelemetry SDK.

Record 000's precedence table is the measure: the same rewrite of the consumed prefix invalidates the
consumed context from its first difference on when it is applied, and nothing when the guard defers it;
whole-pair compaction invalidates from the first unit it elides; a rewrite after the generation boundary
and a refused one invalidate nothing. The provider's own cache figures ride on the next span."""

from __future__ import annotations

import math

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import ContextGuard, Message, ProviderCache, TextPart, semconv
from ctxwatch.cache import (
    CHARS_PER_TOKEN,
    anthropic_cache,
    estimate_tokens,
    langchain_cache,
    openai_chat_cache,
    openai_responses_cache,
)
from ctxwatch.telemetry import MutationTelemetry

from conversations import record_000_session, result, user

SUMMARY = Message("user", [TextPart("Summary: customer 4411 placed 17 orders in March.")])


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.telemetry = MutationTelemetry(provider, environ={})

    def last(self) -> dict:
        return dict(self.exporter.get_finished_spans()[-1].attributes)

    def all(self) -> list[dict]:
        return [dict(s.attributes) for s in self.exporter.get_finished_spans()]


def guarded(spans: Spans, **options) -> tuple[ContextGuard, list[Message]]:
    session = record_000_session()
    guard = ContextGuard("cost-loop", telemetry=spans.telemetry, **options)
    guard.observe(session)  # the model has consumed all of it
    return guard, session


def compaction(session: list[Message]) -> list[Message]:
    """Drops the answered lookups (messages 1..6, whole pairs) for a summary, keeps the rest verbatim."""
    return [session[0], SUMMARY, *session[7:]]


def consumed_chars_from(session: list[Message], first: int) -> int:
    return sum(m.size for m in session[first:])


def invalidated(attrs: dict) -> tuple[int, int]:
    return attrs[semconv.CACHE_INVALIDATED_CHARS], attrs[semconv.CACHE_INVALIDATED_TOKENS]


def test_record_000_the_same_rewrite_applied_invalidates_the_consumed_context_and_deferred_nothing() -> None:
    applied_spans, deferred_spans = Spans(), Spans()
    applied, session = guarded(applied_spans, enforce={"prefix_identity": "warn"})
    deferred, _ = guarded(deferred_spans, deferral="queue")

    patch, _ = applied.resolve(compaction(session), kind="compact")
    defer, _ = deferred.resolve(compaction(session), kind="compact")

    assert patch.decision == "patch" and defer.decision == "defer"
    chars = consumed_chars_from(session, 1)  # from the first differing message to the boundary (the end)
    assert chars > 0
    assert invalidated(applied_spans.last()) == (chars, math.ceil(chars / CHARS_PER_TOKEN))
    assert invalidated(deferred_spans.last()) == (0, 0)
    assert (patch.invalidated_chars, defer.invalidated_chars) == (chars, 0)


def test_record_000_a_deferred_rewrite_applied_at_the_session_boundary_invalidates_nothing() -> None:
    spans = Spans()
    guard, session = guarded(spans, deferral="queue")
    guard.resolve(compaction(session), kind="compact")
    report = guard.session_boundary()
    assert report is not None and report.decision == "patch"
    assert invalidated(spans.last()) == (0, 0)  # the new session consumed nothing yet


def test_record_000_whole_pair_compaction_invalidates_from_the_first_unit_it_elides() -> None:
    applied_spans, converted_spans = Spans(), Spans()
    applied, session = guarded(applied_spans, enforce={"prefix_identity": "warn"})
    converted, _ = guarded(converted_spans)  # deferral "auto": a compact is converted to whole pairs
    # trims the first lookup's result (message 3, its call kept) and drops the second lookup for a summary
    proposal = [*session[:3], result("call_19bd", '{"customer_id": 4411}'), SUMMARY, *session[7:]]
    applied.resolve(proposal, kind="compact")
    report, context = converted.resolve(proposal, kind="compact")
    assert report.decision == "patch" and report.resolution == "whole_pairs"
    first = next(i for i, (a, b) in enumerate(zip(session, context, strict=False)) if a != b)
    assert first == 4  # the trimmed result's unit is kept verbatim; the dropped units go
    chars = consumed_chars_from(session, first)
    assert invalidated(converted_spans.last()) == (chars, estimate_tokens(chars))
    assert invalidated(applied_spans.last())[0] == consumed_chars_from(session, 3) > chars


def test_record_000_a_rewrite_after_the_generation_boundary_and_a_refused_one_invalidate_nothing() -> None:
    spans = Spans()
    guard, session = guarded(spans)
    guard.observe(session + [user("A draft the model has not read yet.")], boundary=len(session))
    report, _ = guard.resolve(session + [user("The draft, rewritten.")], kind="rewrite")
    assert report.decision == "patch" and invalidated(spans.last()) == (0, 0)

    orphaning = [m for i, m in enumerate(session) if i != 5]  # drops call_7f3a's result: an abort
    report, _ = guard.resolve(orphaning, kind="prune")
    assert report.decision == "abort" and invalidated(spans.last()) == (0, 0)
    assert all(invalidated(attrs) == (0, 0) for attrs in spans.all()
               if attrs[semconv.MUTATION_KIND] == "append")


def test_an_observed_change_invalidates_what_it_changed() -> None:
    spans = Spans()
    guard, session = guarded(spans)
    guard.observe(compaction(session), kind="compact")  # made elsewhere (a server edit): reported, adopted
    attrs = spans.last()
    assert attrs[semconv.OBSERVED] is True
    assert invalidated(attrs) == (consumed_chars_from(session, 1), estimate_tokens(consumed_chars_from(session, 1)))


def test_provider_cache_figures_ride_on_the_next_span_once_and_add_up() -> None:
    spans = Spans()
    guard, session = guarded(spans)
    guard.note_provider_cache(ProviderCache(read_tokens=1200, creation_tokens=300))
    guard.note_provider_cache(ProviderCache(read_tokens=100))
    guard.note_provider_cache(ProviderCache())  # a response that says nothing
    guard.observe(session + [user("Thanks.")])
    attrs = spans.last()
    assert attrs[semconv.MUTATION_KIND] == "append"
    assert (attrs[semconv.CACHE_READ_TOKENS], attrs[semconv.CACHE_CREATION_TOKENS]) == (1300, 300)
    guard.observe(session + [user("Thanks."), user("Bye.")])
    assert semconv.CACHE_READ_TOKENS not in spans.last() and semconv.CACHE_CREATION_TOKENS not in spans.last()


@pytest.mark.parametrize("read, usage, expected", [
    (anthropic_cache, {"input_tokens": 10, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 40},
     ProviderCache(900, 40)),
    (anthropic_cache, {"input_tokens": 10, "cache_read_input_tokens": None}, ProviderCache()),
    (openai_chat_cache, {"prompt_tokens": 2006, "prompt_tokens_details": {"cached_tokens": 1920}},
     ProviderCache(1920)),
    (openai_chat_cache, {"prompt_tokens": 20, "prompt_tokens_details": None}, ProviderCache()),
    (openai_responses_cache, {"input_tokens": 125, "input_tokens_details": {"cached_tokens": 98}},
     ProviderCache(98)),
    (openai_responses_cache, {"input_tokens_details": {"cached_tokens": 98, "cache_write_tokens": 27}},
     ProviderCache(98, 27)),
    (openai_chat_cache, {"prompt_tokens_details": {"cached_tokens": 1, "cache_write_tokens": 2}},
     ProviderCache(1, 2)),
    (langchain_cache, {"input_tokens": 350, "input_token_details": {"cache_read": 100, "cache_creation": 200}},
     ProviderCache(100, 200)),
    # hostile or odd values are left out, never raised
    (anthropic_cache, {"cache_read_input_tokens": -5, "cache_creation_input_tokens": True}, ProviderCache()),
    (openai_chat_cache, {"prompt_tokens_details": {"cached_tokens": 2**70}}, ProviderCache()),
    (openai_responses_cache, "not a usage", ProviderCache()),
    (langchain_cache, None, ProviderCache()),
])
def test_each_providers_cache_figures_are_read_from_its_usage(read, usage, expected) -> None:
    assert read(usage) == expected
