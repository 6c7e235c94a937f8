"""The contraction detector lives for the loop, not the episode (review finding F16).

docs/guard.md's loops call `guard.session_boundary()` once per task. A session boundary starts a new
episode (the pass count, the policy re-pin) but is no fix of the rewrite policy: the detector, its
cycle count (`ctxwatch.contraction.cycle`) and a halt go on. Only `guard.new_episode()`, what the halt
tells the user to call once the policy is fixed, clears the halt and starts the detector afresh (a new
`ctxwatch.contraction.run`). Real guards, the demo's scratchpad loop, the real OTel SDK.
"""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxwatch import semconv
from ctxwatch.demo.fleet import ScratchpadLoop
from ctxwatch.telemetry import MutationTelemetry

SEEDS = range(4000, 4010)


def recorded() -> tuple[InMemorySpanExporter, MutationTelemetry]:
    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter, MutationTelemetry(provider, environ={})


def run_with_boundaries(loop: ScratchpadLoop) -> None:
    """The demo loop, one task per cycle: a session boundary after each, as docs/guard.md's loop does."""
    while not loop.done:
        loop.step()
        if not loop.done:
            loop.guard.session_boundary(current=loop.buffer)
            loop.buffer = list(loop.guard.messages)


def test_the_scratchpad_loop_halts_with_a_session_boundary_per_task() -> None:
    _, telemetry = recorded()
    halted = []
    for i, seed in enumerate(SEEDS):
        loop = ScratchpadLoop("scratchpad-writer", i, seed, telemetry)
        run_with_boundaries(loop)
        assert loop.guard.episode >= 3, "every task was an episode of its own"
        halted.append(loop.tally.halted_at is not None)
    assert all(halted), f"halted {sum(halted)} of {len(halted)}"


def test_cycles_count_on_across_episodes_and_the_halt_outlives_a_session_boundary() -> None:
    exporter, telemetry = recorded()
    loop = ScratchpadLoop("scratchpad-writer", 0, SEEDS[0], telemetry)
    run_with_boundaries(loop)
    guard = loop.guard
    assert guard.halted_at is not None
    spans = [s.attributes for s in exporter.get_finished_spans()]
    fed = [a for a in spans if semconv.feeds_detector(a[semconv.MUTATION_KIND], a[semconv.DECISION],
                                                      a.get(semconv.HASH_DISTANCE))]
    assert [a[semconv.CONTRACTION_CYCLE] for a in fed] == list(range(1, len(fed) + 1))
    assert len({a.get(semconv.EPISODE, 0) for a in fed}) == len(fed), "one cycle per episode"
    assert {a[semconv.CONTRACTION_RUN] for a in spans} == {0}
    assert fed[-1][semconv.DECISION] == "halt" and fed[-1][semconv.CONTRACTION_CYCLE] == guard.halted_at

    guard.session_boundary(current=loop.buffer)  # a new task is no fix: the next cycle is refused still
    loop.buffer = list(guard.messages)
    loop.tally.halted_at = None
    loop.step()
    assert loop.tally.decisions["halt"] >= 2 and guard.halted_at is not None


def test_new_episode_after_a_fix_clears_the_halt_and_starts_a_new_detector_run() -> None:
    exporter, telemetry = recorded()
    loop = ScratchpadLoop("scratchpad-writer", 0, SEEDS[0], telemetry)
    run_with_boundaries(loop)
    guard = loop.guard
    guard.new_episode()
    assert guard.halted_at is None and guard.detector.cycle == 0 and guard.detector.state == "healthy"
    loop.absorbed_at = 10**6  # the rewrite policy fixed: literal-preserving summaries again
    exporter.clear()
    loop.tally.halted_at = None
    loop.step()
    last = exporter.get_finished_spans()[-1].attributes
    assert last[semconv.DECISION] == "patch"
    assert last[semconv.CONTRACTION_RUN] == 1 and last[semconv.CONTRACTION_CYCLE] == 1


def converging(deferral: str) -> list[tuple[int, str, str]]:
    """Record 003's summary-of-summary chain converging on its own instruction: each cycle the model answers,
    then the rewrite keeps the instruction and half of the open items it was given (96 -> 48 -> 24 ...), the
    model's latest answer appended but not yet read. (cycle, decision, contraction state) per rewrite."""
    from ctxwatch import ContextGuard

    items = [f"INC-{n:04d}" for n in range(1000, 1064)] + [f"/srv/app/mod{i}.py" for i in range(32)]
    system = {"role": "system", "content": "You are a maintenance agent."}
    guard = ContextGuard(f"converging-{deferral}", deferral=deferral)
    messages: list[dict] = [system, {"role": "user", "content": "Open items: " + ", ".join(items)}]
    seen = []
    for cycle in range(1, 8):
        guard.observe(messages)
        messages += [{"role": "assistant", "content": f"Working on {items[0]}."}, {"role": "user", "content": "next"}]
        guard.observe(messages)
        messages.append({"role": "assistant", "content": f"Done with step {cycle}."})
        items = items[:max(1, len(items) // 2)]
        report, context = guard.resolve([system, {"role": "user", "content": "Note to self: keep only what "
                                                  "matters, drop the rest. Open items: " + ", ".join(items)}],
                                        kind="compact")
        seen.append((cycle, report.decision, report.contraction_state))
        if report.decision == "halt":
            break
        messages = list(context)
    return seen


def test_a_converging_loop_halts_when_its_rewrites_are_applied_as_session_boundaries() -> None:
    """Review F1 (session 8): under ``deferral="session_boundary"`` the settled rewrite's halt was dropped and the
    rewrite queued instead, reported healthy, so the loop never halted; it halts at the cycle ``auto`` halts at."""
    auto, boundary = converging("auto"), converging("session_boundary")
    assert auto[-1][1:] == ("halt", "contracting")
    assert boundary == auto
    assert all(decision == "patch" for _, decision, _ in boundary[:-1])
