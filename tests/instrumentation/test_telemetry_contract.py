"""The wire contract (DESIGN.md "Wire contract", docs/telemetry.md), checked on the real OpenTelemetry
SDK with its in-memory span exporter and metric reader: every span attribute and metric instrument,
with its documented type and value, for each decision (patch, defer, abort, halt) and each invariant
id of records 000-004; the GenAI opt-in switch; cardinality caps; privacy (no content by default,
only the documented content with capture on)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode

from ctxwatch import semconv
from ctxwatch.decision import ERROR_FOR
from ctxwatch.report import INVARIANTS, MUTATION_KINDS, Finding, Report
from ctxwatch.telemetry import MutationTelemetry

DOCS = Path(__file__).resolve().parents[2] / "docs" / "telemetry.md"
PY_TYPES = {"string": str, "int": int, "double": float, "boolean": bool}
SPEC = {a.name: a for a in semconv.SPAN_ATTRIBUTES}


@dataclass
class Sdk:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def telemetry(self, **kwargs) -> MutationTelemetry:
        kwargs.setdefault("environ", {})
        return MutationTelemetry(self.tracer_provider, self.meter_provider, **kwargs)

    def span(self) -> ReadableSpan:
        (span,) = self.spans.get_finished_spans()
        return span

    def points(self) -> dict[str, list[tuple[dict, float]]]:
        """metric name -> [(attributes, value or histogram sum)]"""
        out: dict[str, list[tuple[dict, float]]] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out[m.name] = [(dict(p.attributes), p.value if hasattr(p, "value") else p.sum)
                                   for p in m.data.data_points]
        return out

    def units(self) -> dict[str, str]:
        data = self.reader.get_metrics_data()
        return {m.name: m.unit for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}

    def exported_text(self) -> str:
        """Everything exported, spans and metrics, as one string (for privacy checks)."""
        spans = [s.to_json() for s in self.spans.get_finished_spans()]
        data = self.reader.get_metrics_data()
        return "\n".join(spans) + (data.to_json() if data else "")


@pytest.fixture
def sdk() -> Sdk:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return Sdk(spans, reader, tracer_provider, MeterProvider(metric_readers=[reader]))


def report(decision: str, findings: list[Finding] | None = None, **figures) -> Report:
    base = dict(loop_id="loop-7", kind="compact", decision=decision, findings=findings or [],
                messages_before=12, messages_after=7, pass_number=3, pass_cap=8, agent="support-bot",
                size_before=5400, size_after=2100, hash_distance=0.31, literals_before=20, literals_lost=0,
                contraction_state="healthy", duration_s=0.0042)
    base.update(figures)
    return Report(**base)


def run(sdk: Sdk, rep: Report, telemetry: MutationTelemetry | None = None, **start) -> ReadableSpan:
    telemetry = telemetry or sdk.telemetry()
    args = dict(loop_id=rep.loop_id, kind=rep.kind, agent=rep.agent, pass_number=rep.pass_number,
                pass_cap=rep.pass_cap)
    args.update(start)
    telemetry.start(**args).end(rep)
    return sdk.span()


def assert_documented_types(span: ReadableSpan) -> None:
    for name, value in span.attributes.items():
        spec = SPEC[name]  # every attribute we emit is in the documented registry
        if spec.type == "string[]":
            assert isinstance(value, tuple) and all(isinstance(v, str) for v in value), name
        else:
            assert type(value) is PY_TYPES[spec.type], (name, value)


ALWAYS = {semconv.LOOP_ID, semconv.MUTATION_KIND, semconv.PASS_NUMBER, semconv.DECISION,
          semconv.LITERALS_BEFORE, semconv.LITERALS_LOST, semconv.ORPHANS_TOOL_USE,
          semconv.ORPHANS_TOOL_RESULT, semconv.VIOLATIONS, semconv.WARNINGS, semconv.CONTRACTION_STATE,
          semconv.MESSAGES_BEFORE, semconv.MESSAGES_AFTER, semconv.SIZE_BEFORE, semconv.SIZE_AFTER,
          semconv.CACHE_INVALIDATED_CHARS, semconv.CACHE_INVALIDATED_TOKENS}


# --- each decision ---------------------------------------------------------------------------------
def test_patch_compaction_is_an_internal_span_with_every_figure_and_compacted_true(sdk):
    # record 003: an applied compaction that keeps every literal
    span = run(sdk, report("patch"))
    assert span.name == "ctxwatch compact" and span.kind is SpanKind.INTERNAL
    assert span.status.status_code is StatusCode.UNSET
    attrs = span.attributes
    assert set(attrs) >= ALWAYS
    assert_documented_types(span)
    assert attrs[semconv.DECISION] == "patch" and attrs[semconv.LOOP_ID] == "loop-7"
    assert attrs[semconv.HASH_DISTANCE] == 0.31 and attrs[semconv.PASS_CAP] == 8
    assert attrs[semconv.MESSAGES_BEFORE] == 12 and attrs[semconv.MESSAGES_AFTER] == 7
    assert attrs[semconv.SIZE_BEFORE] == 5400 and attrs[semconv.SIZE_AFTER] == 2100
    assert attrs[semconv.VIOLATIONS] == () and attrs[semconv.WARNINGS] == ()
    assert attrs["gen_ai.conversation.compacted"] is True
    assert attrs["gen_ai.agent.name"] == "support-bot"
    assert "error.type" not in attrs and "gen_ai.conversation.id" not in attrs
    points = sdk.points()
    base = {semconv.MUTATION_KIND: "compact", semconv.DECISION: "patch", "gen_ai.agent.name": "support-bot"}
    assert points["ctxwatch.mutations"] == [(base, 1)]
    assert points["ctxwatch.guard.duration"] == [(base, 0.0042)]
    assert points["ctxwatch.rewrite.hash_distance"] == [(base, 0.31)]
    assert points["ctxwatch.rewrite.literal_loss_rate"] == [(base, 0.0)]
    assert points["ctxwatch.rewrite.pass_number"] == [(base, 3)]
    for absent in ("ctxwatch.lost_literals", "ctxwatch.orphaned_tool_parts", "ctxwatch.deferrals",
                   "ctxwatch.invariant_violations", "ctxwatch.telemetry.errors"):
        assert absent not in points


def test_the_episode_is_on_the_span_from_the_first_new_episode_on(sdk):
    assert semconv.EPISODE not in run(sdk, report("patch")).attributes  # absent means episode 0
    sdk.spans.clear()
    span = run(sdk, report("patch", episode=2))
    assert span.attributes[semconv.EPISODE] == 2
    assert_documented_types(span)


def test_units_and_instrument_names_follow_the_documented_specs(sdk):
    run(sdk, report("abort", [Finding("tool_pairing", "orphan", "abort")], literals_lost=2,
                    orphans_tool_use=1, orphans_tool_result=1))
    units = sdk.units()
    for spec in semconv.METRICS:
        if spec.name in units:
            assert units[spec.name] == spec.unit
        assert "total" not in spec.name and not spec.name.endswith(("seconds", "_ms", "bytes"))
    assert units["ctxwatch.guard.duration"] == "s"


def test_patch_of_a_non_compaction_kind_never_sets_compacted(sdk):
    span = run(sdk, report("patch", kind="append"))
    assert "gen_ai.conversation.compacted" not in span.attributes  # never false, absent


def test_patch_with_a_warning_counts_the_lost_literals_and_the_rate(sdk):
    # record 003: literal loss is measured on every rewrite; the default enforcement only warns
    rep = report("patch", [Finding("literal_loss", "2 literals lost", "warn")], literals_lost=5)
    span = run(sdk, rep)
    assert span.attributes[semconv.WARNINGS] == ("literal_loss",)
    assert span.attributes[semconv.VIOLATIONS] == ()
    assert span.attributes[semconv.LITERALS_LOST] == 5
    points = sdk.points()
    assert points["ctxwatch.lost_literals"][0][1] == 5
    assert points["ctxwatch.rewrite.literal_loss_rate"][0][1] == pytest.approx(0.25)
    (attrs, value), = points["ctxwatch.invariant_warnings"]
    assert attrs[semconv.INVARIANT] == "literal_loss" and value == 1
    assert semconv.DECISION not in attrs


def test_defer_is_a_handled_outcome_with_the_deferral_id_and_no_error(sdk):
    # record 000: a prefix edit with no pair straddling the boundary is deferred to the session boundary
    rep = report("defer", [Finding("prefix_identity", "alters message 2 of the consumed prefix", "defer")],
                 deferred_id=4)
    span = run(sdk, rep)
    assert span.status.status_code is StatusCode.UNSET
    assert "error.type" not in span.attributes and "gen_ai.conversation.compacted" not in span.attributes
    assert span.attributes[semconv.DEFERRAL_ID] == 4
    assert span.attributes[semconv.VIOLATIONS] == ("prefix_identity",)
    assert_documented_types(span)
    points = sdk.points()
    assert points["ctxwatch.deferrals"] == [({semconv.MUTATION_KIND: "compact",
                                              "gen_ai.agent.name": "support-bot"}, 1)]
    (attrs, value), = points["ctxwatch.invariant_violations"]
    assert attrs[semconv.INVARIANT] == "prefix_identity" and attrs[semconv.DECISION] == "defer"


def test_abort_sets_error_status_error_type_and_orphan_counts_by_side(sdk):
    # record 000: the compaction would drop call_7f3a's result
    rep = report("abort", [Finding("tool_pairing", "drops the result of call_7f3a", "abort")],
                 orphans_tool_use=1, orphans_tool_result=2)
    span = run(sdk, rep)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "abort: tool_pairing"
    assert span.attributes["error.type"] == "OrphanedToolPairError"
    assert span.attributes[semconv.ORPHANS_TOOL_USE] == 1
    assert span.attributes[semconv.ORPHANS_TOOL_RESULT] == 2
    assert "gen_ai.conversation.compacted" not in span.attributes
    assert_documented_types(span)
    sides = {a[semconv.ORPHAN_SIDE]: v for a, v in sdk.points()["ctxwatch.orphaned_tool_parts"]}
    assert sides == {"tool_use": 1, "tool_result": 2}


def test_halt_in_the_contraction_regime(sdk):
    # record 003: d_t below r_t for k cycles: the loop must be halted
    rep = report("halt", [Finding("contraction", "d=0.02 < r=0.4 for 3 cycles", "halt"),
                          Finding("literal_loss", "8 literals lost", "warn")],
                 contraction_state="contracting", literals_lost=8, hash_distance=0.02, residual_pressure=900)
    span = run(sdk, rep)
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "ContractionRegimeError"
    assert span.attributes[semconv.CONTRACTION_STATE] == "contracting"
    assert span.attributes[semconv.RESIDUAL_PRESSURE] == 900
    assert span.attributes[semconv.VIOLATIONS] == ("contraction",)
    assert span.attributes[semconv.WARNINGS] == ("literal_loss",)
    assert_documented_types(span)
    decisions = [a[semconv.DECISION] for a, _ in sdk.points()["ctxwatch.mutations"]]
    assert decisions == ["halt"]


@pytest.mark.parametrize("invariant", INVARIANTS)
def test_each_invariant_is_named_on_the_span_the_metric_and_error_type(sdk, invariant):
    rep = report("abort", [Finding(invariant, f"{invariant} refused", "abort")])
    span = run(sdk, rep)
    assert span.attributes[semconv.VIOLATIONS] == (invariant,)
    assert span.attributes["error.type"] == ERROR_FOR[invariant].__name__
    assert span.status.description == f"abort: {invariant}"
    (attrs, value), = sdk.points()["ctxwatch.invariant_violations"]
    assert attrs[semconv.INVARIANT] == invariant and value == 1


@pytest.mark.parametrize("invariant", INVARIANTS)
def test_each_invariant_as_a_warning(sdk, invariant):
    span = run(sdk, report("patch", [Finding(invariant, "seen", "warn")]))
    assert span.attributes[semconv.WARNINGS] == (invariant,)
    (attrs, _), = sdk.points()["ctxwatch.invariant_warnings"]
    assert attrs[semconv.INVARIANT] == invariant


# --- span placement and sampling ---------------------------------------------------------------------
def test_the_span_is_a_child_of_the_callers_invoke_agent_span(sdk):
    tracer = sdk.tracer_provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent support-bot") as parent:
        sdk.telemetry().start(loop_id="l", kind="prune", pass_number=1).end(report("patch", kind="prune"))
    child = next(s for s in sdk.spans.get_finished_spans() if s.name == "ctxwatch prune")
    assert child.parent.span_id == parent.get_span_context().span_id
    assert child.context.trace_id == parent.get_span_context().trace_id


@pytest.mark.parametrize("capture", [False, True])
def test_an_attempt_that_raised_before_its_report_is_an_error_span_without_a_kind(sdk, capture):
    # no decision was made: the span is an error, not a mutation span (no kind: the monitor passes over it,
    # no metric counts it), and the exception's message may quote text: its event only with capture on
    handle = sdk.telemetry(capture_content=capture).start(loop_id="l", kind="prune", agent="bot", pass_number=2)
    handle.fail(KeyError("message 3 says zqxsecret"))
    handle.end(report("patch", kind="prune"))  # after fail, end does nothing
    span = sdk.span()
    assert handle.span is not None and span.context == handle.span.get_span_context()
    assert span.name == "ctxwatch prune" and span.status.status_code is StatusCode.ERROR
    assert span.status.description == "KeyError"
    assert span.attributes["error.type"] == "KeyError" and span.attributes[semconv.LOOP_ID] == "l"
    assert semconv.MUTATION_KIND not in span.attributes and semconv.DECISION not in span.attributes
    assert sdk.points() == {}
    if capture:
        (event,) = span.events
        assert event.name == "exception" and "zqxsecret" in event.attributes["exception.message"]
    else:
        assert span.events == () and "zqxsecret" not in span.to_json()


class RecordingSampler(Sampler):
    def __init__(self):
        self.seen: list[dict] = []

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None):
        self.seen.append(dict(attributes or {}))
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "recording"


def test_the_sampler_sees_every_attribute_the_decision_included():
    # the span is started once the decision is known (at its recorded start time), so a sampler can
    # keep every refusal and a fraction of the applied mutations
    sampler = RecordingSampler()
    provider = TracerProvider(sampler=sampler)
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = MutationTelemetry(provider, MeterProvider(), environ={})
    handle = telemetry.start(loop_id="loop-1", kind="compact", agent="bot", conversation_id="conv_1",
                             pass_number=2, pass_cap=5, service="billing")
    handle.end(report("abort", [Finding("tool_pairing", "orphan", "abort")], orphans_tool_result=1))
    (seen,) = sampler.seen
    assert {k: seen[k] for k in (semconv.LOOP_ID, semconv.MUTATION_KIND, semconv.PASS_CAP, semconv.SERVICE_NAME,
                                  "gen_ai.agent.name", "gen_ai.conversation.id")} == {
        semconv.LOOP_ID: "loop-1", semconv.MUTATION_KIND: "compact", semconv.PASS_CAP: 8,
        semconv.SERVICE_NAME: "billing", "gen_ai.agent.name": "bot", "gen_ai.conversation.id": "conv_1"}
    assert seen[semconv.DECISION] == "abort" and seen[semconv.VIOLATIONS] == ["tool_pairing"]
    assert seen["error.type"] == "OrphanedToolPairError"
    (span,) = spans.get_finished_spans()
    assert span.start_time == handle.start_time_ns < span.end_time
    assert dict(span.attributes) == {k: tuple(v) if isinstance(v, list) else v for k, v in seen.items()}


def test_an_unsampled_span_still_records_metrics():
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(spans))
    MutationTelemetry(provider, MeterProvider(metric_readers=[reader]), environ={}).start(
        loop_id="l", kind="compact").end(report("abort", [Finding("order", "reordered", "abort")]))
    assert spans.get_finished_spans() == ()
    names = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
             for m in sm.metrics}
    assert {"ctxwatch.mutations", "ctxwatch.invariant_violations"} <= names


def test_loop_id_left_to_the_resource_when_the_caller_gives_none(sdk):
    span = run(sdk, report("patch"), loop_id=None)
    assert semconv.LOOP_ID not in span.attributes
    resource = {semconv.LOOP_ID: "loop-from-resource"}
    assert semconv.resolve_loop_id(span.attributes, resource) == "loop-from-resource"
    assert semconv.resolve_loop_id({semconv.LOOP_ID: "span-loop"}, resource) == "span-loop"
    assert semconv.resolve_loop_id({}, None) is None


def test_conversation_id_only_when_the_caller_gives_one(sdk):
    span = run(sdk, report("patch"), conversation_id="conv_5j66")
    assert span.attributes["gen_ai.conversation.id"] == "conv_5j66"


# --- GenAI semantic-convention versions --------------------------------------------------------------
def test_default_emits_the_v1_41_names_and_schema_url(sdk):
    span = run(sdk, report("abort", [Finding("barrier", "write in flight", "abort")]))
    assert span.instrumentation_scope.schema_url == "https://opentelemetry.io/schemas/1.41.0"
    assert span.instrumentation_scope.name == "ctxwatch" and span.instrumentation_scope.version
    assert {"gen_ai.agent.name", "error.type"} <= set(span.attributes)


def test_latest_experimental_opt_in_switches_the_schema_url_and_keeps_the_names(sdk):
    env = {semconv.ENV_STABILITY_OPT_IN: "http, gen_ai_latest_experimental"}
    telemetry = sdk.telemetry(environ=env)
    assert telemetry.names is semconv.GENAI_LATEST
    span = run(sdk, report("abort", [Finding("barrier", "write in flight", "abort")]), telemetry)
    assert span.instrumentation_scope.schema_url == semconv.SCHEMA_URL_GENAI_LATEST
    for field in ("agent_name", "conversation_id", "conversation_compacted", "error_type"):
        assert getattr(semconv.GENAI_LATEST, field) == getattr(semconv.GENAI_V1_41, field)
    assert span.attributes["error.type"] == "ContextRewriteInvalidatesPlanError"
    assert semconv.genai_names({semconv.ENV_STABILITY_OPT_IN: "http"}) is semconv.GENAI_V1_41


# --- bounded metric attributes -----------------------------------------------------------------------
def test_agent_names_past_the_cap_and_overlong_names_become_the_overflow_value(sdk):
    telemetry = sdk.telemetry()
    for i in range(semconv.MAX_LABEL_VALUES + 6):
        telemetry.start(loop_id=f"loop-{i}", kind="compact", agent=f"agent-{i}").end(
            report("patch", agent=f"agent-{i}", loop_id=f"loop-{i}"))
    telemetry.start(loop_id="x", kind="compact", agent="a" * 500).end(report("patch", agent="a" * 500))
    agents = [a["gen_ai.agent.name"] for a, _ in sdk.points()["ctxwatch.mutations"]]
    assert len(agents) == semconv.MAX_LABEL_VALUES + 1
    overflow = dict((a["gen_ai.agent.name"], v) for a, v in sdk.points()["ctxwatch.mutations"])
    assert overflow[semconv.OVERFLOW] == 7
    # no loop, conversation or tool-call id ever reaches a metric
    text = json.dumps(sdk.points())
    assert "loop-" not in text


def test_agent_versions_label_the_mutation_counter_only_bounded_and_version_like(sdk):
    """The span keeps the caller's version; the metric label admits MAX_VERSION_VALUES version-like values,
    the rest (past the cap, control characters, spaces, too long) is OVERFLOW, and only ctxwatch.mutations
    carries it."""
    telemetry = sdk.telemetry()
    versions = [f"2.1.{n}" for n in range(semconv.MAX_VERSION_VALUES + 3)]
    hostile = ["1.0\n2", "\x1b[0m", "a b", 'v"1"', "9" * (semconv.MAX_VERSION_LENGTH + 1)]
    for n, version in enumerate([*versions, *hostile, "0.104.0-alpha.1+build_7"]):
        telemetry.start(loop_id=f"loop-{n}", kind="compact", agent="claude-code", agent_version=version).end(
            report("patch", agent="claude-code", loop_id=f"loop-{n}"))
    telemetry.start(loop_id="unversioned", kind="compact", agent="claude-code").end(
        report("patch", agent="claude-code", loop_id="unversioned"))
    spans = sdk.spans.get_finished_spans()
    assert spans[len(versions)].attributes["gen_ai.agent.version"] == "1.0\n2"  # the span keeps what it was given
    counted = {a.get("gen_ai.agent.version"): v for a, v in sdk.points()["ctxwatch.mutations"]}
    assert {v for v in counted if v not in (None, semconv.OVERFLOW)} == set(versions[:semconv.MAX_VERSION_VALUES])
    assert counted[semconv.OVERFLOW] == 3 + len(hostile) + 1  # the cap is full for the valid last one too
    assert counted[None] == 1  # no version: no attribute
    for name, points in sdk.points().items():
        if name != "ctxwatch.mutations":
            assert all("gen_ai.agent.version" not in attributes for attributes, _ in points), name
    assert semconv.is_version_label("0.104.0-alpha.1+build_7") and not semconv.is_version_label("")


def test_an_unknown_kind_is_bounded_on_span_name_and_metrics(sdk):
    span = run(sdk, report("patch", kind="mystery"), kind="mystery")
    assert span.name == "ctxwatch _OTHER"
    assert sdk.points()["ctxwatch.mutations"][0][0][semconv.MUTATION_KIND] == semconv.OVERFLOW


def test_metric_names_do_not_coincide_with_attribute_names_or_namespaces():
    attribute_names = {a.name for a in semconv.SPAN_ATTRIBUTES} | set(semconv.PROMETHEUS_LABELS) | {
        semconv.FINDING_ACTION, semconv.FINDING_MESSAGE}
    namespaces = {n.rsplit(".", i)[0] for n in attribute_names for i in range(1, n.count(".") + 1)}
    for spec in semconv.METRICS:
        assert spec.name not in attribute_names | namespaces, spec.name
        assert set(spec.attributes) <= set(semconv.PROMETHEUS_LABELS)


def test_prometheus_names_the_monitor_exposes():
    names = {spec.name: semconv.prometheus_name(spec) for spec in semconv.METRICS}
    assert names["ctxwatch.mutations"] == "ctxwatch_mutations_total"
    assert names["ctxwatch.guard.duration"] == "ctxwatch_guard_duration_seconds"
    assert names["ctxwatch.rewrite.hash_distance"] == "ctxwatch_rewrite_hash_distance"
    assert names["ctxwatch.telemetry.errors"] == "ctxwatch_telemetry_errors_total"
    assert all(n.startswith("ctxwatch_") for n in names.values())
    assert set(semconv.PROMETHEUS_LABELS.values()) >= {"service", "agent", "kind", "decision", "invariant"}


def test_every_name_of_the_contract_is_documented():
    page = DOCS.read_text()
    names = [a.name for a in semconv.SPAN_ATTRIBUTES] + [m.name for m in semconv.METRICS]
    names += [semconv.prometheus_name(m) for m in semconv.METRICS] + list(semconv.PROMETHEUS_LABELS)
    names += [semconv.FINDING_EVENT, semconv.FINDING_ACTION, semconv.FINDING_MESSAGE, semconv.OVERFLOW,
              semconv.ENV_CAPTURE_CONTENT, semconv.ENV_STABILITY_OPT_IN, semconv.SCHEMA_URL_V1_41,
              semconv.SCHEMA_URL_GENAI_LATEST, semconv.span_name("{kind}")]
    names += list(MUTATION_KINDS) + list(INVARIANTS)
    missing = [n for n in names if f"`{n}`" not in page]
    assert not missing, f"docs/telemetry.md does not document {missing}"


# --- privacy -------------------------------------------------------------------------------------------
MARKER_LITERAL = "ZQXSECRET-7731"
MARKER_MESSAGE = "zqxfindingtext"


def secret_report() -> Report:
    return report("abort", [Finding("plan_reference", f"step 3 needs {MARKER_LITERAL} ({MARKER_MESSAGE})",
                                    "abort", {"symbols": [MARKER_LITERAL]})],
                  literals_lost=1, lost_literals=frozenset({MARKER_LITERAL}))


def test_no_literal_value_and_no_finding_text_leaves_the_process_by_default(sdk):
    # DESIGN.md: counts, sizes and hashes only
    run(sdk, secret_report())
    text = sdk.exported_text()
    assert MARKER_LITERAL not in text and MARKER_MESSAGE not in text
    assert sdk.span().events == ()


@pytest.mark.parametrize("value", ["true", "SPAN_ONLY", "span_and_event"])
def test_capture_on_adds_exactly_the_lost_literals_and_the_finding_events(sdk, value):
    telemetry = sdk.telemetry(environ={semconv.ENV_CAPTURE_CONTENT: value})
    span = run(sdk, secret_report(), telemetry)
    assert span.attributes[semconv.LOST_LITERAL_VALUES] == (MARKER_LITERAL,)
    (event,) = span.events
    assert event.name == semconv.FINDING_EVENT
    assert dict(event.attributes) == {
        semconv.FINDING_INVARIANT: "plan_reference", semconv.FINDING_ACTION: "abort",
        semconv.FINDING_MESSAGE: f"step 3 needs {MARKER_LITERAL} ({MARKER_MESSAGE})"}
    assert MARKER_LITERAL not in json.dumps(sdk.points())  # never on metrics


@pytest.mark.parametrize("value", ["", "false", "EVENT_ONLY", "NO_CONTENT"])
def test_capture_stays_off_for_other_values(value):
    assert not semconv.capture_content_enabled({semconv.ENV_CAPTURE_CONTENT: value})


def test_captured_literal_values_are_capped(sdk):
    lost = frozenset(f"ORD-{i:05d}" for i in range(200))
    rep = report("patch", literals_lost=200, lost_literals=lost)
    span = run(sdk, rep, sdk.telemetry(capture_content=True))
    assert len(span.attributes[semconv.LOST_LITERAL_VALUES]) == semconv.MAX_CAPTURED_LITERALS


REWRITE_HISTOGRAMS = {"ctxwatch.rewrite.hash_distance", "ctxwatch.rewrite.literal_loss_rate",
                      "ctxwatch.rewrite.pass_number"}


@pytest.mark.parametrize(("rep", "applied"), [
    (report("patch"), True),                                                    # an applied rewrite
    (report("patch", observed=True), True),                                     # one found already made
    (report("patch", kind="append"), False),                                    # appended turns
    (report("halt", [Finding("contraction", "d < r", "halt")]), False),         # the cycle the alarm halted
    (report("abort", [Finding("tool_pairing", "orphan", "abort")], hash_distance=None), False),
    (report("defer", [Finding("prefix_identity", "prefix", "defer")], hash_distance=None), False),
    (report("halt", [Finding("pass_cap", "cap", "halt")], hash_distance=None), False),  # refused at the cap
], ids=["applied", "observed", "append", "halted-by-alarm", "abort", "defer", "halted-at-cap"])
def test_rewrite_histograms_describe_applied_rewrites_only(sdk, rep, applied):
    # an agent retrying a refused rewrite must not weight the distributions with its retries; the
    # duration histogram and the counters see every attempt
    run(sdk, rep)
    points = sdk.points()
    assert "ctxwatch.mutations" in points and "ctxwatch.guard.duration" in points
    assert semconv.is_applied_rewrite(rep.kind, rep.decision) is applied
    if applied:
        assert set(points) >= REWRITE_HISTOGRAMS
        assert points["ctxwatch.rewrite.pass_number"][0][1] == rep.pass_number
    else:
        assert not REWRITE_HISTOGRAMS & set(points)
