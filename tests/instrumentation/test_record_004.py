"""Record 004 (rewrites that invalidate a pending plan): the observed scenario, pin-or-invalidate,
and the barrier."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwatch import ContextGuard, ContextRewriteInvalidatesPlanError, LiteralRegistry
from ctxwatch.invariants.plan import PlanStep
from ctxwatch.invariants.references import extract_symbols, mentions

from conversations import FORMATS, assistant, call, in_format, result, system, tool_turn, user


def planning_session():
    return [
        system("You fix configuration bugs. Work step by step."),
        user("The service times out after 5s; raise the timeout to 30s."),
        *tool_turn("call_f1", "find_files", "found: /etc/payments/config.yaml", pattern="config.yaml"),
        assistant("config_path = /etc/payments/config.yaml"),
        *tool_turn("call_c1", "checksum", "sha256 9f86d081884c7d65", path="/etc/payments/config.yaml"),
        assistant("Baseline checksum recorded: 9f86d081884c7d65. Next I will open(config_path)."),
    ]


def paraphrased_summary(msgs):
    """The observed compaction: the plan skeleton kept, the artifacts paraphrased into prose."""
    return msgs[:2] + [user("Summary so far: we determined the config path and computed the checksum.")]


def guard_with_plan() -> ContextGuard:
    guard = ContextGuard("loop-004", agent="fixer")
    guard.plan.set([
        PlanStep("3", "open(config_path) and set timeout: 30"),
        PlanStep("4", "verify the file changed against checksum 9f86d081884c7d65"),
    ])
    return guard


@pytest.mark.parametrize("fmt", FORMATS)
def test_observed_scenario_summarized_config_path_is_refused_before_any_step_runs(fmt):
    msgs = planning_session()
    guard = guard_with_plan()
    guard.observe(in_format(msgs, fmt), boundary=0)        # a fresh session: only plan references matter
    proposal = in_format(paraphrased_summary(msgs), fmt)
    report = guard.check(proposal, kind="compact")
    assert report.decision == "abort"
    assert report.violations == ["plan_reference"]
    finding = next(f for f in report.findings if f.invariant == "plan_reference")
    assert finding.details["symbols"] == ["9f86d081884c7d65", "config_path"]
    assert finding.details["steps"] == ["3", "4"]
    assert "pin" in finding.message and "invalidate" in finding.message
    with pytest.raises(ContextRewriteInvalidatesPlanError) as err:
        guard.apply(proposal, kind="compact")
    assert err.value.dangling == ["9f86d081884c7d65", "config_path"]
    assert guard.messages == in_format(msgs, fmt)


def test_pin_keeps_the_defining_lines_and_the_rewrite_passes():
    msgs = planning_session()
    guard = guard_with_plan()
    guard.observe(msgs, boundary=0)
    proposal = paraphrased_summary(msgs)
    pinned = guard.pin_symbols(proposal, ["config_path", "9f86d081884c7d65"])
    pin_text = pinned[3].text
    assert "config_path = /etc/payments/config.yaml" in pin_text
    assert "9f86d081884c7d65" in pin_text
    report = guard.check(pinned, kind="compact")
    assert report.decision == "patch", report.explain()


def test_completed_steps_no_longer_hold_a_rewrite_back():
    msgs = planning_session()
    guard = guard_with_plan()
    guard.observe(msgs, boundary=0)
    guard.plan.complete("3")
    assert [s.status for s in guard.plan.steps] == ["done", "pending"]
    assert "config_path" not in guard.plan.live_refs()  # only step 3 used it
    report = guard.check(paraphrased_summary(msgs), kind="compact")
    assert report.decision == "abort"  # step 4 is still pending and loses its checksum
    assert next(f for f in report.findings if f.invariant == "plan_reference").details == {
        "symbols": ["9f86d081884c7d65"], "steps": ["4"]}
    guard.plan.complete("4")
    assert guard.plan.live_refs() == {}
    assert guard.check(paraphrased_summary(msgs), kind="compact").decision == "patch"
    with pytest.raises(KeyError, match="no plan step"):
        guard.plan.complete("9")


def test_invalidate_lets_the_rewrite_through_and_the_plan_must_be_rebuilt():
    msgs = planning_session()
    guard = guard_with_plan()
    guard.observe(msgs, boundary=0)
    guard.plan.invalidate("3", "4")
    report = guard.check(paraphrased_summary(msgs), kind="compact")
    assert report.decision == "patch", report.explain()
    assert "plan_reference" not in report.violations
    assert report.literals_lost >= 2      # still measured as literal loss


def test_a_value_bound_to_a_surviving_name_counts_as_altered():
    """The name survives in prose but the value it was bound to is gone."""
    msgs = planning_session()
    guard = guard_with_plan()
    guard.observe(msgs, boundary=0)
    keeps_name = msgs[:2] + [user("Summary: config_path was found; checksum 9f86d081884c7d65 recorded.")]
    report = guard.check(keeps_name, kind="compact")
    assert report.decision == "abort"
    finding = next(f for f in report.findings if f.invariant == "plan_reference")
    assert finding.details["symbols"] == ["config_path"]
    assert "/etc/payments/config.yaml" not in finding.message and "<path, 25 chars>" in finding.message
    assert "/etc/payments/config.yaml" in report.explain(values=True)


def test_unreferenced_detail_may_be_compressed():
    """Referentially conservative rewrites pass: the artifacts steps use survive verbatim."""
    msgs = planning_session()
    guard = guard_with_plan()
    guard.observe(msgs, boundary=0)
    conservative = msgs[:2] + [user("Found config_path = /etc/payments/config.yaml; baseline checksum "
                                    "9f86d081884c7d65.")]
    report = guard.check(conservative, kind="compact")
    assert report.decision == "patch", report.explain()


def test_barrier_no_rewrite_while_a_tool_call_is_in_flight():
    msgs = planning_session() + [assistant("", call("call_w1", "write_file", path="/etc/payments/config.yaml"))]
    guard = ContextGuard("loop-barrier")
    guard.observe(msgs, boundary=0)
    report = guard.check(msgs[:2] + msgs[-1:], kind="compact")
    assert report.decision == "abort"
    assert "barrier" in report.violations
    assert "call_w1" in report.explain()
    # appending the result is allowed; afterwards the rewrite is judged on its own merits
    done = msgs + [result("call_w1", "ok")]
    assert guard.check(done, kind="append").decision == "patch"
    assert "barrier" not in guard.check(done[:2] + done[-3:], kind="compact").violations


def test_barrier_no_rewrite_while_a_write_is_pending():
    msgs = planning_session()
    guard = ContextGuard("loop-barrier-2")
    guard.observe(msgs, boundary=0)
    with guard.in_flight("write /etc/payments/config.yaml"):
        report = guard.check(msgs[:4], kind="prune")
        assert report.decision == "abort" and report.violations == ["barrier"]
        assert guard.check(msgs + [user("status?")], kind="append").decision == "patch"
    assert guard.check(msgs[:2] + msgs[4:] + [user("status?")], kind="prune").decision == "patch"


def test_a_near_namesake_does_not_keep_a_reference_alive():
    """`ABC-123` is gone even though `ABC-1234` survives: symbols match as whole tokens."""
    msgs = [system("s"), user("The ticket is ABC-123. Also related: ABC-1234."), assistant("noted"), user("next")]
    guard = ContextGuard("loop-004-namesake")
    guard.plan.set(["close ABC-123 once the fix is deployed"])
    guard.observe(msgs, boundary=0)
    report = guard.check([msgs[0], user("Related: ABC-1234."), *msgs[2:]], kind="compact")
    assert report.decision == "abort" and report.violations == ["plan_reference"]
    assert next(f for f in report.findings if f.invariant == "plan_reference").details["symbols"] == ["ABC-123"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["fix", "test_guard.py", "config_path", "ABC-123", "/srv/data/", "/srv/data",
                                 "outputId", "call_7f3a", "v1.2", "x.y_z", "a/b_c.txt", "9f86d081884c7d65",
                                 "(config_path)", "`output_id`", "ABC-1234.", "-", "."]), max_size=12))
def test_every_symbol_read_from_a_text_is_found_again_in_it(words):
    """Reading symbols and finding them use the same bounds: a plan step always mentions its own refs."""
    text = " ".join(words)
    message = user(text)
    for symbol in extract_symbols(text, LiteralRegistry()):
        assert mentions(message, symbol), (symbol, text)
