"""The contraction detector (record 003's instruction absorption; DESIGN.md "The contraction regime"):
the state machine, its hysteresis both ways, its persistence for the monitor, and bad input."""

from __future__ import annotations

import json
import math

import pytest

from ctxwatch.contraction import ContractionDetector, DetectorConfig
from ctxwatch.simulate.loops import absorption_loop, appending_loop, sliding_loop, summarizing_loop
from ctxwatch.simulate.meter import judge

# figures (d, literals_before, literals_lost)
CALM = (0.40, 20, 0)            # no loss: clear
PEAK = (0.60, 20, 12)           # d < r but d is at a new high: neither evidence nor clear
EVIDENCE = (0.30, 20, 12)       # d below its recent peak, losing, d=0.30 < r=0.60
NEITHER = (0.58, 20, 12)        # in contracting: not clear (d < r + margin)


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
    assert all(delay >= 0 for delay in delays), delays
    assert sum(delay <= 2 for delay in delays) >= 9, delays


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
    """d a few hundredths above r neither confirms nor refutes: the run waits; a calm cycle ends it."""
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, (0.62, 20, 12), EVIDENCE)        # evidence, d=0.62 vs r=0.60, evidence
    assert v[2].state == "healthy" and v[2].streak == 1
    assert v[3].entered and v[3].onset == 2
    det = ContractionDetector()
    v = _feed(det, PEAK, EVIDENCE, CALM, EVIDENCE)
    assert all(x.state == "healthy" for x in v) and v[3].streak == 1


def test_a_version_1_state_still_loads():
    old = {"v": 1, "state": "healthy", "cycle": 6, "streak": 1, "onset": None, "recent": [0.4, 0.3],
           "lost_total": 9}
    det = ContractionDetector.from_dict(old)
    assert det.update(*EVIDENCE).onset == 6


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
    and its margin says how far d is above the evidence threshold."""
    det = ContractionDetector()
    verdicts = _feed(det, *[(0.85, 80, 75)] * 8)
    assert not any(v.evidence for v in verdicts) and det.state == "healthy"
    assert verdicts[-1].margin == pytest.approx(0.85 - DetectorConfig().converge_max)
    assert ContractionDetector().update(*CALM).margin is None  # nothing lost: no d would be evidence


def test_a_jump_above_the_recent_peak_is_no_convergence():
    det = ContractionDetector()
    _feed(det, (0.20, 20, 0), (0.25, 20, 0))
    jump = det.update(0.50, 20, 18)
    assert not jump.shrinking and jump.margin == pytest.approx(0.50 - 0.35)


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
                                    {"rise_max": -0.1}, {"exit_margin": 2.0}, {"min_lost": True}])
def test_bad_configuration_is_refused(kwargs):
    with pytest.raises(ValueError, match="DetectorConfig"):
        DetectorConfig(**kwargs)


def test_every_threshold_is_configurable():
    strict = DetectorConfig(enter_cycles=3, rise_max=0.0)
    det = ContractionDetector(strict)
    v = _feed(det, PEAK, EVIDENCE, EVIDENCE, EVIDENCE)
    assert [x.state for x in v] == ["healthy", "healthy", "healthy", "contracting"]
    assert "d<r=yes" in v[-1].explain() and "entered" in v[-1].explain()
