"""The series budget and label ageing (issue 15, item 5), on the real monitor fed by the OTel SDK.

100 agents x 20 services, every name under the label cap, used to give 104,059 series: now the
exposition holds at most the budget (20,000 by default), what did not fit is counted under the
overflow value `_OTHER` and in `ctxwatch_monitor_series_overflow_total`, and no count is lost
(the sums over all series still equal what was sent). A label value no span carried for
`label_ttl` frees its slot once no tracked loop holds it, so the first names seen do not keep the
cap for good; its series go too, from memory and from the state file. Agent versions (the
`agent_version` label of `ctxwatch_mutations_total`) are bounded the same way, harder: 20 at once,
version-like strings only, a hostile value counted under `_OTHER` or, past 256 characters, rejected alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from conftest import MonitorProcess, Sender, metric_value, samples

from ctxwatch import semconv

FAMILY_PREFIXES = ("ctxwatch_mutations_total", "ctxwatch_rewrite_", "ctxwatch_lost_literals_total", "ctxwatch_loops",
                   "ctxwatch_contraction_onsets_total", "ctxwatch_deferrals_total", "ctxwatch_orphaned_",
                   "ctxwatch_invariant_")


def _fleet(sender: Sender, agents: int, services: int) -> int:
    """One loop per (agent, service): an applied compact, a refused rewrite and an appended turn each.
    Returns the number of mutation spans sent."""
    for a in range(agents):
        for s in range(services):
            service = {semconv.SERVICE_NAME: f"service-{s}"}
            loop = f"loop-{a}-{s}"
            sender.mutation(loop, "compact", "patch", d=0.4, before=10, lost=1, agent=f"agent-{a}", **service)
            sender.mutation(loop, "rewrite", "defer", agent=f"agent-{a}", **service)
            sender.mutation(loop, "append", "patch", agent=f"agent-{a}", **service)
        sender.flush()  # within the SDK's queue
    return agents * services * 3


def test_default_budget_bounds_100_agents_by_20_services(monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, service="unused")
    sent = _fleet(sender, agents=100, services=20)
    sender.close()
    text = monitor.get("/metrics").text
    all_samples = samples(text)
    assert len(all_samples) <= 20_000, len(all_samples)
    overflowed = metric_value(text, "ctxwatch_monitor_series_overflow_total")
    assert overflowed > 0
    assert metric_value(text, "ctxwatch_monitor_series_overflow_total", metric="ctxwatch_rewrite_hash_distance") > 0
    # nothing is lost: every span is counted, under its own labels or the overflow value
    assert metric_value(text, "ctxwatch_mutations_total") == sent
    assert metric_value(text, "ctxwatch_mutations_total", agent="_OTHER", service="_OTHER") > 0
    assert metric_value(text, "ctxwatch_rewrite_hash_distance_count") == sent / 3
    assert metric_value(text, "ctxwatch_loops") == 100 * 20
    assert metric_value(text, "ctxwatch_loops", agent="agent-0", service="service-0") == 1
    # per metric: no family holds more than the per-metric budget
    for prefix in ("ctxwatch_rewrite_hash_distance", "ctxwatch_mutations_total"):
        assert len([s for s in all_samples if s.name.startswith(prefix)]) <= 5_000


def test_small_budget_holds_after_restart(tmp_path: Path) -> None:
    """A tighter budget from the config; the persisted series come back within it."""
    state = tmp_path / "state.sqlite3"
    args = ("--series-budget", "3000", "--metric-series-budget", "1200", "--label-cap", "50")
    monitor = MonitorProcess(state, *args).start()
    try:
        sender = Sender(monitor.url, service="unused")
        sent = _fleet(sender, agents=30, services=10)
        sender.close()
        before = monitor.get("/metrics").text
    finally:
        assert monitor.stop() == 0
    restarted = MonitorProcess(state, *args).start()
    try:
        after = restarted.get("/metrics").text
    finally:
        restarted.stop()
    for text in (before, after):
        budgeted = [s.name for s in samples(text) if s.name.startswith(FAMILY_PREFIXES)]
        assert len(budgeted) <= 3000, len(budgeted)
        assert metric_value(text, "ctxwatch_mutations_total") == sent
        assert len([s for s in budgeted if s.startswith("ctxwatch_mutations_total")]) <= 1200
    assert metric_value(before, "ctxwatch_monitor_series_overflow_total") > 0


def test_a_budget_below_the_overflow_reserve_is_a_config_error(tmp_path: Path) -> None:
    import subprocess
    import sys
    result = subprocess.run([sys.executable, "-m", "ctxwatch_monitor", "--state", ":memory:", "--series-budget", "10"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "series_budget 10" in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_label_values_age_out_and_free_their_slot(tmp_path: Path) -> None:
    """Three squatting agent names fill a cap of 3; once neither spans nor loops hold them, a new name
    gets its own label, and the squatters' series are gone (from the state file too).

    Label and loop times are wall-clock and persisted, so the phases run on one state file with their own
    TTLs: what is observed runs with TTLs of an hour (no sweep can race it however slow the machine), the
    ageing with TTLs of 1 s, waited for as a condition."""
    state = tmp_path / "state.sqlite3"
    steady = ("--label-cap", "3", "--label-ttl", "3600", "--loop-ttl", "3600")
    ageing = ("--label-cap", "3", "--label-ttl", "1", "--loop-ttl", "1", "--sweep-interval", "0.3")
    squatters = ("squat-1", "squat-2", "squat-3")
    with running(state, *steady) as monitor:
        sender = Sender(monitor.url, service="svc")
        for name in (*squatters, "late-comer"):
            sender.mutation(f"loop-{name}", agent=name)
        sender.flush()
        sender.close()
        text = monitor.get("/metrics").text
        assert metric_value(text, "ctxwatch_mutations_total", agent="squat-1") == 1
        assert metric_value(text, "ctxwatch_mutations_total", agent="_OTHER") == 1  # the cap is full
    with running(state, *ageing) as monitor:
        def aged_out() -> bool:
            text = monitor.get("/metrics").text
            loops = monitor.get("/api/loops").json()["total"]
            return loops == 0 and not any(name in text for name in squatters)

        wait_for(aged_out, "the squatters' loops and labels never aged out")
    with running(state, *steady) as monitor:
        sender = Sender(monitor.url, service="svc")
        sender.mutation("loop-late-comer", agent="late-comer")
        sender.flush()
        sender.close()
        text = monitor.get("/metrics").text
        assert metric_value(text, "ctxwatch_mutations_total", agent="late-comer") == 1
        assert not any(name in text for name in squatters)
    with running(state, *steady) as monitor:
        text = monitor.get("/metrics").text
        assert not any(name in text for name in squatters)
        assert metric_value(text, "ctxwatch_mutations_total", agent="late-comer") == 1


@contextmanager
def running(state: Path, *args: str) -> Iterator[MonitorProcess]:
    """A monitor on `state` for the block; it must exit cleanly."""
    monitor = MonitorProcess(state, *args).start()
    try:
        yield monitor
    except BaseException:
        monitor.stop()
        raise
    assert monitor.stop() == 0


def wait_for(condition: Callable[[], bool], what: str, bound: float = 120.0) -> None:
    """Poll `condition` until it holds (`bound` seconds at most: a generous bound, not a timing)."""
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


HOSTILE_VERSIONS = ("2.1\n# TYPE fake counter", "1.0\x1b[31m", "1.0\x00", 'v"1"', "a b", "9" * 33)


def test_agent_versions_are_bounded_neutralised_and_age_out(tmp_path: Path) -> None:
    """21 versions where 20 fit, hostile ones (control characters, a line break that would forge exposition
    lines, quotes, spaces, 33 characters) and a 300-character one: the first 20 have their own series, the
    rest and the hostile ones are `_OTHER`, an empty one is no label, the 300-character span is rejected alone,
    nothing else is lost; once no span carries them for `label_ttl`, a new version gets its own label.
    Observed with TTLs of an hour, aged with TTLs of 1 s (as `test_label_values_age_out_and_free_their_slot`)."""
    state = tmp_path / "state.sqlite3"
    steady = ("--label-ttl", "3600", "--loop-ttl", "3600")
    version = semconv.GENAI_V1_41.agent_version
    admitted = [f"2.1.{n}" for n in range(semconv.MAX_VERSION_VALUES)]
    with running(state, *steady) as monitor:
        sender = Sender(monitor.url, service="svc")
        for n, value in enumerate([*admitted, "3.0.0", *HOSTILE_VERSIONS, "", "1" * 300]):
            sender.mutation(f"loop-{n}", agent="claude-code", **{version: value})
        sender.flush()
        sender.close()
        text = monitor.get("/metrics").text
        assert metric_value(text, "ctxwatch_monitor_spans_rejected_total") == 1
        assert metric_value(text, "ctxwatch_mutations_total", agent="claude-code") == len(admitted) + 2 + len(
            HOSTILE_VERSIONS)
        assert all(metric_value(text, "ctxwatch_mutations_total", agent_version=v) == 1 for v in admitted)
        assert metric_value(text, "ctxwatch_mutations_total", agent_version="_OTHER") == 1 + len(HOSTILE_VERSIONS)
        assert metric_value(text, "ctxwatch_mutations_total", agent_version="") == 1
        counted = {s.labels.get("agent_version") for s in samples(text) if s.name == "ctxwatch_mutations_total"}
        assert counted == {*admitted, "_OTHER", ""}
        assert "3.0.0" not in text and "fake" not in text and "\x1b" not in text and "\x00" not in text
    with running(state, "--label-ttl", "1", "--loop-ttl", "1", "--sweep-interval", "0.3") as monitor:
        wait_for(lambda: not any(metric_value(monitor.get("/metrics").text, "ctxwatch_mutations_total",
                                              agent_version=v) for v in admitted),
                 "the admitted versions never aged out")
    with running(state, *steady) as monitor:
        sender = Sender(monitor.url, service="svc")
        sender.mutation("loop-upgraded", agent="claude-code", **{version: "3.0.0"})
        sender.flush()
        sender.close()
        assert metric_value(monitor.get("/metrics").text, "ctxwatch_mutations_total", agent_version="3.0.0") == 1


def test_label_less_self_metrics_have_a_sample_before_the_first_export(monitor: MonitorProcess) -> None:
    text = monitor.get("/metrics").text
    for name in ("ctxwatch_monitor_spans_accepted_total", "ctxwatch_monitor_spans_rejected_total",
                 "ctxwatch_monitor_spans_ignored_total", "ctxwatch_monitor_loops_tracked",
                 "ctxwatch_monitor_inflight_requests", "ctxwatch_monitor_db_write_duration_seconds_count"):
        assert any(s.name == name for s in samples(text)), name


def test_no_cdn_pages_the_schema_stays(monitor: MonitorProcess) -> None:
    assert monitor.get("/docs").status_code == 404
    assert monitor.get("/redoc").status_code == 404
    schema = monitor.get("/openapi.json")
    assert schema.status_code == 200 and "/v1/traces" in schema.json()["paths"]
    assert "cdn" not in httpx.get(monitor.url + "/", timeout=30).text.lower()
