"""The simulated loops and rewrite functions (ctxwatch.simulate): determinism, and record 003's three
signals — instruction absorption, sentinel drift, ordering inversion — each reproduced on a loop."""

from __future__ import annotations

from ctxwatch.deferral import elides_only
from ctxwatch.diff import Change
from ctxwatch.idempotence import check_idempotence, order_changes
from ctxwatch.literals import LiteralRegistry
from ctxwatch.model import Context
from ctxwatch.simulate.loops import (
    HEAD,
    PRUNE_DIRECTIVE,
    SimulatedAgent,
    absorption_loop,
    batch_pruning_loop,
    converging_loop,
    paraphrasing_loop,
    pruning_absorption_loop,
    reranking_loop,
    summarizing_loop,
    task_keeping_replacing_loop,
)
from ctxwatch.simulate.rewriters import (
    FoldingSummarizer,
    InstructionAbsorbingRewriter,
    ParaphrasingRewriter,
    SalienceReranker,
)
from ctxwatch.simulate.text import TextGen

REGISTRY = LiteralRegistry()


def _digests(loop):
    return [[m.digest for m in c.post] for c in loop.cycles]


def test_loops_are_reproducible_from_their_seed():
    assert _digests(absorption_loop(4)) == _digests(absorption_loop(4))
    assert _digests(absorption_loop(4)) != _digests(absorption_loop(5))
    assert TextGen(1).paragraph(3) == TextGen(1).paragraph(3)


def test_generated_literals_are_literals_to_the_registry():
    gen = TextGen(2)
    for _ in range(200):
        lit = gen.literal()
        assert REGISTRY.extract(f"we saw {lit} here") == {lit}


def test_record_003_instruction_absorption_compounds_towards_the_directive():
    """Signal 1: notes accumulate, every later rewrite cuts more, the buffer converges on the directive."""
    loop = absorption_loop(1, cycles=12, absorbed_at=4, ratio=0.6)
    assert loop.onset == 5 and [c.phase for c in loop.cycles][3:5] == ["healthy", "contracting"]
    rewriter = InstructionAbsorbingRewriter()
    notes = [rewriter.absorbed(c.post) for c in loop.cycles]
    assert notes[:3] == [0, 0, 0] and notes[3:] == list(range(1, 10))
    sizes = [sum(m.size for m in c.post) for c in loop.cycles]
    assert sizes[6] < sizes[4] < sizes[3]
    lost = [len(REGISTRY.of_all(c.pre) - REGISTRY.of_all(c.post)) for c in loop.cycles]
    assert lost[:3] == [0, 0, 0] and all(n > 0 for n in lost[4:])


def test_record_003_sentinel_drift_literal_diff_names_the_paraphrased_literals():
    """Signal 2: IDs and paths become prose; the literal-set diff names exactly those literals."""
    loop = paraphrasing_loop(3, cycles=1, rate=0.5)
    cycle = loop.cycles[0]
    lost = REGISTRY.of_all(cycle.pre) - REGISTRY.of_all(cycle.post)
    replay = ParaphrasingRewriter(0.5, seed=3)
    replay(cycle.pre)
    assert lost and lost == set(replay.last_paraphrased)
    text = " ".join(m.text for m in cycle.post)
    assert all(prose in text for prose in replay.last_paraphrased.values())


def test_record_003_ordering_inversion_changes_the_order_of_surviving_messages():
    """Signal 3: every re-ranking moves surviving messages, and the idempotence test says so."""
    loop = reranking_loop(2, cycles=4)
    for c in loop.cycles:
        moved, surviving = order_changes(c.pre, c.post)
        assert moved > 0 and surviving == len(c.pre)
    result = check_idempotence(SalienceReranker(), list(loop.cycles[0].pre))
    assert not result.stable and result.drift.order_changes > 0


def test_literal_preserving_summarization_loses_no_literal():
    loop = summarizing_loop(6, cycles=10)
    for c in loop.cycles:
        assert REGISTRY.of_all(c.pre) <= REGISTRY.of_all(c.post)
    assert any(len(c.post) < len(c.pre) for c in loop.cycles)  # it did summarize


def test_the_folding_summarizer_folds_the_oldest_share_without_its_literals_and_keeps_the_rest():
    buffer = SimulatedAgent(7).opening(10)
    rest = [m for m in buffer if m.role != "system"]
    folded = FoldingSummarizer(0.6, 0.3)(buffer)
    cut = round(len(rest) * 0.6)
    assert folded[0] == buffer[0] and folded[2:] == rest[cut:]  # the newest 40% verbatim
    assert REGISTRY.of(folded[1]) == frozenset() and REGISTRY.of_all(rest[:cut]) - REGISTRY.of_all(rest[cut:])


def test_the_converging_summarizer_keeps_its_summary_and_takes_in_ever_less_of_the_new_turns():
    loop = converging_loop(3, onset=3)
    summaries = [c.post[-1].text for c in loop.cycles[2:]]
    bodies = [s.split("): ", 1)[1] for s in summaries]
    assert all(later.startswith(earlier) for earlier, later in zip(bodies, bodies[1:], strict=False))
    growth = [len(b) - len(a) for a, b in zip(bodies, bodies[1:], strict=False)]
    assert growth[-1] <= growth[0] and growth[-1] == 0  # the fixed point: nothing new gets in
    assert all(REGISTRY.of(c.post[-1]) == frozenset() for c in loop.cycles[2:])


def test_task_keeping_keeps_the_users_task_verbatim_after_the_system_prompt():
    loop = task_keeping_replacing_loop(1000)
    task = loop.cycles[0].pre[1]
    rewrites = [c for c in loop.cycles if c.post != c.pre]
    assert rewrites and all(c.post[1] == task and len(c.post) == 3 for c in rewrites)


def test_pruning_absorption_only_drops_whole_messages_and_collapses_onto_its_head():
    """Review F5's loop: every rewrite is an elision (no cycle of the alarm today); from the onset on each
    pruning drops work appended since the previous one, and the buffer ends at its head, the oldest payload
    and the newest note, however much new work arrives."""
    for seed in range(6):
        loop = pruning_absorption_loop(seed)
        for c in loop.cycles:
            change = Change.between(Context(c.pre), c.post, "prune")
            assert change.is_append_only or elides_only(change)
            if c.t >= loop.onset:
                assert not set(m.digest for m in c.pre[len(loop.cycles[c.t - 2].post):]) <= set(change.after_digests)
        assert c.post[:HEAD] == c.pre[:HEAD] and len(c.post) <= HEAD + 3
        assert PRUNE_DIRECTIVE in c.post[-1].text


def test_batch_pruning_drops_the_oldest_and_keeps_the_newest_work():
    loop = batch_pruning_loop(3)
    for previous, c in zip(loop.cycles, loop.cycles[1:], strict=False):
        appended = c.pre[len(previous.post):]
        assert c.post[-len(appended):] == appended and c.post[:HEAD] == c.pre[:HEAD]
    assert any(len(c.post) < len(c.pre) for c in loop.cycles)
