"""Record 003 (literal preservation, the contraction regime) for opaque provider compactions (review F1):
a rewrite that adds a compaction the guard cannot read (OpenAI Responses' ``compaction`` item with
``encrypted_content``; Anthropic's ``compaction`` block read raw) hides the literals it takes out of
view, it does not lose them: r is unknown, the rewrite is no cycle of the contraction detector, and
``literal_loss`` only warns that they went behind it. A rewrite dropping literals in the clear is
judged as before. The rule is `ctxwatch.cycles.hides_rewritten_content`; the monitor reads the
unknown r off the span (``ctxwatch.literals.hidden`` instead of ``ctxwatch.literals.lost``)."""

from __future__ import annotations

from responses_orders import compaction, turns, user

from ctxwatch import ContextGuard, semconv
from ctxwatch.adapters import to_messages
from ctxwatch.cycles import CycleMeter, hides_rewritten_content
from ctxwatch.telemetry import fleet
from ctxwatch_monitor.records import MutationRecord


def users_of(items: list[dict]) -> list[dict]:
    return [i for i in items if i.get("role") == "user"]


def compacting_loop(summarize, rounds: int = 6, **guard_options) -> tuple[ContextGuard, list]:
    """Ten turns, then a compaction of everything by `summarize`, `rounds` times over."""
    guard = ContextGuard("opaque-loop", format="openai_responses", **guard_options)
    items: list[dict] = []
    reports = []
    for r in range(rounds):
        items = items + turns(range(10 * r, 10 * r + 10))
        guard.observe(items)
        report, items = guard.resolve(summarize(items, r), kind="compact")
        reports.append(report)
    return guard, reports


def opaque(items: list[dict], r: int) -> list[dict]:
    return users_of(items) + [compaction(r)]


def readable(items: list[dict], r: int) -> list[dict]:
    return [user(f"Summary {r}: some orders were looked up.")]


def test_an_opaque_server_compaction_hides_its_literals_and_is_no_cycle_of_the_alarm() -> None:
    guard, reports = compacting_loop(opaque)
    assert [r.decision for r in reports] == ["patch"] * 6
    assert {r.resolution for r in reports} == {"provider_compaction"}  # applied as the provider made it
    assert all(r.literals_lost == 0 and not r.lost_literals and r.hash_distance is None for r in reports)
    assert all(r.literals_hidden for r in reports)
    assert guard.detector.cycle == 0 and guard.detector.state == "healthy"
    assert [i["id"] for i in guard.messages if i.get("type") == "compaction"] == ["cmp_5"]  # the latest item
    finding = next(f for f in reports[-1].findings if f.invariant == "literal_loss")
    assert finding.action == "warn" and "behind an opaque provider compaction" in finding.message
    assert "loses" not in finding.message


def test_literal_loss_enforced_does_not_refuse_an_opaque_compaction_but_still_refuses_a_readable_one() -> None:
    _, hidden = compacting_loop(opaque, rounds=2, enforce={"literal_loss": "abort"})
    assert [r.decision for r in hidden] == ["patch", "patch"] and "literal_loss" in hidden[0].warnings
    _, dropped = compacting_loop(readable, rounds=2, enforce={"literal_loss": "abort"})
    assert dropped[0].decision == "abort" and "literal_loss" in dropped[0].violations
    assert "the rewrite loses" in next(f.message for f in dropped[0].findings if f.invariant == "literal_loss")


def test_a_compactor_dropping_the_literals_in_the_clear_is_still_measured_and_halted() -> None:
    guard, reports = compacting_loop(readable, rounds=8)
    assert all(r.literals_hidden is None for r in reports)
    measured = [r for r in reports if r.hash_distance is not None]
    assert measured and all(r.literals_lost == r.literals_before > 0 for r in measured)
    assert guard.halted_at is not None and reports[-1].decision == "halt"


def test_an_older_compaction_item_kept_does_not_hide_what_a_later_rewrite_drops_in_the_clear() -> None:
    guard = ContextGuard("opaque-then-clear", format="openai_responses")
    items = turns(range(10))
    guard.observe(items)
    _, items = guard.resolve(opaque(items, 0), kind="compact")
    items = items + turns(range(10, 20))
    guard.observe(items)
    kept_item = [i for i in items if i.get("type") == "compaction"]
    report, _ = guard.resolve(kept_item + [user("Summary: orders looked up.")], kind="compact")
    assert report.literals_hidden is None and report.literals_lost > 0 and report.hash_distance is not None
    assert guard.detector.cycle == 1


def test_the_rule_reads_both_providers_compactions_and_no_other_opaque_item() -> None:
    responses = to_messages([compaction(1), {"type": "reasoning", "id": "rs_1", "summary": [],
                                             "encrypted_content": "gAAAA"}], "openai_responses")
    assert hides_rewritten_content(responses[:1]) and not hides_rewritten_content(responses[1:])
    anthropic = to_messages([{"role": "assistant", "content": [{"type": "compaction", "content": "summary"}]},
                             {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}],
                            "anthropic")
    assert hides_rewritten_content(anthropic[:1]) and not hides_rewritten_content(anthropic[1:])


def test_cycle_figures_mark_an_opaque_rewrite_as_no_detector_cycle() -> None:
    before = to_messages(turns(range(5)), "openai_responses")
    figures = CycleMeter().measure(before, to_messages(opaque(turns(range(5)), 0), "openai_responses"))
    assert figures.no_cycle == "opaque" and not figures.is_cycle and figures.d is None and figures.r is None
    assert figures.hidden and not figures.lost and figures.literals_lost == 0
    clear = CycleMeter().measure(before, to_messages(readable([], 0), "openai_responses"))
    assert clear.is_cycle and clear.d is not None and clear.r is not None


def test_the_monitor_reads_an_opaque_rewrites_loss_rate_as_unknown_and_feeds_no_cycle() -> None:
    span = {semconv.LOOP_ID: "l", semconv.MUTATION_KIND: "compact", semconv.DECISION: "patch",
            semconv.LITERALS_BEFORE: 12, semconv.LITERALS_HIDDEN: 12}
    record = MutationRecord(span, 0)
    assert record.loss_rate is None and not record.feeds_detector
    clear = MutationRecord({**span, semconv.LITERALS_HIDDEN: None, semconv.LITERALS_LOST: 3,
                            semconv.HASH_DISTANCE: 0.4}, 0)
    assert clear.loss_rate == 0.25 and clear.feeds_detector


def test_an_opaque_rewrite_records_no_literal_loss_rate_on_the_fleet_histograms() -> None:
    """The guard's metrics and the monitor's record r_t through one rule (`telemetry.fleet.observations`):
    an unknown loss (None) is no observation, where a fake 0 would dilute the mean-loss alert."""
    opaque_figures = list(fleet.observations("compact", "patch", [(1, None, None, 20, None)]))
    readable_figures = dict(fleet.observations("compact", "patch", [(1, 0.4, 5, 20, None)]))
    assert semconv.LITERAL_LOSS_RATE not in dict(opaque_figures)
    assert readable_figures[semconv.LITERAL_LOSS_RATE] == [0.25]
