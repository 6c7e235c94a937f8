"""Issue 13: the guard in long-running agents, with its defaults.

300-turn OpenAI Chat and Anthropic loops compact every 5 turns with a naive 60% summarizer at the
awkward point (after appending the newest call and its result, before observing them): no
exception, nothing after the generation boundary lost or moved, every returned context valid for
its provider, and the context bounded. A runaway (compaction after compaction, no new turn) is
stopped at the pass cap. Shadow mode passes the caller's contexts through object for object while
its spans say what the guard would have done."""

from __future__ import annotations

import json
import re

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from provider_rules import anthropic_problems

from ctxwatch import (
    ContextGuard,
    Message,
    PassCapReachedError,
    PolicyMutationError,
    TextPart,
    ToolCall,
    ToolResult,
    semconv,
)
from ctxwatch.adapters import to_messages
from ctxwatch.deferral import ELISION_PREFIX
from ctxwatch.errors import ContractionRegimeError
from ctxwatch.simulate.loops import converging_loop
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.validity import provider_problems

TURNS, EVERY = 300, 5
MAX_MESSAGES = 40  # the bound: the loop adds ~12 messages between compactions, each keeps ~40% + a marker
SYSTEM = "You are an inventory agent. Look items up before answering."


# --- the two agent loops, as a user writes them from the README -------------------------------------
def openai_model_turn(turn: int) -> list[dict]:
    """What the model and the tool add in one turn: a call and its result (every 4th turn: an answer
    and the user's next question instead)."""
    if turn % 4 == 3:
        return [{"role": "assistant", "content": f"Item {turn} is in aisle {turn % 17}."},
                {"role": "user", "content": f"Now check SKU-{turn + 1:05d}."}]
    return [{"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{turn:04d}", "type": "function",
                "function": {"name": "lookup", "arguments": json.dumps({"sku": f"SKU-{turn:05d}"})}}]},
            {"role": "tool", "tool_call_id": f"call_{turn:04d}", "content": f"SKU-{turn:05d}: {turn * 7} units"}]


def anthropic_model_turn(turn: int) -> list[dict]:
    if turn % 4 == 3:
        return [{"role": "assistant", "content": [{"type": "text", "text": f"Item {turn} is in aisle {turn % 17}."}]},
                {"role": "user", "content": f"Now check SKU-{turn + 1:05d}."}]
    return [{"role": "assistant", "content": [
                {"type": "text", "text": "Looking it up."},
                {"type": "tool_use", "id": f"toolu_{turn:04d}", "name": "lookup",
                 "input": {"sku": f"SKU-{turn:05d}"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{turn:04d}", "content": f"SKU-{turn:05d}: {turn * 7}"}]}]


def naive_summarizer(messages: list[dict], keep_first: int, fmt: str) -> list[dict]:
    """Replace the oldest 60% of the conversation (after `keep_first` messages) by one summary, cutting
    where no tool pair is split and where the summary's user turn may stand. The summary is really naive:
    it names nothing it folds (every SKU of the folded turns is gone), as issue 13's loops do."""
    body = messages[keep_first:]
    cut = int(len(body) * 0.6)
    while cut < len(body) and not starts_a_turn(body[cut], fmt):
        cut += 1
    summary = {"role": "user", "content": f"Summary of {cut} earlier messages: the agent looked up stock levels."}
    if fmt == "openai_responses":
        summary["type"] = "message"
    return messages[:keep_first] + [summary] + body[cut:]


def starts_a_turn(message: dict, fmt: str) -> bool:
    if fmt == "openai_responses":
        return message["type"] != "function_call_output"
    return message["role"] == "assistant" if fmt == "anthropic" else message["role"] != "tool"


def responses_model_turn(turn: int) -> list[dict]:
    if turn % 4 == 3:
        return [{"type": "message", "role": "assistant", "content": [
                    {"type": "output_text", "text": f"Item {turn} is in aisle {turn % 17}."}]},
                {"type": "message", "role": "user", "content": f"Now check SKU-{turn + 1:05d}."}]
    return [{"type": "function_call", "call_id": f"fc_{turn:04d}", "name": "lookup",
             "arguments": json.dumps({"sku": f"SKU-{turn:05d}"})},
            {"type": "function_call_output", "call_id": f"fc_{turn:04d}", "output": f"SKU-{turn:05d}: {turn * 7}"}]


LOOPS = {
    "openai_chat": (openai_model_turn, [{"role": "system", "content": SYSTEM},
                                        {"role": "user", "content": "Check SKU-00000."}], 1),
    "anthropic": (anthropic_model_turn, [{"role": "user", "content": "Check SKU-00000."}], 0),
    "openai_responses": (responses_model_turn, [{"type": "message", "role": "developer", "content": SYSTEM},
                                                {"type": "message", "role": "user", "content": "Check SKU-00000."}], 1),
}


def marker_count(message: dict) -> int | None:
    text = json.dumps(message.get("content", ""))
    if ELISION_PREFIX not in text:
        return None
    return int(re.search(r"\): (\d+) messages in \d+ whole units", text).group(1))


def run_loop(fmt: str, guard: ContextGuard, turns: int = TURNS, summarizer=None) -> list[tuple[list, list]]:
    """The agent loop; returns (proposal, returned) of every compaction."""
    summarizer = summarizer or naive_summarizer
    model_turn, start, keep_first = LOOPS[fmt]
    messages = list(start)
    compactions = []
    for turn in range(turns):
        guard.observe(messages)                # before the model call: what it consumes
        messages = messages + model_turn(turn)  # the model's turn and the tool's result
        if turn % EVERY == EVERY - 1:          # the awkward point: after appending, before observing
            proposal = summarizer(messages, keep_first, fmt)
            before = messages
            messages = guard.apply(proposal, kind="compact")
            compactions.append((before, proposal, messages))
    return compactions


def digests(messages: list[dict], fmt: str) -> list[int]:
    return [m.digest for m in to_messages(messages, fmt)]


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic", "openai_responses"])
def test_a_300_turn_loop_compacting_at_the_awkward_point_loses_nothing_and_stays_bounded(fmt):
    guard = ContextGuard(f"long-{fmt}", format=fmt)
    compactions = run_loop(fmt, guard)
    assert len(compactions) == TURNS // EVERY
    for before, _, after in compactions:
        unread = before[-2:]  # the newest call and result (or answer and question): not yet observed
        assert after[-2:] == unread and all(a is b for a, b in zip(after[-2:], unread, strict=True))
        assert digests(after[-2:], fmt) == digests(unread, fmt)
        assert provider_problems(to_messages(after, fmt), fmt) == []
        assert len(after) <= MAX_MESSAGES
        elided = [marker_count(m) for m in after if marker_count(m) is not None]
        assert elided, "each compaction is applied as whole-pair compaction with a marker"
        # the marker's count is exact: what is gone from `before` is what it says (plus older markers)
        newest = elided[0] if fmt == "anthropic" else elided[-1]
        kept = {d for d in digests(after, fmt)}
        gone = [d for d in digests(before, fmt) if d not in kept]
        assert len(gone) == newest
    assert guard.passes_used == TURNS // EVERY and guard.halted_at is None


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic", "openai_responses"])
def test_the_unconsumed_tail_is_kept_verbatim_by_every_mode_that_changes_the_proposal(fmt):
    """Ids and digests of everything after the generation boundary, before and after, for each format."""
    model_turn, start, keep_first = LOOPS[fmt]
    for deferral in ("auto", "whole_pairs", "queue", "session_boundary"):
        guard = ContextGuard(f"tail-{fmt}-{deferral}", format=fmt, deferral=deferral)
        messages = list(start)
        for turn in range(9):
            guard.observe(messages)
            messages = messages + model_turn(turn)
        tail = messages[-2:]
        report, out = guard.resolve(naive_summarizer(messages, keep_first, fmt), kind="compact")
        assert out[-2:] == tail and digests(out[-2:], fmt) == digests(tail, fmt), deferral
        assert [id(m) for m in out[-2:]] == [id(m) for m in tail], deferral
        assert provider_problems(to_messages(out, fmt), fmt) == [], deferral
        assert report.decision in ("patch", "defer"), report.explain()


def runaway_summarizer(messages: list[dict], keep_first: int, pass_number: int) -> list[dict]:
    """A middleware whose trigger stays true: it summarizes its own summary again on every call (keeping
    the identifiers, so that the pass cap, not the contraction alarm, is what stops it)."""
    body = messages[keep_first:]
    cut = max(1, int(len(body) * 0.6))
    while cut < len(body) and body[cut]["role"] == "tool":
        cut += 1
    items = sorted(set(re.findall(r"SKU-\d{5}", json.dumps(body[:cut]))))
    summary = {"role": "user", "content": f"Summary (pass {pass_number}) of {cut} messages: {', '.join(items)}."}
    return messages[:keep_first] + [summary] + body[cut:]


def test_a_runaway_that_compacts_again_and_again_is_stopped_at_the_pass_cap():
    guard = ContextGuard("runaway", format="openai_chat", budget=50)
    model_turn, start, keep_first = LOOPS["openai_chat"]
    messages = list(start)
    for turn in range(60):
        messages = messages + model_turn(turn)
    guard.observe(messages)
    applied = 0
    with pytest.raises(PassCapReachedError) as stopped:
        for pass_number in range(50):  # no new turn in between: record 001's runaway
            messages = guard.apply(runaway_summarizer(messages, keep_first, pass_number), kind="compact")
            applied += 1
    assert applied == guard.pass_cap == 8
    error = stopped.value
    assert isinstance(error, PolicyMutationError) and error.report.violations == ["pass_cap"]
    assert error.residual_pressure == error.report.size_before - 50 > 0
    assert "residual pressure" in str(error) and "no new turn" in str(error) and "session_boundary" in str(error)
    # once the agent adds a turn, it may compact again
    guard.observe(messages + model_turn(61))
    report, _ = guard.resolve(runaway_summarizer(guard.messages, keep_first, 99), kind="compact")
    assert report.decision == "patch" and report.resolution == "whole_pairs"


def numbered_summarizer():
    """The naive summarizer, its summary numbered (still naming nothing it folds). In shadow mode the
    caller's context stays in place, and an Anthropic summary identical to the one before it at the head
    reads as that message kept and the turns after it pruned, which whole-pair conversion cannot mark
    validly there (the guard would defer: a limit of the conversion, not of shadow mode)."""
    count = iter(range(1, 10**6))

    def summarize(messages: list[dict], keep_first: int, fmt: str) -> list[dict]:
        out = naive_summarizer(messages, keep_first, fmt)
        out[keep_first] = {**out[keep_first], "content": f"{out[keep_first]['content']} (compaction {next(count)})"}
        return out

    return summarize


def first_result_dropped(messages: list[dict]) -> list[dict]:
    """The context without its first tool result (OpenAI tool message, or Anthropic user turn of results)."""
    at = next(i for i, m in enumerate(messages) if m["role"] == "tool" or "tool_result" in json.dumps(m))
    return messages[:at] + messages[at + 1:]


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic"])
def test_shadow_mode_passes_the_callers_contexts_through_and_reports_what_it_would_have_done(fmt):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = ContextGuard(f"shadow-{fmt}", format=fmt, shadow=True, telemetry=MutationTelemetry(provider, environ={}))
    compactions = run_loop(fmt, guard, turns=60, summarizer=numbered_summarizer())
    for _, proposal, returned in compactions:
        assert returned == proposal and all(a is b for a, b in zip(returned, proposal, strict=True))
    spans = [s for s in exporter.get_finished_spans() if s.attributes[semconv.MUTATION_KIND] == "compact"]
    assert len(spans) == len(compactions)
    for span in spans:
        assert span.attributes[semconv.SHADOW] is True
        assert span.attributes[semconv.DECISION] == "patch"
        assert span.attributes[semconv.DEFERRAL_RESOLUTION] == "whole_pairs"  # what it would have done
    # the guard's detector is fed the cycles its spans describe (the monitor feeds its own from them)
    fed = [s for s in spans if semconv.HASH_DISTANCE in s.attributes and s.attributes[semconv.DECISION] in
           ("patch", "halt")]
    assert guard.detector.cycle == len(fed) > 0
    # a would-be refusal is reported, never raised, and the caller's context is used
    orphaning = first_result_dropped(guard.messages)
    report, context = guard.resolve(orphaning, kind="compact")
    assert report.shadow and report.decision == "abort" and context == orphaning
    assert guard.apply(orphaning, kind="compact") == orphaning
    assert "would abort" in report.explain()


def test_shadow_can_be_asked_for_on_one_call():
    guard = ContextGuard("shadow-call", format="openai_chat")
    messages = LOOPS["openai_chat"][1] + openai_model_turn(0)
    guard.observe(messages)
    orphaning = messages[:-1] + [{"role": "user", "content": "next"}]
    assert guard.apply(orphaning, kind="prune", shadow=True) == orphaning
    with pytest.raises(PolicyMutationError.__mro__[1]):
        guard.apply(guard.messages[:2] + [{"role": "tool", "tool_call_id": "call_0000", "content": "x"}],
                    kind="prune")


def test_a_compaction_declared_a_session_boundary_is_applied_whole_and_starts_an_episode():
    guard = ContextGuard("session-mode", format="openai_chat")
    model_turn, start, keep_first = LOOPS["openai_chat"]
    messages = list(start)
    for turn in range(8):
        guard.observe(messages)
        messages = messages + model_turn(turn)
    proposal = naive_summarizer(messages, keep_first, "openai_chat")
    report, out = guard.resolve(proposal, kind="compact", deferral="session_boundary")
    assert report.decision == "patch" and report.resolution == "session_boundary"
    assert out == proposal and guard.episode == 1 and guard.context.boundary == 0
    # pairs are still checked in this mode
    broken = [m for m in out if m["role"] != "tool"]
    assert guard.resolve(broken, kind="compact", deferral="session_boundary")[0].decision == "abort"


@pytest.mark.parametrize("fmt", ["openai_chat", "anthropic"])
def test_what_the_guard_measures_does_not_depend_on_where_observe_is_called(fmt):
    """Observing just before compacting or not (the awkward point): the same decisions and figures."""
    model_turn, start, keep_first = LOOPS[fmt]
    figures = {}
    for placement in ("observe first", "awkward point"):
        guard = ContextGuard(f"placement-{fmt}", format=fmt)
        messages, seen = list(start), []
        for turn in range(40):
            guard.observe(messages)
            messages = messages + model_turn(turn)
            if turn % EVERY == EVERY - 1:
                if placement == "observe first":
                    guard.observe(messages)
                report, messages = guard.resolve(naive_summarizer(messages, keep_first, fmt), kind="compact")
                seen.append((report.decision, report.hash_distance, report.literals_lost, report.literals_before,
                             len(messages)))
        figures[placement] = seen
    assert figures["observe first"] == figures["awkward point"]


@pytest.mark.parametrize("fmt, problem, messages", [
    ("openai_chat", "does not answer", [{"role": "user", "content": "hi"},
                                        {"role": "tool", "tool_call_id": "c1", "content": "x"}]),
    ("openai_chat", "not answered", [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "next"}]),
    ("anthropic", "first message", [{"role": "assistant", "content": "hi"}]),
    ("anthropic", "must open this turn", [  # the API combines consecutive user messages into one turn
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]),
    ("anthropic", "must open this turn", [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "first"},
                                     {"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]),
    ("openai_responses", "not made before", [{"type": "function_call_output", "call_id": "c9", "output": "x"}]),
])
def test_provider_rules_name_the_message_that_breaks_them(fmt, problem, messages):
    problems = provider_problems(to_messages(messages, fmt), fmt)
    assert problems and problem in problems[0] and problems[0].startswith("message ")


def test_consecutive_messages_of_one_role_are_one_anthropic_turn():
    """The Messages API combines consecutive user (or assistant) messages into one turn: a tool_result
    message and the user's text after it are a valid request."""
    messages = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "Looking."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
        {"role": "user", "content": "Also, answer in one line."},
        {"role": "assistant", "content": "x"}]
    assert provider_problems(to_messages(messages, "anthropic"), "anthropic") == []


def test_an_anthropic_compaction_is_applied_where_a_user_text_follows_a_tool_result():
    """Review F4 (session 7): a user's text turn right after a tool_result turn (which the API combines)
    made every place for the elision marker look invalid, so docs/guard.md's compaction waited in the
    queue and the context grew until a session boundary."""
    guard = ContextGuard("merged-user-turns", agent="t", format="anthropic")
    messages: list[dict] = []
    for t in range(8):
        messages += [
            {"role": "user", "content": f"How many units of SKU-{t:05d}?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{t}", "name": "lookup",
                                               "input": {"sku": f"SKU-{t:05d}"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{t}", "content": f"{t * 7}"}]},
            {"role": "user", "content": "Also, answer in one line."},
            {"role": "assistant", "content": [{"type": "text", "text": f"SKU-{t:05d}: {t * 7}"}]}]
    guard.observe(messages)
    cut = 25  # an assistant turn: the summary (a user turn) goes before it
    results = [b["content"] for m in messages[:cut] if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"]
    report, out = guard.resolve([{"role": "user", "content": "Earlier: " + "; ".join(results)}] + messages[cut:],
                                kind="compact")
    assert report.decision == "patch", report.explain()
    assert len(out) < len(messages)
    assert anthropic_problems(list(out)) == []


def test_a_message_repeated_in_the_context_and_dropped_once_is_removed_once():
    """Two identical answers ("Done.") in two tasks; a rewrite drops the first: one removal, not two
    (the fingerprint and the literal counts follow the removals, so a miscount broke later checks)."""
    from ctxwatch.diff import Change
    from ctxwatch.model import Context, Message

    done, other = Message("assistant", "Done."), Message("user", "next task")
    before = Context((Message("system", "s"), done, other, done, Message("user", "last")), 5)
    change = Change.between(before, (before.messages[0], other, done, Message("user", "summary"), before.messages[4]),
                            "compact")
    assert len(change.before.messages) - len(change.removed) + len(change.added) == len(change.after)
    assert [i for i, _ in change.removed] == [1] and [i for i, _ in change.added] == [3]


def test_a_halted_loop_stays_halted_when_its_detector_recovers() -> None:
    """A halt lasts until new_episode(): a later summary that keeps every literal (the detector leaves the
    regime on it) is still refused with decision halt, and the loop keeps the cycle it was halted at."""
    guard = ContextGuard("halted-recovers")
    try:
        for cycle in converging_loop(0).cycles:
            guard.observe(list(cycle.pre), boundary=1)
            guard.apply(list(cycle.post), kind="compact")
    except ContractionRegimeError:
        pass
    halted_at = guard.halted_at
    assert halted_at is not None
    messages = list(guard.messages)
    decisions, states = [], []
    for n in range(12):
        for k in range(6):
            sku, call = f"SKU-{n:03d}{k:02d}", f"x{n}_{k}"
            messages += [Message("assistant", [ToolCall(call, "lookup", json.dumps({"sku": sku}))]),
                         Message("tool", [ToolResult(call, "ok")]), Message("assistant", [TextPart(f"Checked {sku}.")])]
        guard.observe(messages, boundary=1)
        kept = ", ".join(sorted(guard._state.literal_counts))
        report, _ = guard.resolve([messages[0], Message("user", [TextPart(f"Summary {n}: checked {kept}")])],
                                  kind="compact", current=messages)
        decisions.append(report.decision)
        states.append(report.contraction_state)
    assert "healthy" in states  # the detector left the regime on summaries that keep every literal
    assert set(decisions) == {"halt"} and guard.halted_at == halted_at
