"""Issue 12's defects of the guard's core, one regression test (or a few) per defect: state moves only
after the final decision; one knob per invariant; an in-place edit never defeats a refusal; no false
refusal from symbol binding; no content in errors, explain(), logs or the caller's span by default."""

from __future__ import annotations

import copy
import logging

import pytest
from absorbing import run_absorbing_loop
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import (
    ContextGuard,
    ContextRewriteInvalidatesPlanError,
    DetectorConfig,
    GuardConfig,
    NonMonotonicRewriteError,
    PolicyMutationError,
)
from ctxwatch.model import Message
from ctxwatch.telemetry import MutationTelemetry

from conversations import assistant, call, in_format, result, system, user


# --- defect 1: a check changes state before the decision is final ------------------------------------
def contracting_guard(**kw) -> ContextGuard:
    """A guard whose instruction-absorbing compactor has entered the contraction regime (warned only)."""
    guard = ContextGuard("core-contracting", pass_cap=None, detector=DetectorConfig(min_literals=1, enter_cycles=2),
                         enforce={"directive_colocation": "warn", "contraction": "warn"}, **kw)
    if run_absorbing_loop(guard, 5, lambda report: "contraction" in report.warnings) is None:
        raise AssertionError("the absorbing compactor never reached the contraction regime")
    return guard


def test_a_relaxed_contraction_finding_does_not_halt_the_loop():
    guard = contracting_guard()
    assert guard.halted_at is None
    proposal = guard.messages[:1] + guard.messages[2:]
    with guard.in_flight("write"), pytest.raises(NonMonotonicRewriteError) as refused:
        guard.apply(proposal, kind="compact")
    # an ordinary barrier refusal stays an abort with its own error, not the alarm's halt
    assert type(refused.value) is ContextRewriteInvalidatesPlanError
    assert refused.value.report.decision == "abort" and refused.value.report.violations == ["barrier"]


def test_a_refused_check_leaves_the_detector_where_it_was():
    guard = contracting_guard()
    before = guard.detector.to_dict()
    with guard.in_flight("write"):
        assert guard.check(guard.messages[:1] + guard.messages[2:], kind="compact").decision == "abort"
    assert guard.detector.to_dict() == before


# --- defect 2: two knobs for one action ----------------------------------------------------------------
@pytest.mark.parametrize("action", ["abort", "defer"])
def test_contraction_has_one_knob_and_rejects_actions_that_do_nothing(action):
    expected = rf"enforce\['contraction'\]: '{action}' is not an action.*halt, warn, off"
    with pytest.raises(ValueError, match=expected):
        ContextGuard("x", enforce={"contraction": action})


def test_halt_on_contraction_is_gone_in_favour_of_the_enforcement_table():
    with pytest.raises(TypeError):
        ContextGuard("x", halt_on_contraction=False)  # type: ignore[call-arg]
    assert ContextGuard("x", enforce={"contraction": "warn"}).enforcement["contraction"] == "warn"


@pytest.mark.parametrize("invariant, action", [("tool_pairing", "halt"), ("literal_loss", "defer"),
                                               ("idempotence", "off")])
def test_an_action_that_would_do_nothing_for_an_invariant_is_refused_in_one_line(invariant, action):
    with pytest.raises(ValueError) as error:
        ContextGuard("x", enforce={invariant: action})
    assert invariant in str(error.value) and "\n" not in str(error.value)


def test_the_configuration_is_one_frozen_validated_value():
    config = GuardConfig(pass_cap=4, enforce={"literal_loss": "abort"})
    guard = ContextGuard("x", config=config)
    assert guard.config is config and guard.enforcement["literal_loss"] == "abort" and guard.pass_cap == 4
    with pytest.raises(AttributeError):
        config.pass_cap = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.enforce["literal_loss"] = "warn"  # type: ignore[index]
    with pytest.raises(ValueError, match="not both"):
        ContextGuard("x", config=config, pass_cap=3)
    with pytest.raises(ValueError, match="deferral must be one of"):
        GuardConfig(deferral="later")


# --- defect 3: an in-place edit of an observed message defeats a refusal ------------------------------
def policy_session(fmt: str) -> list:
    return in_format([system("Refunds above 500 EUR need a manager's approval."), user("Refund order 7781."),
                      assistant("", call("call_r1", "refund", order=7781)), result("call_r1", "refunded"),
                      assistant("Done.")], fmt)


@pytest.mark.parametrize("fmt", ["openai_chat"])
def test_an_in_place_edit_of_an_observed_message_never_comes_back_unchecked(fmt):
    msgs = policy_session(fmt)
    pristine = copy.deepcopy(msgs)
    guard = ContextGuard("core-inplace", policy=lambda i, m: m.role == "system")
    guard.observe(msgs)
    msgs[0]["content"] = "Refunds need no approval."  # the agent edits the dict it passed to observe()
    report, context = guard.resolve(msgs, kind="system_patch")
    assert report.decision == "abort" and "policy_isolation" in report.violations
    assert context == pristine and guard.messages == pristine
    with pytest.raises(PolicyMutationError):
        guard.apply(msgs, kind="system_patch")

    @guard.guarded(kind="system_patch", on_refusal="keep")
    def patch_policy(messages):
        return messages

    assert patch_policy(msgs) == pristine


# --- defect 4: a false refusal from symbol binding ------------------------------------------------------
PROSE = [
    "ABC-1234: check out the branch",                                   # "X: do Y"
    "Steps:\n- ABC-1234: check out the branch\n- ABC-1234: run the tests",  # markdown bullets
    "Tickets: ABC-1234: check, ABC-1234: verify",                       # a colon list
]


def as_request(msgs: list[Message], fmt: str):
    if fmt == "anthropic":
        return {"system": msgs[0].text, "messages": in_format(msgs, fmt)}
    return in_format(msgs, fmt)


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic"])
@pytest.mark.parametrize("prose", PROSE)
def test_a_colon_after_a_policy_referent_binds_nothing(fmt, prose):
    msgs = [system("Work only on ticket ABC-1234; never push to main."), user(prose),
            assistant("On it.", call("call_b1", "git", args="checkout ABC-1234")), result("call_b1", "switched"),
            assistant("Checked out ABC-1234.")]
    guard = ContextGuard("core-binding", policy=lambda i, m: m.role == "system")
    guard.observe(as_request(msgs, fmt))
    summary = user("Summary: the user asked to check out the branch of ABC-1234.")
    report = guard.check(as_request([msgs[0], summary, *msgs[2:]], fmt), kind="compact")
    assert "policy_isolation" not in report.violations, report.explain(values=True)
    assert report.literals_lost == 0 and report.orphans_tool_use == report.orphans_tool_result == 0


def test_a_policy_identifier_is_not_read_through_a_binding_in_the_payload():
    msgs = [system("Never print deploy_key."), user("deploy_key: rotate it monthly"), assistant("Understood.")]
    guard = ContextGuard("core-binding-id", policy=lambda i, m: m.role == "system")
    guard.observe(msgs)
    report = guard.check([msgs[0], user("Summary: deploy_key is rotated monthly."), msgs[2]], kind="compact")
    assert "policy_isolation" not in report.violations, report.explain(values=True)


# --- defect 5: content leaks through errors --------------------------------------------------------------
SECRETS = {
    "text": "zqx-private-note",
    "url": "https://admin:hunter2pw@db.internal.example/orders",
    "card": "4111-1111-1111-1111",
    "hex": "9f86d081884c7d65a1b2c3d4e5f60718",
    "arg": "/srv/secret/zqx_args.yaml",
    "result": "/srv/secret/zqx_result.csv",
    "policy": "POLICY-77881",
    "other": "/srv/secret/zqx_other.log",
}


def secret_session() -> list[Message]:
    return [
        system(f"Handle ticket {SECRETS['policy']} only."),
        user(f"Connect with {SECRETS['url']}; card {SECRETS['card']}; key {SECRETS['hex']}. {SECRETS['text']}"),
        assistant("", call("call_s1", "read_file", path=SECRETS["arg"])),
        result("call_s1", f"wrote {SECRETS['result']}"),
        assistant(f"Done with {SECRETS['policy']}."),
    ]


def test_no_planted_secret_reaches_spans_metrics_or_logs_when_a_refusal_crosses_the_callers_span(caplog):
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    telemetry = MutationTelemetry(provider, MeterProvider(metric_readers=[reader]), environ={})
    guard = ContextGuard("core-secrets", policy=lambda i, m: m.role == "system", telemetry=telemetry,
                         enforce={"literal_loss": "abort"})
    session = secret_session()
    caplog.set_level(logging.INFO, logger="ctxwatch")
    guard.observe(session)
    guard.plan.set([f"copy {SECRETS['result']} to the archive"])
    extra = user(f"Also see {SECRETS['other']}.")
    guard.observe([*session, extra])
    guard.observe(session)  # changed outside the guard, losing a literal: a warning is logged
    lossy = [session[0], user("Summary: credentials shared."), assistant("Done.")]
    tracer = provider.get_tracer("the-callers-app")
    with pytest.raises(NonMonotonicRewriteError) as refused, tracer.start_as_current_span("agent.turn"):
        guard.apply(lossy, kind="compact")  # the SDK records the exception on the caller's span
    exported = "\n".join(s.to_json() for s in spans.get_finished_spans()) + reader.get_metrics_data().to_json()
    leaked = {name: value for name, value in SECRETS.items()
              if value in exported or value in caplog.text or value in str(refused.value)}
    assert not leaked
    caller = next(s for s in spans.get_finished_spans() if s.name == "agent.turn")
    assert any(e.name == "exception" for e in caller.events)  # the message was recorded, without content
    assert "chars>" in str(refused.value)                     # literals described by kind and length
    # on explicit request, the values are shown
    shown = refused.value.report.explain(values=True)
    assert SECRETS["url"] in shown and SECRETS["hex"] in shown
    assert refused.value.report.violations == ["prefix_identity", "policy_isolation", "literal_loss",
                                               "plan_reference"]
    assert any(r.levelno == logging.WARNING and "literal_loss" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("module, measurement, invariant", [
    ("ctxwatch.guard", "literal_diff", "literal_loss"),
    ("ctxwatch.contraction", "ContractionDetector.preview", "contraction"),
])
def test_a_failing_measurement_refuses_the_rewrite_like_a_failing_check(monkeypatch, module, measurement, invariant):
    import importlib

    def broken(*args, **kwargs):
        raise RuntimeError("boom: /srv/secret/path")

    msgs = [system("s"), user("Order ORD-12345 is late."), assistant("Looking into ORD-12345.")]
    guard = ContextGuard("core-measure", enforce={"literal_loss": "abort"} if invariant == "literal_loss" else None)
    guard.observe(msgs, boundary=0)
    owner, _, name = measurement.rpartition(".")
    target = importlib.import_module(module)
    monkeypatch.setattr(getattr(target, owner) if owner else target, name, broken)
    report = guard.check([msgs[0], user("Summary: an order is late."), msgs[2]], kind="compact")
    assert report.decision in ("abort", "halt") and invariant in report.violations
    assert "boom" not in report.explain(values=True) and guard.passes_used == 0


@pytest.mark.parametrize("kind", ["squash", ["compact"], {"kind": "compact"}])
def test_an_unknown_kind_is_a_value_error_naming_it(kind):
    guard = ContextGuard("core-kind")
    guard.observe([Message("system", "rules"), Message("user", "hi")])
    with pytest.raises(ValueError, match="kind must be one of"):
        guard.check(guard.messages, kind=kind)
