"""`ctxwatch.sequence` and `ctxwatch.contraction.cycle` on the guard's spans (issue 15, item 1).

Real guards (the demo fleet's loops, one halted for contraction and given a new episode) record their
spans through the OpenTelemetry SDK: every span of a loop carries its place in the loop's episode
(1, 2, ... appends, refusals and halts included; a new episode starts again at 1) and the guard's own
detector cycle count after it. Under a sampler that drops spans, the kept spans show the gaps: the
numbering counts every report, sampled or not.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from ctxwatch import semconv
from ctxwatch.demo.fleet import DemoLoop, ScratchpadLoop, SummarizerLoop
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch.telemetry.sequence import Generation, LoopSequences, RecordedFiles, recorded_instance


def _run(loop: DemoLoop) -> None:
    while not loop.done:
        loop.step()


def test_every_span_is_numbered_per_loop_and_episode_with_the_guards_cycle() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry = MutationTelemetry(provider)
    healthy, contracting = SummarizerLoop("a", 0, 1, telemetry), ScratchpadLoop("b", 0, 2, telemetry)
    for loop in (healthy, contracting):
        while not loop.done:
            loop.step()
            # after each step the latest span of the loop carries the guard's detector cycle count
            last = [s for s in exporter.get_finished_spans() if s.attributes[semconv.LOOP_ID] == loop.loop_id][-1]
            assert last.attributes[semconv.CONTRACTION_CYCLE] == loop.guard.detector.cycle
    assert contracting.guard.halted_at is not None
    contracting.guard.new_episode()
    contracting.tally.halted_at, contracting.tally.cycles = None, 0
    _run(contracting)

    by_episode: dict[tuple[str, int], list[int]] = defaultdict(list)
    for span in exporter.get_finished_spans():
        attrs = span.attributes
        by_episode[(attrs[semconv.LOOP_ID], attrs.get(semconv.EPISODE, 0))].append(attrs[semconv.SEQUENCE])
    assert set(by_episode) == {(healthy.loop_id, 0), (contracting.loop_id, 0), (contracting.loop_id, 1)}
    for sequences in by_episode.values():
        assert sequences == list(range(1, len(sequences) + 1))
    kinds = {s.attributes[semconv.MUTATION_KIND] for s in exporter.get_finished_spans()}
    assert "append" in kinds and len(kinds) > 1  # appends are numbered too


def test_numbering_counts_the_spans_a_sampler_drops() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=TraceIdRatioBased(0.5))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    loop = SummarizerLoop("sampled", 0, 3, MutationTelemetry(provider))
    _run(loop)
    sequences = [s.attributes[semconv.SEQUENCE] for s in exporter.get_finished_spans()]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    assert max(sequences) > len(sequences)  # gaps where spans were sampled out


def test_sequences_are_bounded_and_restart_with_a_new_episode() -> None:
    sequences = LoopSequences(capacity=2)
    first = sequences.next("a", 0, "compact", "patch", 0.4)
    assert first[:2] == (1, 1) and uuid.UUID(first.instance).version == 4
    assert sequences.next("a", 0, "append", "patch", None) == (2, 1, first.instance, 0)
    assert sequences.next("a", 0, "compact", "defer", None) == (3, 1, first.instance, 0)  # refused: no detector cycle
    # a new episode numbers from 1 again; its detector cycles go on (a session boundary keeps the detector) ...
    assert sequences.next("a", 1, "compact", "patch", 0.3) == (1, 2, first.instance, 0)
    # ... until a new detector run (new_episode() after a fix)
    assert sequences.next("a", 2, "compact", "patch", 0.3, run=1) == (1, 1, first.instance, 1)
    sequences.next("b", 0, "append", "patch", None)
    sequences.next("c", 0, "append", "patch", None)                      # past the capacity: "a" is forgotten
    again = sequences.next("a", 1, "append", "patch", None)
    assert again[:2] == (1, 0) and again.instance != first.instance  # a new numbering: a new instance


def test_each_process_numbers_a_loop_as_its_own_instance_and_a_backfill_as_the_sessions() -> None:
    """Record 003's alarm after a restart (review D2): a second process (a fresh telemetry object) with the
    same loop id numbers from 1 again under another instance id, so a consumer tells it from a duplicate;
    a backfill renumbered twice (a second replay, a resumed watcher) is the same instance both times."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for _process in range(2):
        _run(SummarizerLoop("restarted", 0, 4, MutationTelemetry(provider)))
    runs: dict[str, list[int]] = defaultdict(list)
    for span in exporter.get_finished_spans():
        runs[span.attributes[semconv.GUARD_INSTANCE]].append(span.attributes[semconv.SEQUENCE])
    assert len(runs) == 2 and all(s == list(range(1, len(s) + 1)) for s in runs.values())

    backfill = LoopSequences()
    backfill.renumber("claude-code-s1", recorded_instance("claude-code-s1"))
    first = backfill.next("claude-code-s1", 0, "append", "patch", None)
    backfill.renumber("claude-code-s1", recorded_instance("claude-code-s1"))
    assert backfill.next("claude-code-s1", 0, "append", "patch", None) == first
    assert uuid.UUID(first.instance).version == 5 and first.instance != recorded_instance("claude-code-s2")


def test_a_session_continued_in_another_file_is_its_next_generation_and_a_file_read_again_is_not() -> None:
    """Review F1: a rotated session file's continuation is numbered afresh under an instance of its own; the same
    file read again (or re-created, or a document whose first record tells nothing) keeps the numbering."""
    files = RecordedFiles()
    assert [files.generation("s", opening) for opening in ("a", "a", "b", "b", "", "c")] == [0, 0, 1, 1, 1, 2]
    assert files.generation("other", "b") == 0  # per loop
    assert Generation().of("") == Generation() and Generation(1, "b").of("b") == Generation(1, "b")
    assert recorded_instance("s", 0) == recorded_instance("s")
    assert len({recorded_instance("s", n) for n in range(3)}) == 3
    assert all(uuid.UUID(recorded_instance("s", n)).version == 5 for n in range(3))
