"""Record 000 (append-only prefix and tool pairing): the observed scenario and the decision table,
row by row, in the context model and in the OpenAI and Anthropic formats."""

import copy

import pytest

from ctxwatch import ContextGuard, NonMonotonicRewriteError, OrphanedToolPairError
from ctxwatch.model import Message, OpaquePart, ToolSchema

from conversations import (
    FORMATS,
    assistant,
    call,
    in_format,
    record_000_session,
    result,
    system,
    tool_turn,
    user,
)

QUERY_DB = ToolSchema("query_db", '{"parameters": {"sql": "string"}}')
LOOKUP = ToolSchema("lookup_customer", '{"parameters": {"customer_id": "integer"}}')
REFUNDS = ToolSchema("list_refunds", '{"parameters": {"customer_id": "integer"}}')


def new_guard(**kw) -> ContextGuard:
    return ContextGuard("loop-000", agent="support", tools=[QUERY_DB, LOOKUP, REFUNDS], **kw)


@pytest.mark.parametrize("fmt", FORMATS)
def test_observed_scenario_call_7f3a_lost_to_40_percent_compaction_is_aborted(fmt):
    """What Was Observed: a policy update removes query_db and a compaction drops the oldest 40%
    of history, taking call_7f3a but not its result. The guard aborts and keeps the old prefix."""
    session = in_format(record_000_session(), fmt)
    guard = new_guard()
    guard.observe(session)
    head = 1 if fmt != "anthropic" else 0           # the system prompt is not part of "history"
    history = session[head:]
    cut = round(len(record_000_session()[1:]) * 0.4)
    proposed = session[:head] + history[cut:]
    snapshot = copy.deepcopy(proposed)

    report = guard.check(proposed, kind="compact", tools=[LOOKUP, REFUNDS])

    assert report.decision == "abort"
    assert "tool_pairing" in report.violations
    assert report.orphans_tool_result == 1 and report.orphans_tool_use == 0
    pairing = next(f for f in report.findings if f.invariant == "tool_pairing")
    assert pairing.details["tool_result_without_use"] == ["call_7f3a"]
    assert "query_db" in pairing.message and "400" in pairing.message
    assert guard.messages == session            # the old prefix is kept
    assert proposed == snapshot                 # the caller's list is untouched
    with pytest.raises(OrphanedToolPairError) as err:
        guard.apply(proposed, kind="compact", tools=[LOOKUP, REFUNDS])
    assert err.value.report.decision == "abort"
    assert "call_7f3a" in str(err.value)


@pytest.mark.parametrize("fmt", FORMATS)
def test_row_1_rewrite_after_the_generation_boundary_is_patched(fmt):
    """Row 1: the rewrite touches only what the model has not consumed yet → patch."""
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(in_format(msgs, fmt))
    turn = [assistant("", call("call_88aa", "query_db", sql="SELECT * FROM refunds")),
            result("call_88aa", "row " * 2000)]
    grown = in_format(msgs + turn, fmt)
    assert guard.check(grown, kind="append").decision == "patch"
    trimmed = in_format(msgs + [turn[0], result("call_88aa", "row row … (1998 rows elided)")], fmt)
    report = guard.check(trimmed, kind="prune")
    assert report.decision == "patch", report.explain()
    assert report.violations == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_row_2_consumed_prefix_altered_without_straddling_a_pair_is_deferred(fmt):
    """Row 2: the compaction alters the consumed prefix in whole-pair units → defer; the deferred
    rewrite applies at the next session boundary, rebased on what was appended since."""
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(in_format(msgs, fmt))
    summary = user("Summary: customer 4411 (Ada Park, gold) placed 17 orders in March (call_7f3a).")
    compacted_model = msgs[:1] + [summary] + msgs[6:]       # drops two whole tool rounds
    compacted = in_format(compacted_model, fmt)
    report = guard.check(compacted, kind="compact")
    assert report.decision == "defer", report.explain()
    assert report.violations == ["prefix_identity"]
    assert report.deferred_id is not None
    assert guard.messages == in_format(msgs, fmt)          # nothing applied yet
    later = msgs + [user("Thanks. Anything else?")]
    guard.check(in_format(later, fmt), kind="append")
    applied = guard.session_boundary()
    assert applied is not None and applied.decision == "patch", applied and applied.explain()
    assert guard.messages == in_format(compacted_model + [later[-1]], fmt)


@pytest.mark.parametrize("fmt", FORMATS)
def test_row_3_schema_removed_while_its_call_is_pending_is_aborted(fmt):
    """Row 3: dropping a schema still referenced by pending history → abort; once the result is in,
    the same removal is allowed and the historical call stays resolvable."""
    msgs = record_000_session()[:5]                  # ends with call_7f3a awaiting its result
    guard = new_guard()
    guard.observe(in_format(msgs, fmt))
    assert guard.pending_calls == {"call_7f3a"}
    report = guard.check(in_format(msgs, fmt), kind="schema_change", tools=[LOOKUP, REFUNDS])
    assert report.decision == "abort"
    assert "schema_version" in report.violations
    assert "call_7f3a" in report.explain() and "query_db" in report.explain()

    done = msgs + [result("call_7f3a", '{"rows": [[17]]}')]
    assert guard.check(in_format(done, fmt), kind="append").decision == "patch"
    report = guard.check(in_format(done, fmt), kind="schema_change", tools=[LOOKUP, REFUNDS])
    assert report.decision == "patch", report.explain()
    assert guard.registry.resolves("query_db", QUERY_DB.version)      # historical, still resolvable
    assert "query_db" not in guard.registry.active


@pytest.mark.parametrize("fmt", ["ctxwatch", "openai_chat"])
def test_row_4_self_edit_is_an_untrusted_proposal(fmt):
    """Row 4: a model-requested self-edit of the consumed system prompt is refused (not deferred);
    before anything is consumed it passes the same validation and is applied."""
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(in_format(msgs, fmt))
    with pytest.raises(NonMonotonicRewriteError) as err:
        guard.self_edit("You are a support agent. Ignore refunds.")
    assert err.value.report.decision == "abort"
    assert err.value.report.violations == ["prefix_identity"]

    fresh = new_guard()
    fresh.observe(in_format(msgs[:2], fmt), boundary=0)
    edited = fresh.self_edit("You are a support agent for orders and refunds.")
    assert fresh.check(edited, kind="append").decision == "patch"


def test_pending_call_at_the_frontier_is_not_an_orphan():
    """A call awaiting its result at the frontier is pending; appending its result is a patch, and a
    call left behind after the model moved on is an orphan."""
    msgs = [system(), user("hi"), assistant("", call("call_a", "query_db", sql="x"))]
    guard = new_guard()
    report = guard.check(msgs, kind="append")
    assert report.decision == "patch" and report.orphans_tool_use == 0
    assert guard.pending_calls == {"call_a"}
    moved_on = msgs + [assistant("I could not wait for the query.")]
    report = guard.check(moved_on, kind="append")
    assert report.decision == "abort" and report.orphans_tool_use == 1


def test_duplicate_tool_ids_are_refused():
    msgs = [system(), user("q"), *tool_turn("call_1", "query_db", "1", sql="a")]
    guard = new_guard()
    guard.observe(msgs)
    dup = msgs + tool_turn("call_1", "query_db", "2", sql="b")
    report = guard.check(dup, kind="append")
    assert report.decision == "abort"
    assert "duplicates tool ids" in report.explain()


def test_rerender_must_be_byte_stable_for_the_consumed_prefix():
    msgs = record_000_session()
    guard = new_guard()
    rendered = "".join(m.canonical().decode() for m in msgs)
    guard.observe(msgs, rendered=rendered)
    extra = msgs + [user("one more question")]
    stable = rendered + extra[-1].canonical().decode()
    assert guard.check(extra, kind="append", rendered=stable).decision == "patch"
    guard2 = new_guard()
    guard2.observe(msgs, rendered=rendered)
    unstable = rendered.replace('"system"', '"system" ', 1) + "x"
    report = guard2.check(extra, kind="append", rendered=unstable)
    assert report.decision == "abort" and report.violations == ["rerender"]


def test_whole_pair_compaction_with_an_elision_marker_at_the_frontier():
    """Record 000's operational effect: history shrinks in whole-pair units and the model is told,
    by a marker appended at the frontier, that earlier turns were elided."""
    msgs = record_000_session()
    guard = new_guard(deferral="whole_pairs")
    guard.observe(msgs)
    # the proposal drops call_19bd's round and, carelessly, only the call of call_7f3a
    proposal = msgs[:1] + [user("Summary: customer 4411 is Ada Park.")] + msgs[5:]
    assert guard.check(proposal, kind="compact").decision == "abort"    # orphan: refused outright
    proposal = msgs[:1] + [user("Summary: customer 4411 is Ada Park.")] + msgs[4:]
    out = guard.apply(proposal, kind="compact")
    assert [m.digest for m in out[:-1]] == [m.digest for m in msgs[:1] + msgs[4:]]
    marker = out[-1]
    assert marker.text.startswith("[ctxwatch] earlier turns were elided (elision 1): 3 messages in 2 whole units")
    assert "Ada Park" in marker.text
    assert guard.context.messages == tuple(out)


def test_a_pure_truncation_is_a_patch_unless_it_separates_a_pair():
    """Rolling back the latest turns leaves every remaining message on the prefix it was generated
    from, so it is not deferred; dropping a result while its call stays is still refused."""
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(msgs)
    report = guard.check(msgs[:-1], kind="prune")
    assert report.decision == "patch" and report.violations == []
    report = guard.check(msgs[:5], kind="prune")           # keeps call_7f3a, drops its result
    assert report.decision == "abort" and report.orphans_tool_use == 1


def test_default_apply_compacts_history_in_whole_pairs_and_queues_other_prefix_edits():
    """deferral="auto": a deferred compaction is applied at once in whole-pair units with an elision
    marker; a deferred system patch waits for the session boundary."""
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(msgs)
    out = guard.apply(msgs[:1] + [user("Summary: Ada Park, customer 4411.")] + msgs[4:], kind="compact")
    assert out[-1].text.startswith("[ctxwatch] earlier turns were elided")
    patched = [system("You are a support agent. Be brief.")] + list(guard.context.messages[1:])
    assert guard.apply(patched, kind="system_patch") == out and len(guard.deferred) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_summary_placed_between_a_call_and_its_result_is_refused(fmt):
    """Providers want the result right after its call (OpenAI: the tool messages after the
    tool_calls; Anthropic: the next user message): anything in between orphans both."""
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(in_format(msgs, fmt), boundary=0)
    wedged = msgs[:5] + [user("Summary so far: customer 4411 is Ada Park.")] + msgs[5:]
    report = guard.check(in_format(wedged, fmt), kind="rewrite")
    assert report.decision == "abort" and "tool_pairing" in report.violations
    assert report.orphans_tool_use == 1 and report.orphans_tool_result == 1
    assert "cut off from its result by message" in report.explain()


def test_a_rerank_that_moves_a_turn_between_a_call_and_its_result_is_refused():
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(msgs, boundary=0)
    moved = msgs[:5] + [msgs[7]] + msgs[5:7] + msgs[8:]
    report = guard.check(moved, kind="rerank")
    assert report.decision == "abort" and "tool_pairing" in report.violations


def test_a_turn_appended_after_an_unanswered_call_orphans_it_at_that_append():
    msgs = [system(), user("hi"), assistant("", call("call_a", "query_db", sql="x"))]
    guard = new_guard()
    guard.observe(msgs)
    report = guard.check(msgs + [user("hello?")], kind="append")
    assert report.decision == "abort" and report.orphans_tool_use == 1


def test_parallel_responses_calls_awaiting_a_result_are_pending_and_hold_the_barrier():
    """OpenAI Responses sends each parallel function_call as its own item: the call still waiting is
    pending (not an old orphan), so no rewrite runs while it is in flight (record 004)."""
    items = [{"role": "user", "content": "go and check /etc/app.yaml"},
             {"type": "function_call", "call_id": "call_a1111", "name": "query_db", "arguments": "{}"},
             {"type": "function_call", "call_id": "call_b2222", "name": "query_db", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_b2222", "output": "ok"}]
    guard = new_guard(format="openai_responses")
    guard.observe(items, boundary=0)
    assert guard.pending_calls == {"call_a1111"}
    report = guard.check([{"role": "user", "content": "go (summarized)"}] + items[1:], kind="compact")
    assert report.decision == "abort" and report.violations == ["barrier"]
    assert "tool_pairing" not in report.warnings        # no false "pre-existing orphan"


def test_the_same_tool_list_sent_with_every_check_is_not_a_schema_change():
    """Runtimes send the tool list with every request: appends stay appends (not rewrite passes), the
    arriving result is not refused by the barrier, and the pass cap is not spent."""
    msgs = record_000_session()[:5]                       # call_7f3a awaiting its result
    guard = new_guard(pass_cap=2)
    guard.observe(msgs)
    tools = [QUERY_DB, LOOKUP, REFUNDS]
    grown = msgs + [result("call_7f3a", '{"rows": [[17]]}')]
    for extra in range(4):
        grown = grown + [user(f"and month {extra}?")]
        report = guard.check(grown, kind="append", tools=tools)
        assert report.decision == "patch", report.explain()
    assert guard.passes_used == 0


def test_whole_pair_compaction_elides_the_copy_the_proposal_dropped():
    """Of two identical turns, the one the proposal removed goes, not the first with that content."""
    msgs = [system(), assistant("ok"), user("deploy to prod"), assistant("ok"), user("status?")]
    guard = new_guard()
    guard.observe(msgs)
    out = guard.apply(msgs[:3] + msgs[4:], kind="prune")
    assert [m.text for m in out[:-1]] == ["You are a careful data assistant.", "ok", "deploy to prod", "status?"]


@pytest.mark.parametrize("between", [
    Message("user", [OpaquePart("image", '{"type":"image"}')]),           # an image-only user turn
    Message("assistant", [OpaquePart("thinking", '{"type":"thinking"}')]),  # a thinking-only turn
])
def test_anything_but_tool_traffic_between_a_call_and_its_result_cuts_them_apart(between):
    msgs = record_000_session()
    guard = new_guard()
    guard.observe(msgs, boundary=0)
    report = guard.check(msgs[:5] + [between] + msgs[5:], kind="rewrite")
    assert report.decision == "abort" and "tool_pairing" in report.violations


def test_a_new_call_after_some_results_orphans_the_call_still_unanswered():
    msgs = [system(), user("q"),
            assistant("", call("call_a1", "query_db", sql="a"), call("call_b1", "query_db", sql="b")),
            result("call_a1", "A"), assistant("", call("call_c1", "query_db", sql="c")), result("call_b1", "B"),
            result("call_c1", "C")]
    guard = new_guard()
    report = guard.check(msgs, kind="append")
    assert report.decision == "abort" and report.orphans_tool_use == 1


def test_text_before_the_results_in_the_user_turn_is_refused_in_anthropic_format():
    msgs = record_000_session()[:5]
    guard = new_guard()
    guard.observe(in_format(msgs, "anthropic"))
    answer = {"role": "user", "content": [{"type": "text", "text": "here you go"},
                                          {"type": "tool_result", "tool_use_id": "call_7f3a", "content": "17"}]}
    report = guard.check(in_format(msgs, "anthropic") + [answer], kind="append")
    assert report.decision == "abort" and report.orphans_tool_result == 1


def test_the_elision_marker_goes_before_a_call_whose_result_the_model_has_not_read():
    """Review F17: the boundary cuts the last unit (the model made call_b, its result is unread). The
    frontier is the unit boundary before it, so the marker never follows the result and the context
    still ends with what the model reads next."""
    from ctxwatch.deferral import ELISION_PREFIX, whole_pair_conversion

    msgs = [system(), user("q1"), *tool_turn("call_a", "query_db", "1", sql="a"), assistant("one"),
            user("q2"), *tool_turn("call_b", "query_db", "2", sql="b")]
    read = len(msgs) - 1  # everything but call_b's result
    out = whole_pair_conversion(msgs, read, {1, 2, 3, 4}, "", role="user", number=1, format=None)
    assert not isinstance(out, str) and out is not None
    assert [m.digest for m in out.messages[-2:]] == [m.digest for m in msgs[-2:]]  # the unread unit, last
    marker = out.messages[-3]
    assert marker.text.startswith(ELISION_PREFIX) and out.elided == 4
