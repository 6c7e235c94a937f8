"""The contraction halt's message says what the detector saw, not what it guesses (review L4).

It used to say "the rewrite converges on its own directive" for every halted loop, also for loops with no
directive at all. The finding now gives the cycle's own figures — onset, net hash distance, literal-loss
rate, literals lost, the trend — the same ones the detector judged, and no message text.
"""

from __future__ import annotations

from absorbing import run_absorbing_loop

from ctxwatch import ContextGuard, DetectorConfig, Report
from ctxwatch.contraction import ContractionDetector


def test_the_halt_names_the_detectors_figures_and_no_directive() -> None:
    guard = ContextGuard("halt-wording", pass_cap=None, detector=DetectorConfig(min_literals=1, enter_cycles=2),
                         enforce={"directive_colocation": "warn"})
    before = [guard.detector.to_dict()]  # the detector as the next check finds it (appends feed it nothing)

    def halted(report: Report) -> bool:
        if report.decision == "halt":
            return True
        before.append(guard.detector.to_dict())
        return False

    report = run_absorbing_loop(guard, 5, halted)
    assert report is not None, "the absorbing compactor never halted"
    (finding,) = [f for f in report.findings if f.invariant == "contraction"]
    assert report.hash_distance is not None
    detector = ContractionDetector.from_dict(before[-1], guard.detector.config)
    verdict = detector.preview(report.hash_distance, report.literals_before, report.literals_lost, report.size_after)
    assert verdict.state == "contracting" and finding.details == {"onset": verdict.onset, "cycle": verdict.cycle}
    message = finding.message
    assert f"since cycle {verdict.onset}:" in message and f"(cycle {verdict.cycle}:" in message
    assert f"net hash distance {verdict.d_net:.3f} {'<' if verdict.below else '>='} " \
           f"literal-loss rate {verdict.r:.3f}" in message
    assert f"{verdict.literals_lost} of {verdict.literals_before} literals lost" in message
    kept = verdict.literals_before - verdict.literals_lost
    trend = (f"the literals it keeps contracting ({kept} kept)" if verdict.contracted
             else "the hash distance converging" if verdict.shrinking else "no trend this cycle")
    assert trend in message
    assert "directive" not in message
    for text in (m.text for m in guard.messages):
        assert not any(len(word) > 6 and word in message for word in text.split())  # no message text
