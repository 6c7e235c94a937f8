"""One rule of what is a rewrite cycle of the contraction alarm (`ctxwatch.cycles.no_cycle_reason`), followed
by the guard and by replay alike.

One sequence of contexts, an OpenAI Responses agent's, goes through a live guard (`observe`, each change
reported and adopted, its spans caught by the real OpenTelemetry SDK) and through the audit and backfill of
``ctxwatch replay`` (the same contexts as a message-snapshot file): both call the same changes cycles and
give them the same d, literals and detector state; the changes that are none (a clearing to a placeholder,
a pair-dropping pruning, a rewind, an opaque compaction) have no hash distance on either side's spans, an
opaque one ``ctxwatch.literals.hidden`` instead of a lost count. And `elides_only`'s cases: what writes
nothing is an elision, what carries text or literals of what it replaced is not.
"""

from __future__ import annotations

import json
from pathlib import Path

from backfill_spans import backfilled
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from responses_orders import compaction, turns, user

from ctxwatch import ContextGuard, Message, TextPart, ToolCall, ToolResult, semconv
from ctxwatch.cycles import ELISION, OPAQUE, no_cycle_reason
from ctxwatch.deferral import PLACEHOLDER_MAX_CHARS, elides_only, elision_marker
from ctxwatch.diff import Change
from ctxwatch.model import Context
from ctxwatch.telemetry import MutationTelemetry

CLEARED = "[Old tool result content cleared]"


def cleared(items: list[dict], calls: set[str], output: str = CLEARED) -> list[dict]:
    """`items` with the outputs of `calls` replaced by `output`, in place."""
    return [{**i, "output": output} if i.get("type") == "function_call_output" and i["call_id"] in calls else i
            for i in items]


def contexts() -> list[tuple[list[dict], str | None]]:
    """The agent's successive contexts, each with why its change is no cycle (None: a cycle; "" an append)."""
    out: list[tuple[list[dict], str | None]] = []
    items: list[dict] = []

    def then(new: list[dict], reason: str | None) -> None:
        nonlocal items
        items = new
        out.append((new, reason))

    then(turns(range(6)), "")
    then(cleared(items, {"call_0", "call_1", "call_2"}), ELISION)  # microcompaction-style clearing
    then(items + turns(range(6, 8)), "")
    then(items[8:], ELISION)  # the first two turns dropped whole, pairs and all
    then(items + turns(range(8, 10)), "")
    then([user("Summary: ORD-1004 and ORD-1009 shipped from WH-204 and WH-209.")] + items[-4:], None)
    then(items + turns(range(10, 12)), "")
    then(cleared(items, {"call_10"}, "ORD-1010: done"), None)  # "cleared" to a text keeping its literal: a rewrite
    then(cleared(items, {"call_9"}, "The lookup said the order was shipped; the warehouse confirmed it and the "
                                    "carrier will deliver it this week, as the customer asked."), None)  # a summary
    then(items + turns(range(12, 14)), "")
    then([i for i in items if i.get("role") == "user"] + [compaction(1)], OPAQUE)  # /responses/compact
    then(items + turns(range(14, 16)), "")
    then(items[:-4], ELISION)  # a rewind: the last turn taken back
    then(items + turns(range(16, 18)), "")
    then([user("Summary 2: ORD-1017 shipped.")] + items[-4:], None)
    return out


def guard_spans(sequence: list[list[dict]]) -> list:
    """The rewrite spans of a live guard observing each context in turn. A change made outside the guard
    is measured when the checks let it through as it is: with prefix_identity a warning (under the default
    it would be deferred, and an adopted change that was not let through is not measured)."""
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = ContextGuard("agree", format="openai_responses", telemetry=MutationTelemetry(provider, environ={}),
                         enforce={"prefix_identity": "warn"})
    for items in sequence:
        guard.observe(items)
    return [s for s in exporter.get_finished_spans() if s.attributes[semconv.MUTATION_KIND] != "append"]


def figures(span) -> tuple:
    a = span.attributes
    d = a.get(semconv.HASH_DISTANCE)
    return (a[semconv.DECISION], None if d is None else round(d, 9), a[semconv.LITERALS_BEFORE],
            a.get(semconv.LITERALS_LOST), a.get(semconv.LITERALS_HIDDEN), a[semconv.CONTRACTION_STATE],
            a[semconv.CONTRACTION_CYCLE])


def test_the_guard_and_replay_agree_on_which_changes_are_cycles_and_what_their_spans_carry(tmp_path: Path) -> None:
    sequence = contexts()
    path = tmp_path / "agent.jsonl"
    path.write_text("".join(json.dumps(items) + "\n" for items, _ in sequence), encoding="utf-8")
    expected = [reason for _, reason in sequence if reason != ""]

    audit, replayed = backfilled(path, "agree")
    assert audit.readable and [m.no_cycle for m in audit.mutations] == expected
    assert [m.cycle for m in audit.mutations] == [None, None, 1, 2, 3, None, None, 4]
    live = guard_spans([items for items, _ in sequence])
    rewrites = [s for s in replayed if s.attributes[semconv.MUTATION_KIND] != "append"]
    assert len(live) == len(rewrites) == len(expected)
    for reason, guard, replay in zip(expected, live, rewrites, strict=True):
        assert figures(guard) == figures(replay), reason
        assert (semconv.HASH_DISTANCE in guard.attributes) == (reason is None)
        assert (semconv.LITERALS_HIDDEN in guard.attributes) == (reason == OPAQUE)
    opaque = next(m for m in audit.mutations if m.no_cycle == OPAQUE)
    assert opaque.hidden and not opaque.lost and opaque.verdict is None and opaque.hash_distance is None
    assert [s.attributes[semconv.CONTRACTION_CYCLE] for s in live][-1] == 4


def test_a_change_elides_only_when_it_writes_nothing_of_what_it_replaced() -> None:
    call = Message("assistant", [ToolCall("t1", "lookup", '{"sku": "SKU-00001"}')])
    output = "SKU-00001: 45 units in /srv/stock/aisle-7.csv, counted 2026-03-01 by the night shift"
    result = Message("user", [ToolResult("t1", output)])
    question = Message("user", [TextPart("How many of SKU-00001?")])
    answer = Message("assistant", [TextPart("45."), TextPart("Anything else?")])
    before = Context((question, call, result, answer))

    def reason(*after: Message) -> str | None:
        return no_cycle_reason(Change.between(before, after, "prune"))

    def result_as(text: str) -> Message:
        return Message("user", [ToolResult("t1", text)])

    assert reason(question, call, result_as(CLEARED), answer) == ELISION  # a placeholder, longer or not
    assert reason(question, call, result_as("[cleared]"), answer) == ELISION
    assert reason(question, call, result, Message("assistant", [TextPart("45.")])) == ELISION  # a part cut
    assert reason(question, call, result) == ELISION  # a rewind
    plain = elision_marker("user", 2, 1, "", 1)
    assert reason(Message("user", [*question.parts, *plain.parts]), answer) == ELISION  # the marker closes a turn
    # a later pruning folds the earlier marker away and leaves its own: still an elision
    folded = Change.between(Context((Message("user", [*question.parts, *plain.parts]), answer)),
                            (Message("user", [*question.parts, *elision_marker("user", 4, 2, "", 2).parts]), answer),
                            "prune")
    assert elides_only(folded)

    assert reason(question, call, result_as("SKU-00001: 45 units"), answer) is None  # a literal of it
    assert reason(question, call, result_as("45 units in /srv/stock"), answer) is None  # 16 characters of it
    assert reason(question, call, result_as("recounted by the night shift"), answer) is None
    assert reason(question, call, result_as("x" * (PLACEHOLDER_MAX_CHARS + 1)), answer) is None  # a summary's length
    assert reason(question, call, Message("user", [ToolResult("t2", CLEARED)]), answer) is None  # another call
    assert reason(question, call, result, Message("assistant", [TextPart("45 (checked).")])) is None
    assert reason(question, call, result, Message("assistant", [])) is None  # an empty message is written
    assert reason(question, call, result, answer, Message("user", [TextPart("next")])) == "append"
    assert reason(question, call, result, answer) == "append"  # nothing changed
