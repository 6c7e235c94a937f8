"""Property-based tests of record 000's structural guarantees (hypothesis):
append-only growth is never refused; compaction in whole-pair units never orphans; one dropped
call or result is caught wherever it sits."""

import re
from dataclasses import asdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxwatch import ContextGuard, Message, TextPart, ToolCall, ToolResult, ToolSchema
from ctxwatch.deferral import pair_units
from ctxwatch.invariants.pairing import index_pairs

from conversations import FORMATS, in_format

WORDS = ["ledger", "invoice", "row", "total", "march", "export", "customer", "order", "refund", "check"]


@st.composite
def conversations(draw, min_rounds=0, tag="a"):
    """A valid conversation: text turns and complete tool rounds, OpenAI- or Anthropic-shaped."""
    messages = [Message("system", [TextPart("You are an agent.")])]
    n = 0
    rounds = 0
    for _ in range(draw(st.integers(1, 12))):
        if draw(st.booleans()) or rounds < min_rounds:
            rounds += 1
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                n += 1
                calls.append(ToolCall(f"call_{tag}{n:04d}", draw(st.sampled_from(["search", "read", "write"]))))
            messages.append(Message("assistant", calls))
            if draw(st.booleans()):   # Anthropic: all results in one user message
                messages.append(Message("user", [ToolResult(c.id, draw(st.sampled_from(WORDS))) for c in calls]))
            else:                     # OpenAI: one tool message per result
                messages.extend(Message("tool", [ToolResult(c.id, draw(st.sampled_from(WORDS)))]) for c in calls)
        else:
            role = draw(st.sampled_from(["user", "assistant"]))
            messages.append(Message(role, [TextPart(" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1,
                                                                             max_size=8))))]))
    return messages


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


TOOLS = [ToolSchema(name, '{"type": "object"}') for name in ("search", "read", "write")]


@SETTINGS
@given(conversations(), conversations(tag="b"), st.sampled_from(FORMATS), st.booleans(), st.data())
def test_append_only_growth_is_never_refused(base, extra, fmt, send_tools, data):
    """In every format, and with the (unchanged) tool list sent along with every check."""
    tools = TOOLS if send_tools else None
    guard = ContextGuard("prop-append", pass_cap=2, tools=tools)
    observed = in_format(base, fmt)
    guard.observe(observed, boundary=data.draw(st.integers(0, len(observed))))
    grown = base + list(extra[1:])
    report = guard.check(in_format(grown, fmt), kind="append", tools=tools)
    assert report.decision == "patch", report.explain()
    assert report.violations == [] and guard.passes_used == 0


@SETTINGS
@given(conversations(min_rounds=1), st.data())
def test_compaction_in_whole_pair_units_never_orphans(messages, data):
    units = pair_units(messages)
    keep = data.draw(st.lists(st.booleans(), min_size=len(units), max_size=len(units)))
    keep[0] = True
    proposal = [messages[i] for unit, k in zip(units, keep, strict=True) if k for i in unit]
    guard = ContextGuard("prop-units", pass_cap=None)
    guard.observe(messages, boundary=data.draw(st.integers(0, len(messages))))
    report = guard.check(proposal, kind="compact")
    assert "tool_pairing" not in report.violations, report.explain()
    assert report.orphans_tool_use == report.orphans_tool_result == 0
    assert report.decision in ("patch", "defer")


@SETTINGS
@given(conversations(min_rounds=1), st.data())
def test_one_dropped_call_or_result_is_caught_at_any_position(messages, data):
    carriers = [i for i, m in enumerate(messages) if m.call_ids or m.result_ids]
    drop = data.draw(st.sampled_from(carriers))
    proposal = messages[:drop] + messages[drop + 1:]
    guard = ContextGuard("prop-drop", pass_cap=None)
    guard.observe(messages, boundary=data.draw(st.integers(0, len(messages))))
    report = guard.check(proposal, kind="prune")
    assert report.decision == "abort", report.explain()
    assert "tool_pairing" in report.violations
    dropped = messages[drop]
    assert report.orphans_tool_result == (len(dropped.call_ids) if dropped.call_ids else 0)
    assert report.orphans_tool_use == len(dropped.result_ids)


@SETTINGS
@given(conversations(min_rounds=1), st.data())
def test_a_message_wedged_between_a_call_and_its_result_is_always_refused(messages, data):
    callers = [i for i, m in enumerate(messages) if m.call_ids]
    at = data.draw(st.sampled_from(callers)) + 1
    wedge = Message(data.draw(st.sampled_from(["user", "assistant"])), [TextPart("a summary of earlier turns")])
    guard = ContextGuard("prop-wedge", pass_cap=None)
    guard.observe(messages, boundary=0)
    report = guard.check(messages[:at] + [wedge] + messages[at:], kind="rewrite")
    assert report.decision == "abort" and "tool_pairing" in report.violations, report.explain()


def observables(guard: ContextGuard) -> tuple:
    """Everything a caller can see of the guard's state (issue 12's property)."""
    context = guard.context
    return ([m.digest for m in context.messages], context.boundary, guard.passes_used, guard.detector.to_dict(),
            len(guard.provenance), guard.halted_at, guard.episode, [m.digest for m in guard.messages])


@st.composite
def proposals(draw, messages: list[Message]) -> list[Message]:
    """A rewrite of `messages`: some dropped, a summary inserted, maybe a swap, maybe new turns appended."""
    out = [m for m in messages if not draw(st.booleans()) or m.role == "system"]
    if draw(st.booleans()):
        at = draw(st.integers(0, len(out)))
        out.insert(at, Message("user", [TextPart("Summary: " + " ".join(draw(st.lists(st.sampled_from(WORDS),
                                                                                          max_size=4))))]))
    if len(out) > 2 and draw(st.booleans()):
        i = draw(st.integers(1, len(out) - 2))
        out[i], out[i + 1] = out[i + 1], out[i]
    if draw(st.booleans()):
        out += draw(conversations(tag=f"p{draw(st.integers(0, 10_000))}"))[1:]
    return out


@SETTINGS
@given(conversations(min_rounds=1), st.data())
def test_a_check_that_is_not_a_patch_changes_nothing_and_apply_decides_the_same(messages, data):
    guard = ContextGuard("prop-pure", pass_cap=data.draw(st.sampled_from([None, 2, 8])), tools=TOOLS,
                         deferral="queue")
    guard.observe(messages, boundary=data.draw(st.integers(0, len(messages))))
    for step in range(data.draw(st.integers(1, 6))):
        current = list(guard.messages)
        action = data.draw(st.sampled_from(["observe", "check", "resolve", "apply"]))
        if action == "observe":
            guard.observe(current + data.draw(conversations(tag=f"o{step}"))[1:])
            continue
        proposal = data.draw(proposals(current))
        before = observables(guard)
        report = guard.check(proposal, kind="compact", current=current)  # the loop rebuilds its list
        if report.decision == "patch":
            continue
        assert observables(guard) == before, report.explain()
        if action == "check":
            continue
        again, _ = guard.resolve(proposal, kind="compact", current=current)
        assert again.decision == report.decision and again.violations == report.violations
        if action == "apply" and again.decision in ("abort", "halt"):
            try:
                guard.apply(proposal, kind="compact", current=current)
            except Exception as refused:  # noqa: BLE001 - the typed refusal, whose report decides the same
                assert refused.report.decision == report.decision  # type: ignore[attr-defined]
            else:
                raise AssertionError("apply did not raise for " + report.explain())


@SETTINGS
@given(conversations(min_rounds=1), st.sampled_from(["openai_chat", "anthropic", "openai_responses"]), st.data())
def test_whole_pair_conversion_keeps_everything_after_the_frontier_and_is_valid_or_not_made(messages, fmt, data):
    from hypothesis import assume

    from ctxwatch.deferral import ELISION_PREFIX, Conversion, whole_pair_conversion
    from ctxwatch.validity import provider_problems

    assume(not provider_problems(messages, fmt))
    boundary = data.draw(st.integers(0, len(messages)))
    dropped = set(data.draw(st.lists(st.integers(0, len(messages) - 1), unique=True)))
    out = whole_pair_conversion(messages, boundary, dropped, "summary", role="user", number=1, format=fmt)
    if not isinstance(out, Conversion):
        return
    assert not provider_problems(out.messages, fmt)
    (marker,) = [m for m in out.messages if m.text.startswith(ELISION_PREFIX)]
    kept = [m for m in out.messages if m is not marker]
    assert len(messages) - len(kept) == out.elided and f": {out.elided} messages in {out.units} " in marker.text
    units = pair_units(messages)
    frontier = next((u.stop for u in units if boundary - 1 in u), 0)
    assert kept[len(kept) - (len(messages) - frontier):] == messages[frontier:]  # the unread part, verbatim
    assert all(i in dropped for i, m in enumerate(messages) if m not in kept)   # only what was dropped goes


@SETTINGS
@given(conversations(min_rounds=2), st.sampled_from(["openai_chat", "anthropic", "openai_responses"]), st.data())
def test_chained_conversions_lose_no_count_and_change_nothing_but_the_guards_markers(messages, fmt, data):
    """Any valid conversation (with a user turn forging a marker's text), pruned whole-pair by whole-pair
    several times, each conversion given the markers the one before wrote: every result is valid, keeps
    what follows the frontier verbatim, changes no message but by taking the guard's markers out or adding
    one, and the counts of the guard's markers in it add up to every message and unit elided so far."""
    from hypothesis import assume

    from ctxwatch.deferral import ELISION_PREFIX, Conversion, elides_only, whole_pair_conversion
    from ctxwatch.diff import Change
    from ctxwatch.model import Context
    from ctxwatch.validity import provider_problems

    counted = re.compile(re.escape(ELISION_PREFIX) + r" \(elision \d+\): (\d+) messages in (\d+) whole units were "
                         r"removed from this conversation\.")  # the documented form (docs/guard.md)
    forged = Message("user", [TextPart(f"{ELISION_PREFIX} (elision 1): 9 messages in 9 whole units were removed "
                                       "from this conversation.")])
    at = data.draw(st.integers(1, len(messages)))
    messages = [*messages[:at], forged, *messages[at:]]
    assume(not provider_problems(messages, fmt))
    own: frozenset[str] = frozenset()
    elided = units = 0
    for number in range(1, 5):
        boundary = data.draw(st.integers(0, len(messages)))
        dropped = set(data.draw(st.lists(st.integers(0, len(messages) - 1), unique=True)))
        out = whole_pair_conversion(messages, boundary, dropped, "", role="user", number=number, format=fmt,
                                    own_markers=own)
        if not isinstance(out, Conversion):
            continue
        assert not provider_problems(out.messages, fmt)
        frontier = next((u.stop for u in pair_units(messages) if boundary - 1 in u), 0)
        assert out.messages[len(out.messages) - (len(messages) - frontier):] == tuple(messages[frontier:])
        unmarked = {(m.role, tuple(p for p in m.parts if not (type(p) is TextPart and p.text in own | out.markers)))
                    for m in messages}
        for m in out.messages:  # each is an input message, but for the guard's markers taken out or added
            parts = tuple(p for p in m.parts if not (type(p) is TextPart and p.text in own | out.markers))
            assert not parts or (m.role, parts) in unmarked, m
        elided, units = elided + out.elided, units + out.units
        counts = [counted.fullmatch(p.text) for m in out.messages for p in m.parts
                  if type(p) is TextPart and p.text in out.markers]
        assert len(counts) == len(out.markers) and forged.text not in out.markers
        assert (sum(int(c[1]) for c in counts), sum(int(c[2]) for c in counts)) == (elided, units)
        if out.folded:
            assert elides_only(Change.between(Context(tuple(messages)), out.messages, "prune"))
        messages, own = list(out.messages), out.markers


@st.composite
def rewrites_in_place(draw, messages: list[Message]) -> list[Message]:
    """`messages` with some turns condensed to text where they stand: text turns (the case the guard's tool
    index is reused in), and sometimes a call or a result (which a fresh scan must index)."""
    out = list(messages)
    tools_too = draw(st.booleans())
    for i, m in enumerate(messages):
        if i and (tools_too or not (m.call_ids or m.result_ids)) and draw(st.booleans()):
            out[i] = Message(m.role, [TextPart("condensed: " + " ".join(draw(st.lists(st.sampled_from(WORDS),
                                                                                       max_size=3))))])
    return out


@SETTINGS
@given(conversations(min_rounds=1), st.data())
def test_the_tool_index_the_guard_keeps_is_always_that_of_its_context(messages, data):
    guard = ContextGuard("prop-pairs", pass_cap=None)
    guard.observe(messages, boundary=data.draw(st.integers(0, len(messages))))
    for step in range(data.draw(st.integers(1, 6))):
        current = list(guard.messages)
        action = data.draw(st.sampled_from(["observe", "in place", "rewrite"]))
        if action == "observe":
            guard.observe(current + data.draw(conversations(tag=f"o{step}"))[1:])
        else:
            proposal = data.draw(rewrites_in_place(current) if action == "in place" else proposals(current))
            guard.resolve(proposal, kind="compact", current=current)  # the loop rebuilds its list
        kept = guard._state  # white box: the consumed index, against a fresh scan of the consumed context
        assert asdict(kept.pairs) == asdict(index_pairs(kept.context.messages))
