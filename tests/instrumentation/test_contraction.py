"""The contraction detector (record 003's instruction absorption; DESIGN.md "The contraction regime"):
the state machine, its hysteresis both ways, its persistence for the monitor, and bad input."""

from __future__ import annotations

import json
import math
import random

import pytest

from ctxwatch.contraction import ContractionDetector, DetectorConfig, net_distance
from ctxwatch.simulate.loops import (
    absorption_loop,
    appending_loop,
    converging_loop,
    sliding_loop,
    summarizing_loop,
)
from ctxwatch.simulate.meter import judge

# figures (d, literals_before, literals_lost, size of Q_t)
CALM = (0.40, 60, 0, 1000)      # no loss: clear
PEAK = (0.60, 60, 36, 1000)     # d < r but d is at a new high: neither evidence nor clear
EVIDENCE = (0.30, 60, 60, 700)  # keeps no literal (0 <= 0.5 x the recent median kept, beyond a count's noise)
NEITHER = (0.58, 60, 48, 700)   # in contracting: not clear (d < r + margin, 12 kept: below the level of 24)


def _feed(det, *figures):
    return [det.update(*f) for f in figures]


def test_record_003_instruction_absorption_is_caught_within_two_cycles_of_onset():
    """Record 003, signal 1: 10 seeded instruction-absorption loops with varied compression ratios."""
    delays = []
    for seed in range(10):
        loop = absorption_loop(seed)
        judged = judge((c.pre, c.post) for c in loop.cycles)
        entered = next(j.t for j in judged if j.verdict.entered)
        delays.append(entered - loop.onset)
        assert all(j.verdict.state == "healthy" for j in judged if j.t < loop.onset), seed
    assert all(0 <= delay <= 2 for delay in delays), delays


@pytest.mark.parametrize("make", [appending_loop, summarizing_loop, sliding_loop])
def test_healthy_loops_never_alarm(make):
    for seed in range(5):
        loop = make(seed)
        assert all(j.verdict.state == "healthy" for j in judge((c.pre, c.post) for c in loop.cycles)), seed


def test_one_evidence_cycle_does_not_enter_and_two_do_with_the_onset_at_the_first():
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, CALM)
    assert [x.state for x in v] == ["healthy"] * 3 and v[1].evidence and v[2].streak == 0
    v = _feed(det, PEAK, EVIDENCE, EVIDENCE)
    assert v[-1].state == "contracting" and v[-1].entered and v[-1].onset == 5
    assert det.state == "contracting" and det.onset == 5


def test_an_ambiguous_cycle_holds_the_entry_run_and_a_clear_cycle_resets_it():
    """d a few hundredths above converge_max, keeping no more literals, neither confirms nor refutes: the run waits;
    a calm cycle ends it."""
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, (0.62, 12, 12, 700), EVIDENCE)        # evidence, d=0.62 keeping 0, evidence
    assert v[2].state == "healthy" and not v[2].evidence and v[2].streak == 1
    assert v[3].entered and v[3].onset == 2
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, CALM, EVIDENCE)
    assert all(x.state == "healthy" for x in v) and v[3].streak == 1


def test_a_version_1_state_still_loads():
    old = {"v": 1, "state": "healthy", "cycle": 6, "streak": 1, "onset": None, "recent": [0.4, 0.3],
           "lost_total": 9}
    det = ContractionDetector.from_dict(old)  # no sizes in it: d's own trend decides
    assert det.update(0.15, 20, 12).onset == 6


def test_leaving_needs_exit_cycles_consecutive_clear_cycles():
    det = ContractionDetector()
    _feed(det, PEAK, EVIDENCE, EVIDENCE)
    v = _feed(det, CALM, NEITHER, CALM)
    assert all(x.state == "contracting" for x in v), "a cycle that is not clear breaks the exit run"
    v = _feed(det, CALM)
    assert v[0].state == "healthy" and v[0].left and det.onset == 2  # the last episode's onset is kept


def test_a_contracting_loop_stays_contracting_while_it_keeps_losing():
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, EVIDENCE, *[NEITHER] * 5)
    assert all(x.state == "contracting" for x in v[2:])


def test_first_cycle_is_never_shrinking_and_small_buffers_never_count():
    det = ContractionDetector()
    assert not det.update(0.01, 20, 19).shrinking
    assert not ContractionDetector(DetectorConfig(min_literals=3)).update(0.01, 2, 2).losing  # < min_literals


def test_buffers_that_are_not_alike_are_no_convergence_however_much_they_lose():
    """A full-replacement compaction repeated (d flat near 0.85, most literals lost) never alarms,
    and its margin says how far d is above the evidence threshold (here: a flat d is no trend)."""
    det = ContractionDetector()
    verdicts = _feed(det, *[(0.85, 80, 75)] * 8)
    assert not any(v.evidence for v in verdicts) and det.state == "healthy"
    assert verdicts[-1].margin == pytest.approx(0.85 - DetectorConfig().fall_ratio * 0.85)
    assert ContractionDetector().update(*CALM).margin is None  # nothing lost: no d would be evidence


def test_a_jump_above_the_recent_peak_is_no_convergence():
    det = ContractionDetector()
    _feed(det, (0.20, 20, 0, 1000), (0.25, 20, 0, 1000))
    jump = det.update(0.75, 20, 18, 700)  # the buffer contracts, but by far more than the contraction explains
    assert jump.contracted and jump.d_net == pytest.approx(net_distance(0.75, 700, 1000, 0.4))
    assert 0.6 < jump.d_net < 0.75 and not jump.shrinking and jump.margin == pytest.approx(jump.d_net - 0.35)


def _part_distance(share: float) -> float:
    """d between a buffer and a part of it holding `share` of it (the cosine of the two is √share)."""
    return 2 * math.acos(math.sqrt(share)) / math.pi


@pytest.mark.parametrize("share", [0.4, 0.5, 0.7, 0.9])
def test_the_distance_a_pure_contraction_explains_is_taken_out_of_d(share):
    """A buffer shrinking into a part of itself has d ≈ the part's distance: its net distance is ~0;
    new text of the same size (d near 1) keeps nearly all of its d."""
    size_before = 1000
    assert net_distance(_part_distance(share), round(share * size_before), size_before, 0.4) < 0.02
    fresh = net_distance(0.9, round(share * size_before), size_before, 0.4)
    assert 0.8 < fresh < 0.9


def test_d_is_kept_when_the_buffer_grows_keeps_its_size_is_replaced_or_sizes_are_unknown():
    assert net_distance(0.5, 1200, 1000, 0.4) == 0.5  # grew
    assert net_distance(0.5, 1000, 1000, 0.4) == 0.5  # same size
    assert net_distance(0.9, 20, 1000, 0.4) == 0.9  # shrank to 2% in one cycle: a replacement, not a part
    assert net_distance(0.5, None, 1000, 0.4) == net_distance(0.5, 700, None, 0.4) == 0.5
    assert net_distance(0.5, 700, 1000, 1.0) == 0.5  # shrink_min 1: never taken out


def test_compounding_contraction_is_evidence_though_its_raw_d_is_as_high_as_a_compaction():
    """Instruction absorption halving the buffer each cycle: raw d 0.62-0.66 (above converge_max, as
    far apart as a full-replacement compaction), yet the new buffer is a part of the old one."""
    halving = [(0.45, 40, 0, 3000), (0.45, 40, 4, 2800), (0.66, 40, 28, 1300), (0.62, 16, 12, 640)]
    det = ContractionDetector()
    verdicts = _feed(det, *halving)
    assert all(v.d > DetectorConfig().converge_max for v in verdicts[2:])
    assert [v.evidence for v in verdicts] == [False, False, True, True] and det.state == "contracting"
    assert all(v.d_net < 0.5 for v in verdicts[2:]) and "(net 0.4" in verdicts[-1].explain()
    as_measured = _feed(ContractionDetector(DetectorConfig(shrink_min=1.0)), *halving)
    assert not any(v.evidence for v in as_measured) and all(v.d_net == v.d for v in as_measured)
    steady = _feed(ContractionDetector(), (0.45, 40, 0, 3000), (0.45, 40, 4, 2800), (0.66, 40, 28, 2800),
                   (0.62, 16, 12, 2800))  # the same d with a steady buffer: no part of the old one, no trend
    assert not any(v.evidence for v in steady)


def test_preview_does_not_change_the_state():
    det = ContractionDetector()
    _feed(det, PEAK, EVIDENCE)
    before = det.to_dict()
    assert det.preview(*EVIDENCE).entered
    assert det.to_dict() == before


def test_state_round_trips_through_json_and_is_small():
    det = ContractionDetector()
    _feed(det, PEAK, EVIDENCE, EVIDENCE, CALM, (0.123456789, 40, 3))
    text = json.dumps(det.to_dict())
    assert len(text) <= 300, text
    again = ContractionDetector.from_dict(json.loads(text), det.config)
    assert again.to_dict() == det.to_dict()
    follow = [CALM, EVIDENCE, EVIDENCE, NEITHER, CALM, CALM]
    assert [det.update(*f) for f in follow] == [again.update(*f) for f in follow]


@pytest.mark.parametrize("figures, field", [
    ((math.nan, 10, 1), "hash distance"), ((math.inf, 10, 1), "hash distance"), ((-0.1, 10, 1), "hash distance"),
    ((1.5, 10, 1), "hash distance"), (("0.3", 10, 1), "hash distance"), ((True, 10, 1), "hash distance"),
    ((0.3, -1, 0), "literals_before"), ((0.3, 10.0, 1), "literals_before"), ((0.3, 10, -2), "literals_lost"),
    ((0.3, 10, True), "literals_lost"), ((0.3, 3, 4), "exceeds"),
])
def test_bad_figures_are_refused_with_a_clear_message(figures, field):
    """(A bad size of Q_t is refused the same way: see test_a_bad_size_is_refused.)"""
    det = ContractionDetector()
    with pytest.raises(ValueError, match=field):
        det.update(*figures)
    assert det.cycle == 0


@pytest.mark.parametrize("state, field", [
    ([], "dict"), ({"v": 99}, "'v'"), ({**ContractionDetector().to_dict(), "state": "melting"}, "'state'"),
    ({**ContractionDetector().to_dict(), "cycle": -1}, "'cycle'"),
    ({**ContractionDetector().to_dict(), "onset": 0}, "'onset'"),
    ({**ContractionDetector().to_dict(), "recent": [0.2, float("nan")]}, "'recent'"),
    ({**ContractionDetector().to_dict(), "lost_total": "3"}, "'lost_total'"),
])
def test_malformed_persisted_state_is_refused_naming_the_field(state, field):
    with pytest.raises(ValueError, match=field):
        ContractionDetector.from_dict(state)


@pytest.mark.parametrize("kwargs", [{"enter_cycles": 0}, {"window": 1.5}, {"converge_max": math.nan},
                                    {"rise_max": -0.1}, {"exit_margin": 2.0}, {"min_lost": True},
                                    {"fall_ratio": 1.5}, {"contract_ratio": -0.2}, {"shrink_min": 1.5},
                                    {"carried_min": 1.2}, {"step_ratio": -0.1}])
def test_bad_configuration_is_refused(kwargs):
    with pytest.raises(ValueError, match="DetectorConfig"):
        DetectorConfig(**kwargs)


def test_every_threshold_is_configurable():
    strict = DetectorConfig(enter_cycles=3, rise_max=0.0)
    det = ContractionDetector(strict)
    v = _feed(det, PEAK, EVIDENCE, EVIDENCE, EVIDENCE)
    assert [x.state for x in v] == ["healthy", "healthy", "healthy", "contracting"]
    assert "d<r=yes" in v[-1].explain() and "entered" in v[-1].explain()


@pytest.mark.parametrize("size", [-1, 2.5, True, "700"])
def test_a_bad_size_is_refused(size):
    det = ContractionDetector()
    with pytest.raises(ValueError, match="size_after"):
        det.update(0.3, 10, 1, size)
    assert det.cycle == 0


def test_a_flat_d_with_a_steady_buffer_is_no_convergence_however_long_it_runs():
    """Issue 13's naive summarizer: d flat near 0.5 below r, the buffer the same size every cycle,
    with noise: isolated dips never add up to an entry."""
    det = ContractionDetector()
    ds = [0.55, 0.50, 0.52, 0.48, 0.28, 0.51, 0.50, 0.53, 0.49, 0.50, 0.28, 0.52] * 20
    verdicts = _feed(det, *[(d, 7, 4, 320 + i % 3) for i, d in enumerate(ds)])
    assert det.state == "healthy" and not any(v.contracted for v in verdicts)
    assert sum(v.evidence for v in verdicts) == 40  # every dip is evidence on its own, never two within a window


def test_d_falling_is_convergence_and_so_are_the_kept_literals_contracting_but_not_the_size_alone():
    by_trend = _feed(ContractionDetector(), (0.6, 20, 0), (0.5, 20, 10), (0.3, 20, 12), (0.15, 20, 12))
    assert [v.evidence for v in by_trend] == [False, False, True, True] and by_trend[-1].entered
    by_kept = _feed(ContractionDetector(), (0.5, 20, 0, 3000), (0.5, 20, 12, 3000), (0.5, 20, 16, 3000))
    assert [v.contracted for v in by_kept] == [False, True, True] and by_kept[-1].entered  # kept 20 -> 8 -> 4
    by_size = _feed(ContractionDetector(), (0.5, 20, 12, 3000), (0.5, 20, 12, 2000), (0.5, 20, 12, 1400))
    assert not any(v.contracted or v.evidence for v in by_size)  # the buffer shrinks, what it keeps does not


def test_a_buffer_whose_size_swings_while_d_stays_flat_never_enters():
    """Review D1: post-rewrite sizes moving by +-25% cycle to cycle (1-3 tool calls a step) with d flat
    near 0.5 below r and the same number of literals kept; the size swings make the net distance dip,
    and neither the dips nor the swings are a trend."""
    det = ContractionDetector()
    sizes = [1000, 1198, 828, 900, 1086, 825, 1067, 694, 809, 975] * 30
    verdicts = _feed(det, *[(0.50 + (i % 3 - 1) * 0.03, 20, 12 + i % 2, size) for i, size in enumerate(sizes)])
    assert det.state == "healthy" and not any(v.evidence for v in verdicts)
    assert any(v.d_net < 0.4 for v in verdicts)  # the dips are there, d as measured has no trend


def test_a_state_persisted_before_version_5_loads_and_the_histories_round_trip():
    det = ContractionDetector()
    _feed(det, PEAK, EVIDENCE)
    data = det.to_dict()
    assert data["v"] == 5 and data["sizes"] == [700] and data["kept"] == [24, 0] and data["recent"] == [0.6, 0.3]
    assert data["level"] == 24  # the kept literals' median before the entry run began
    assert data["floor"] == 0  # what the entry run's last counted cycle kept
    v4 = ContractionDetector.from_dict({k: v for k, v in data.items() if k != "floor"} | {"v": 4})
    keeps_three = (0.3, 60, 57, 700)  # evidence (3 kept of the window's 12), but more than the run's last cycle kept
    assert ContractionDetector.from_dict(data).update(*keeps_three).streak == 1  # the run rebounded; this one begins
    assert v4.to_dict()["floor"] is None and v4.update(*keeps_three).entered  # no floor: any evidence confirms
    old = {k: v for k, v in data.items() if k not in ("sizes", "kept", "level")} | {"v": 2}
    again = ContractionDetector.from_dict(old)
    assert again.to_dict()["kept"] == [] and again.to_dict()["recent"] == data["recent"]
    assert ContractionDetector.from_dict(data).update(*EVIDENCE).entered
    v3 = ContractionDetector.from_dict({k: v for k, v in data.items() if k != "level"} | {"v": 3})
    assert v3.to_dict()["level"] is None and v3.to_dict()["kept"] == [24, 0]
    for name, bad in (("sizes", [-3]), ("kept", [1.5]), ("recent", [2.0]), ("level", -1), ("level", "24"),
                      ("floor", -1), ("floor", 1.5)):
        with pytest.raises(ValueError, match=f"'{name}'"):
            ContractionDetector.from_dict({**data, name: bad})


def test_an_entry_run_lasts_a_window():
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, *[(0.58, 20, 12, 1000)] * 4, EVIDENCE)
    assert v[1].evidence and v[-1].evidence and det.state == "healthy" and v[-1].streak == 1


# a slow absorber's cycles as measured (absorbing ratio 0.8, onset at the third): the literals it keeps go
# 39 -> 43 -> 33 -> 24, never half their recent median, while 82-90% of each rewrite's input literals are
# the ones the previous rewrite kept and the buffer shrinks 3917 -> 3296 -> 2571
SLOW_ABSORBER = [(0.515, 39, 0, 3609), (0.336, 44, 1, 3917), (0.416, 48, 15, 3296), (0.422, 40, 16, 2571)]
# the same shape with a hundred literals kept: 100 -> 110 -> 80 -> 55
LARGE_ABSORBER = [(0.515, 100, 0, 3609), (0.336, 112, 2, 3917), (0.30, 120, 40, 3296), (0.30, 90, 35, 2571)]


def test_a_rewrite_shrinking_mostly_its_own_previous_output_is_a_contracting_step():
    """Issue 14, out of sample: the step is the trend that catches a slow absorber at onset + 1."""
    verdicts = _feed(ContractionDetector(), *LARGE_ABSORBER)
    assert [v.contracted for v in verdicts] == [False, False, True, True] and verdicts[-1].evidence
    without = _feed(ContractionDetector(DetectorConfig(step_ratio=0.0)), *LARGE_ABSORBER)
    assert not any(v.contracted or v.evidence for v in without)  # the kept literals never halve


def test_a_step_within_a_counts_chance_spread_is_no_contracting_step():
    """Review F2 and issue 14: a step's fall counts beyond `step_noise` x sqrt of what it falls from, the smaller
    of K_{t-1} and the window's median. The slow absorber's 43 -> 33 falls by 8 from min(43, 41) = 41, within
    1.5 x sqrt(41) = 9.6; its 33 -> 24 by 9 from 33, beyond 1.5 x sqrt(33) = 8.6: a step at onset + 1.
    With `step_noise` 0 both are steps."""
    verdicts = _feed(ContractionDetector(), *SLOW_ABSORBER)
    assert [v.contracted for v in verdicts] == [False, False, False, True] and verdicts[-1].evidence
    noiseless = _feed(ContractionDetector(DetectorConfig(step_noise=0.0)), *SLOW_ABSORBER)
    assert [v.contracted for v in noiseless] == [False, False, True, True] and noiseless[-1].evidence


def test_a_step_over_mostly_new_work_or_without_shrinking_the_buffer_is_no_contracting_step():
    """A tool loop compacts a buffer mostly new since its last compaction (80 of 200 literals carried);
    a sliding window re-processes its own output but keeps its size: neither is a step."""
    mostly_new = _feed(ContractionDetector(), *LARGE_ABSORBER[:3], (0.422, 200, 140, 2571))
    same_size = _feed(ContractionDetector(), *LARGE_ABSORBER[:3], (0.422, 90, 35, 3296))
    unknown_size = _feed(ContractionDetector(), *LARGE_ABSORBER[:3], (0.422, 90, 35))
    for verdicts in (mostly_new, same_size, unknown_size):
        assert not verdicts[-1].contracted and not verdicts[-1].evidence


# review F2, repro_2.py seed 1 through the guard (tools answering "ok", "[]", "toolu_…: 45 units"): the
# SKUs of the tool inputs are the only downstream literals, 4-21 of them kept a cycle as the tail falls
F2_LOOP = [(0.452, 22, 12, 678), (0.489, 34, 22, 819), (0.471, 23, 18, 510), (0.495, 27, 16, 731),
           (0.462, 40, 24, 960), (0.544, 31, 26, 574), (0.576, 36, 22, 827), (0.451, 36, 20, 850),
           (0.487, 33, 21, 787), (0.486, 50, 35, 1176), (0.418, 40, 27, 1008), (0.474, 41, 28, 941),
           (0.560, 46, 25, 1201), (0.528, 50, 34, 1103), (0.476, 47, 31, 919), (0.474, 46, 29, 1135),
           (0.394, 42, 32, 794), (0.520, 47, 29, 1175), (0.478, 30, 24, 656), (0.523, 25, 18, 581),
           (0.507, 27, 14, 856), (0.478, 39, 22, 981), (0.482, 44, 28, 1061), (0.535, 47, 32, 988),
           (0.544, 31, 27, 531)]


def test_a_handful_of_fresh_literals_halving_by_chance_is_no_contraction():
    """Review F2: cycles 3 and 6 keep 5 of the window's ~12 literals (d' 0.23 and 0.35 < r 0.78 and 0.84):
    the old rule entered at cycle 6, and a guard then refused every compaction. A fall of 7 from 12 is
    within 2.5 x sqrt(12) = 8.7."""
    det = ContractionDetector()
    verdicts = _feed(det, *F2_LOOP)
    assert det.state == "healthy" and not verdicts[2].evidence and not verdicts[5].evidence
    assert sum(v.evidence for v in verdicts) <= 2 and all(v.d_net < v.r for v in (verdicts[2], verdicts[5]))
    # without a count's chance spread the two dips no longer add up either: the kept literals came back to 11 between
    # them, so the first dip's entry run ended (a rebound), and the second begins a run of its own
    spread_off = _feed(ContractionDetector(DetectorConfig(contract_noise=0.0, step_noise=0.0)), *F2_LOOP)
    assert spread_off[2].evidence and spread_off[5].evidence and not any(v.entered for v in spread_off)
    assert spread_off[3].streak == 0 and spread_off[5].streak == 1


def test_d_falling_is_judged_on_d_as_measured_where_the_net_distance_is_flat_at_zero():
    """A buffer shrinking to 55% with d 0.42 has d' = 0, and so has the bound 0.7 x mean d (0.367): d' <= the
    bound held though d is not falling. Judged on d as measured it is no trend."""
    det = ContractionDetector()
    verdicts = _feed(det, *[(0.53, 40, 20, 1300)] * 4, (0.42, 40, 28, 715))
    assert verdicts[-1].d_net == 0.0 and not verdicts[-1].contracted and not verdicts[-1].shrinking
    assert not verdicts[-1].evidence and verdicts[-1].d_net < verdicts[-1].r


# a detector without a count's chance spread, whose entry runs need not compound, enters the F2 loop with its fourth
# cycle keeping 5 literals (two dips in a row, 5 and 5 of the window's ~11) falsely at cycle 4
FORCED = DetectorConfig(contract_noise=0.0, step_noise=0.0, confirm_noise=0.0)
F2_DIPS = [*F2_LOOP[:3], (0.495, 27, 22, 731), *F2_LOOP[4:]]


def test_a_loop_falsely_entered_leaves_the_regime_once_its_kept_literals_are_back_at_their_level():
    """Issue 14: a lossy tool loop has d' < r on every cycle, so "d' >= r + exit_margin" never clears it. It keeps
    10-16 literals a cycle (median 11 before the entry run); back at 14 and 16 (>= 0.75 x 11) it has left."""
    det = ContractionDetector(FORCED)
    verdicts = _feed(det, *F2_DIPS)
    assert verdicts[3].entered and verdicts[3].onset == 3
    assert [v.recovered for v in verdicts[6:8]] == [True, True] and verdicts[7].left
    assert all(v.d_net < v.r + FORCED.exit_margin for v in verdicts[6:8])  # the old clear cycle never comes
    assert det.state == "healthy" and not any(v.state == "contracting" for v in verdicts[8:])


def test_the_level_to_recover_is_kept_through_a_restart_and_a_state_without_one_never_recovers():
    det = ContractionDetector(FORCED)
    _feed(det, *F2_DIPS[:6])
    again = ContractionDetector.from_dict(json.loads(json.dumps(det.to_dict())), FORCED)
    assert again.to_dict()["level"] == 11 and again.update(*F2_DIPS[6]).recovered
    old = ContractionDetector.from_dict({**det.to_dict(), "v": 3, "level": None}, FORCED)
    assert not any(v.recovered or v.left for v in _feed(old, *F2_DIPS[6:12]))


@pytest.mark.parametrize("make", [absorption_loop, converging_loop])
def test_a_loop_converging_on_its_fixed_point_never_leaves_the_regime(make):
    """Forty cycles: once entered, an absorbing or converging loop keeps at most a fifth of its level (docs/alarm.md
    table 1d), never back at 0.75 of it."""
    for seed in range(10):
        verdicts = [j.verdict for j in judge((c.pre, c.post) for c in make(seed, cycles=40).cycles)]
        entered = next(i for i, v in enumerate(verdicts) if v.entered)
        assert len(verdicts) - entered >= 25, seed
        assert all(v.state == "contracting" and not v.recovered for v in verdicts[entered:]), seed


def test_the_margin_is_the_distance_to_the_condition_that_decides():
    """A buffer shrinking to 55% with d 0.42 after four cycles at 0.53: d' = 0 and the fall's bound on the net
    scale is 0 too, but the fall is judged on d as measured: the cycle misses it by 0.42 - 0.6 x 0.53."""
    verdicts = _feed(ContractionDetector(), *[(0.53, 40, 20, 1300)] * 4, (0.42, 40, 28, 715))
    last = verdicts[-1]
    assert last.d_net == 0.0 and not last.evidence
    assert last.margin == pytest.approx(0.42 - DetectorConfig().fall_ratio * 0.53)


def test_the_margin_says_whether_a_cycle_is_evidence():
    """Over seeded random figures: a margin below 0 is evidence, above 0 is none, None is none at any d."""
    rng = random.Random(14)
    for _ in range(300):
        det = ContractionDetector()
        for _ in range(8):
            before = rng.randint(0, 40)
            v = det.update(rng.random(), before, rng.randint(0, before), rng.randint(200, 1200))
            if v.margin is None:
                assert not v.evidence
            elif v.margin < 0:
                assert v.evidence, v.explain()
            elif v.margin > 0:
                assert not v.evidence, v.explain()
