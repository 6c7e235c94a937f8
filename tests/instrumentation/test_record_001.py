"""Record 001 (policy isolation, provenance, re-rank, pass cap): the audit-log scenario and the
hash-chained provenance log."""

import json

import pytest

from ctxwatch import ContextGuard, Message, PolicyMutationError, TextPart, verify_jsonl

from conversations import assistant, system, user

SUBGOAL = "Subgoal: reconcile the March ledger without modifying the audit log."
RUBRIC = ("Compaction policy: when the window exceeds 70% occupancy, re-rank spans by relevance to the "
          "current subgoal and drop the bottom quartile.")


def episode() -> list[Message]:
    notes = [
        "Ledger row 118 disagrees with invoice INV-20418 by 12.50.",
        "Audit log entries must never be edited; corrections go to the ledger only.",
        "The March export lives in /data/ledger/2026-03.csv.",
        "Invoice INV-20502 was paid twice; refund pending.",
        "Weather today is sunny; irrelevant to the ledger.",
        "Row 204 matches after rounding to cents.",
        "The reconciliation report goes to finance@example.com.",
        "Lunch order placed for the team.",
    ]
    return ([system(RUBRIC, id="rubric"), user(SUBGOAL, id="subgoal")]
            + [assistant(n, id=f"note-{i}") for i, n in enumerate(notes)])


def relevance(message: Message, subgoal: str) -> int:
    goal = set(subgoal.lower().split())
    return len(goal & set(message.text.lower().split()))


def compaction_pass(messages: list[Message], pinned: int) -> list[Message]:
    """The record's compactor: re-rank the payload by relevance to the subgoal, drop the bottom quartile."""
    head, payload = messages[:pinned], messages[pinned:]
    subgoal = messages[1].text
    ranked = sorted(payload, key=lambda m: -relevance(m, subgoal))
    keep = ranked[: len(ranked) - max(1, len(ranked) // 4)]
    return head + keep


def new_guard(**kw) -> ContextGuard:
    return ContextGuard("loop-001", agent="ledger", policy=["rubric", "subgoal"], **kw)


def test_audit_log_scenario_the_first_paraphrase_of_the_subgoal_is_refused():
    """What Was Observed: an earlier pass paraphrased the subgoal, dropping 'without modifying the audit
    log'; later passes then ranked the audit-log rule low and dropped it. With the subgoal pinned, the
    first paraphrase is refused and the rule survives every pass."""
    guard = new_guard(pass_cap=6)
    messages = episode()
    guard.observe(messages, boundary=0)

    first = compaction_pass(messages, pinned=2)
    report = guard.check(first, kind="rerank")         # re-rank and drop: a mutation with provenance
    assert report.decision == "patch", report.explain()

    paraphrased = [first[0], user("Subgoal: reconcile the March ledger.", id="subgoal")] + first[2:]
    report = guard.check(paraphrased, kind="rewrite")
    assert report.decision == "abort"
    assert report.violations == ["policy_isolation"]
    assert "subgoal" in report.explain()
    with pytest.raises(PolicyMutationError):
        guard.apply(paraphrased, kind="rewrite")

    current = guard.context.messages
    for _ in range(4):                             # the compactor keeps going on the intact subgoal
        nxt = compaction_pass(list(current), pinned=2)
        assert guard.check(nxt, kind="rerank").decision == "patch"
        current = guard.context.messages
    assert any("Audit log entries must never be edited" in m.text for m in current)
    assert current[1].text == SUBGOAL


def test_unguarded_run_of_the_same_compactor_loses_the_audit_log_rule():
    """The counterfactual: letting the paraphrase through makes later passes drop the rule."""
    messages = episode()
    first = compaction_pass(messages, pinned=2)
    current = [first[0], user("Subgoal: reconcile the March ledger.", id="subgoal")] + first[2:]
    for _ in range(4):
        current = compaction_pass(current, pinned=2)
    assert not any("Audit log" in m.text for m in current)


def test_rerank_of_the_payload_is_allowed_and_recorded_with_its_order():
    guard = new_guard()
    messages = episode()
    guard.observe(messages, boundary=0)
    reranked = messages[:2] + list(reversed(messages[2:]))
    report = guard.check(reranked, kind="rerank")
    assert report.decision == "patch", report.explain()
    orders = [e.order for e in guard.provenance if e.order is not None]
    assert orders == [[0, 1, 9, 8, 7, 6, 5, 4, 3, 2]]


def test_moving_or_changing_a_pinned_span_is_refused():
    guard = new_guard()
    messages = episode()
    guard.observe(messages, boundary=0)
    moved = [messages[0]] + messages[2:5] + [messages[1]] + messages[5:]
    report = guard.check(moved, kind="rerank")
    assert report.decision == "abort" and report.violations == ["policy_isolation"]
    assert "moves pinned policy" in report.explain()
    retouched = [Message("system", [TextPart(RUBRIC + " ")], id="rubric")] + messages[1:]
    assert guard.check(retouched, kind="system_patch").violations == ["policy_isolation"]


def test_removing_the_last_payload_copy_of_a_literal_the_policy_names_is_refused():
    policy = system("Never write to /var/log/audit/ledger.log; corrections go to INV-20418's ledger row.",
                    id="rule")
    payload = [user("Fix row 118.", id="ask"),
               assistant("Row 118 belongs to INV-20418; the audit trail is /var/log/audit/ledger.log.", id="n1"),
               assistant("Rounded totals match.", id="n2")]
    guard = ContextGuard("loop-001b", policy=["rule"])
    guard.observe([policy] + payload, boundary=0)
    report = guard.check([policy, payload[0], payload[2]], kind="prune")
    assert report.decision == "abort" and report.violations == ["policy_isolation"]
    finding = report.findings[0]
    assert set(finding.details["symbols"]) == {"/var/log/audit/ledger.log", "INV-20418"}
    assert guard.check([policy, payload[0], payload[1]], kind="prune").decision == "patch"


def test_pass_cap_refuses_and_reports_residual_pressure():
    guard = new_guard(pass_cap=2, budget=200)
    messages = episode()
    guard.observe(messages, boundary=0)
    current = messages
    for _ in range(2):
        current = current[:-1]
        assert guard.check(current, kind="prune").decision == "patch"
    report = guard.check(current[:-1], kind="prune")
    assert report.decision == "abort" and report.violations == ["pass_cap"]
    size = sum(len(m.text) for m in current)
    assert report.residual_pressure == size - 200
    assert f"{size - 200} characters over the budget of 200" in report.explain()
    with pytest.raises(AttributeError):
        guard.pass_cap = 10                     # the cap is pinned
    guard.new_episode()
    assert guard.check(current[:-1], kind="prune").decision == "patch"


def passes_guard() -> ContextGuard:
    """The prune and the compaction of `run_passes` each lose literals from a shrinking toy buffer, two
    evidence cycles in a row for the contraction alarm (docs/alarm.md), which would halt the third pass;
    these tests are about the provenance chain of three applied passes, so the alarm only warns."""
    return new_guard(enforce={"contraction": "warn"})


def run_passes(guard: ContextGuard) -> None:
    messages = episode()
    guard.observe(messages, boundary=0)
    guard.check(messages[:2] + list(reversed(messages[2:])), kind="rerank")
    cur = list(guard.context.messages)
    guard.check(cur[:-2], kind="prune")
    cur = list(guard.context.messages)
    guard.check(cur[:3] + [assistant("Summary: ledger rows 118 and 204 reviewed.")], kind="compact")


def test_provenance_chain_verifies_and_keeps_pre_images_of_mutation_passes(tmp_path):
    guard = passes_guard()
    run_passes(guard)
    entries = list(guard.provenance)
    assert [e.pass_number for e in entries][0] == 1 and entries[-1].pass_number == 3
    assert guard.provenance.verify().ok
    prune_pres = [e.pre for e in entries if e.kind == "prune"]
    compact_pres = [e.pre for e in entries if e.kind == "compact" and e.pre]
    assert all(guard.provenance.pre_images.get(p) is None for p in prune_pres)       # selection: set difference
    assert all(guard.provenance.pre_images.get(p) is not None for p in compact_pres)  # mutation: full pre-image
    path = tmp_path / "chain.jsonl"
    assert guard.provenance.export_jsonl(path) == len(entries)
    assert verify_jsonl(path).ok


@pytest.mark.parametrize("field", ["span_id", "pre", "post", "pass_number", "kind", "order"])
def test_tampering_with_any_entry_makes_verify_name_it(tmp_path, field):
    guard = passes_guard()
    run_passes(guard)
    path = tmp_path / "chain.jsonl"
    guard.provenance.export_jsonl(path)
    lines = path.read_text().splitlines()
    for target in range(len(lines)):
        entries = [json.loads(line) for line in lines]
        entries[target][field] = "tampered" if entries[target][field] != "tampered" else "x"
        path.write_text("".join(json.dumps(e) + "\n" for e in entries))
        check = verify_jsonl(path)
        assert not check.ok and check.first_bad == target, (field, target, check)
        assert f"entry {target}" in check.reason


def test_removing_or_reordering_entries_is_detected(tmp_path):
    guard = passes_guard()
    run_passes(guard)
    path = tmp_path / "chain.jsonl"
    guard.provenance.export_jsonl(path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2] + lines[3:]) + "\n")
    assert verify_jsonl(path).first_bad == 2
    path.write_text("\n".join([lines[1], lines[0]] + lines[2:]) + "\n")
    assert verify_jsonl(path).first_bad == 0


def test_a_near_namesake_in_the_payload_is_not_a_copy_of_what_the_policy_names():
    policy = system("Do not close ticket ABC-123 without approval.", id="rule")
    guard = ContextGuard("loop-001-namesake", policy=["rule"])
    guard.observe([policy, user("Working on ABC-123 and ABC-1234.")], boundary=0)
    report = guard.check([policy, user("Working on ABC-1234.")], kind="rewrite")
    assert report.decision == "abort" and report.violations == ["policy_isolation"]
    assert report.findings[0].details["symbols"] == ["ABC-123"]
