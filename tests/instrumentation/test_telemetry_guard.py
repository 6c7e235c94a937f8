"""The real `ContextGuard` emitting through `MutationTelemetry` on the OpenTelemetry SDK: its spans
carry the figures of its reports (record 000's observed scenario and decision table), and the
privacy rule holds end to end — secret markers in message text, tool arguments, tool results and
protected literals never leave the process by default, and with content capture on only the
documented content (lost literal values, the guard's finding messages) does."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from ctxwatch import ContextGuard, OrphanedToolPairError, semconv
from ctxwatch.telemetry import MutationTelemetry

from conversations import assistant, call, record_000_session, result, system, user

SPEC = {a.name: a for a in semconv.SPAN_ATTRIBUTES}


class Pipeline:
    def __init__(self, capture: bool = False) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.telemetry = MutationTelemetry(tracer_provider, MeterProvider(metric_readers=[self.reader]),
                                           capture_content=capture, environ={})

    def last(self):
        return self.spans.get_finished_spans()[-1]

    def exported_text(self) -> str:
        return "\n".join(s.to_json() for s in self.spans.get_finished_spans()) + \
            self.reader.get_metrics_data().to_json()


def span_matches(span, report) -> None:
    attrs = span.attributes
    assert span.name == f"ctxwatch {report.kind}"
    assert attrs[semconv.LOOP_ID] == report.loop_id and attrs[semconv.DECISION] == report.decision
    assert attrs[semconv.VIOLATIONS] == tuple(report.violations)
    assert attrs[semconv.WARNINGS] == tuple(report.warnings)
    for name, figure in [(semconv.LITERALS_BEFORE, report.literals_before),
                         (semconv.LITERALS_LOST, report.literals_lost),
                         (semconv.ORPHANS_TOOL_USE, report.orphans_tool_use),
                         (semconv.ORPHANS_TOOL_RESULT, report.orphans_tool_result),
                         (semconv.MESSAGES_BEFORE, report.messages_before),
                         (semconv.MESSAGES_AFTER, report.messages_after),
                         (semconv.PASS_NUMBER, report.pass_number),
                         (semconv.CONTRACTION_STATE, report.contraction_state)]:
        assert attrs[name] == figure, name
    if report.hash_distance is not None:
        assert attrs[semconv.HASH_DISTANCE] == pytest.approx(report.hash_distance)
    for name in attrs:
        assert name in SPEC, f"undocumented attribute {name}"


def test_record_000_observed_scenario_emits_an_error_span_naming_the_raised_error():
    pipeline = Pipeline()
    guard = ContextGuard("loop-000", agent="support", telemetry=pipeline.telemetry)
    session = record_000_session()
    guard.observe(session)
    proposed = session[:1] + session[1 + 4:]   # the 40% compaction: call_19bd's round and call_7f3a's call

    report = guard.check(proposed, kind="compact")
    span = pipeline.last()
    span_matches(span, report)
    assert report.decision == "abort" and span.status.status_code is StatusCode.ERROR
    with pytest.raises(OrphanedToolPairError) as raised:
        guard.apply(proposed, kind="compact")
    assert span.attributes["error.type"] == type(raised.value).__name__
    assert span.attributes["gen_ai.agent.name"] == "support"


def test_record_000_row_2_deferred_then_applied_at_the_session_boundary():
    pipeline = Pipeline()
    guard = ContextGuard("loop-000", telemetry=pipeline.telemetry)
    msgs = record_000_session()
    guard.observe(msgs)
    compacted = msgs[:1] + [user("Summary: customer 4411 placed 17 orders in March.")] + msgs[6:]
    report = guard.check(compacted, kind="compact")
    deferred = pipeline.last()
    span_matches(deferred, report)
    assert report.decision == "defer" and deferred.status.status_code is StatusCode.UNSET
    assert deferred.attributes[semconv.DEFERRAL_ID] == report.deferred_id
    assert "error.type" not in deferred.attributes

    applied = guard.session_boundary()
    assert applied is not None and applied.decision == "patch", applied and applied.explain()
    span = pipeline.last()
    span_matches(span, applied)
    assert span.attributes["gen_ai.conversation.compacted"] is True


TEXT, ARGS, RESULT, LITERAL = "zqxtextmarker", "zqxargmarker", "zqxresultmarker", "ZQX-90210"


def secret_session() -> list:
    return [system("You are a careful support agent."),
            user(f"Ticket {LITERAL} is open; note {TEXT} for later."),
            assistant("", call("call_aa11", "search_notes", query=f"{ARGS} please")),
            result("call_aa11", f"found {RESULT} in the notes"),
            assistant(f"I looked at {LITERAL} and the notes.")]


def drive_guard(pipeline: Pipeline) -> None:
    """An applied compaction that loses the literal, then a refused one that orphans a call."""
    guard = ContextGuard("loop-secret", agent="support", telemetry=pipeline.telemetry)
    session = secret_session()
    guard.observe(session, boundary=1)
    dropped_literal = [session[0], user("The user asked about notes."), *session[2:4],
                       assistant("I looked at the notes.")]
    first = guard.check(dropped_literal, kind="compact")
    assert first.decision == "patch" and first.literals_lost >= 1, first.explain()
    orphaning = [session[0], user("The user asked about notes."), session[3]]
    assert guard.check(orphaning, kind="compact").decision == "abort"


def test_no_text_argument_result_or_literal_leaves_the_process_by_default():
    pipeline = Pipeline()
    drive_guard(pipeline)
    text = pipeline.exported_text()
    for marker in (TEXT, ARGS, RESULT, LITERAL):
        assert marker not in text, marker
    assert [s.attributes[semconv.MUTATION_KIND] for s in pipeline.spans.get_finished_spans()] == [
        "append", "compact", "compact"]  # the observed turns, the applied and the refused compaction


def test_with_capture_on_only_the_documented_content_appears():
    pipeline = Pipeline(capture=True)
    drive_guard(pipeline)
    text = pipeline.exported_text()
    for marker in (TEXT, ARGS, RESULT):
        assert marker not in text, marker
    applied = pipeline.spans.get_finished_spans()[1]
    assert LITERAL in applied.attributes[semconv.LOST_LITERAL_VALUES]
    metrics_text = json.dumps(pipeline.reader.get_metrics_data().to_json())
    assert LITERAL not in metrics_text
    refused = pipeline.last()
    assert {e.attributes[semconv.FINDING_INVARIANT] for e in refused.events} >= {"tool_pairing"}


def test_with_capture_on_a_policy_finding_names_the_message_not_its_text():
    # record 001: the refusal names the pinned policy message by position; its text never leaves
    pipeline = Pipeline(capture=True)
    guard = ContextGuard("loop-policy", policy=lambda i, m: m.role == "system", telemetry=pipeline.telemetry)
    session = [system(f"Never reveal the codename {TEXT}."), user("hello"), assistant("hi")]
    guard.observe(session)
    report = guard.check([system("Be helpful."), *session[1:]], kind="system_patch")
    assert report.decision == "abort" and "policy_isolation" in report.violations, report.explain()
    assert "message 0" in report.explain()
    assert TEXT not in pipeline.exported_text()


def test_grown_turns_with_a_new_tool_list_are_reported_as_the_schema_change_the_guard_checks():
    # the guard evaluates it as a rewrite (schema check, a pass): its span must say so. Its messages only
    # grew, so it is no rewrite cycle of the alarm (`cycles.no_cycle_reason`: an append): no hash distance,
    # and neither the guard's detector nor the monitor's counts it
    pipeline = Pipeline()
    guard = ContextGuard("loop-tools", pass_cap=None, telemetry=pipeline.telemetry)
    guard.observe([system("You are a careful agent."), user("look up ORD-12345")])
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    for kind in (None, "append"):
        report = guard.check(guard.messages + [assistant(f"checking ({kind})")], kind=kind, tools=[tool])
        assert report.kind == "schema_change" and report.decision == "patch", report.explain()
        assert pipeline.last().attributes[semconv.MUTATION_KIND] == "schema_change"
        assert semconv.is_applied_rewrite(report.kind, report.decision)
        tool = {**tool, "function": {**tool["function"], "name": "lookup_v2"}}
        assert semconv.HASH_DISTANCE not in pipeline.last().attributes
    assert guard.passes_used == 2 and guard.detector.cycle == 0


@pytest.mark.parametrize("declared", ["compact", "prune", "rewrite", "schema_change"])
def test_growth_declared_as_a_rewrite_is_reported_as_the_append_the_guard_checks(declared):
    # an integration may name a compaction that turned out to append (or change nothing): it is no applied
    # rewrite, so no compacted flag, no pass and no r_t sample diluting the literal-loss alert's mean
    pipeline = Pipeline()
    guard = ContextGuard("loop-growth", telemetry=pipeline.telemetry)
    guard.observe([system("You are a careful agent."), user("look up ORD-12345")])
    for text in ("ORD-12345 shipped.", "done"):
        report = guard.check(guard.messages + [assistant(text)], kind=declared)
        assert report.kind == "append" and report.decision == "patch", report.explain()
    assert guard.check(guard.messages, kind=declared).kind == "append"  # nothing changed at all
    assert guard.passes_used == 0
    spans = pipeline.spans.get_finished_spans()
    assert {s.attributes[semconv.MUTATION_KIND] for s in spans} == {"append"}
    assert not any("gen_ai.conversation.compacted" in s.attributes for s in spans)
    names = {m.name for rm in pipeline.reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert "ctxwatch.rewrite.literal_loss_rate" not in names and "ctxwatch.rewrite.pass_number" not in names
