"""End to end over loopback (issue 5, DESIGN.md "Monitor contract"; record 003's contraction regime).

Spans come from the real OpenTelemetry SDK and OTLP/HTTP exporter, the monitor runs as a
subprocess (uvicorn on 127.0.0.1), and /metrics and /api agree with what was sent. The monitor
flags a contracting loop at the same cycle as the in-process detector, and its detector state is
the guard's own, byte for byte, when the real ContextGuard drives the loop.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from absorbing import run_absorbing_loop
from conftest import MonitorProcess, Sender, contracting_cycles, healthy_cycles, metric_value
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from ctxwatch import semconv
from ctxwatch.contraction import ContractionDetector, DetectorConfig
from ctxwatch.guard import ContextGuard
from ctxwatch.model import Message
from ctxwatch.simulate.rewriters import ExtractiveSummarizer
from ctxwatch.simulate.text import TextGen
from ctxwatch.telemetry.mutation import MutationTelemetry


def _send_contracting_loop(sender: Sender, loop_id: str, agent: str) -> ContractionDetector:
    """Send the loop as the guard would (halt at the cycle its detector enters contracting)."""
    detector = ContractionDetector()
    for d, before, lost in contracting_cycles():
        verdict = detector.update(d, before, lost)
        decision = "halt" if verdict.entered else "patch"
        sender.mutation(loop_id, "compact", decision, d=d, before=before, lost=lost, agent=agent,
                        violations=("contraction",) if verdict.entered else (),
                        **{semconv.CONTRACTION_STATE: verdict.state})
        if verdict.entered:
            return detector
    raise AssertionError("the synthetic loop never contracts; contracting_cycles() is wrong")


def test_sdk_spans_agree_with_metrics_and_api(monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, service="svc-e2e")
    in_process = _send_contracting_loop(sender, "loop-contracting", "summarizer")
    for d, before, lost in healthy_cycles(5):
        sender.mutation("loop-healthy", "prune", "patch", d=d, before=before, lost=lost, agent="planner")
    for _ in range(3):
        sender.mutation("loop-healthy", "append", "patch", agent="planner")
    sender.mutation("loop-healthy", "compact", "abort", agent="planner", violations=("tool_pairing",),
                    **{semconv.ORPHANS_TOOL_USE: 2})
    sender.mutation("loop-healthy", "compact", "defer", agent="planner", violations=("prefix_identity",))
    with sender.tracer.start_as_current_span("chat gpt-x", attributes={"gen_ai.operation.name": "chat"}):
        pass  # an agent's LLM span: not a mutation span, ignored
    sender.flush()

    page = monitor.get("/api/loops").json()
    assert page["total"] == 2
    by_id = {loop["loop_id"]: loop for loop in page["loops"]}
    assert by_id["loop-healthy"]["state"] == "healthy" and by_id["loop-healthy"]["cycles"] == 5
    assert by_id["loop-healthy"]["agent"] == "planner" and by_id["loop-healthy"]["service"] == "svc-e2e"

    detail = monitor.get("/api/loops/loop-contracting").json()
    flagged = next(c["cycle"] for c in detail["history"] if c["state"] == "contracting")
    assert detail["state"] == "contracting"
    assert detail["flagged_cycle"] == flagged == in_process.cycle
    assert detail["onset"] == in_process.onset
    assert detail["detector"] == in_process.to_dict()
    assert [c["d"] for c in detail["history"]] == [d for d, _, _ in contracting_cycles()[: in_process.cycle]]
    assert detail["history"][-1]["decision"] == "halt"
    # halted by the alarm first, then the loop whose guard refused its rewrites (docs/monitor.md, "Loop status")
    assert [(a["loop_id"], a["status"], a["alarm"]) for a in monitor.get("/api/alarms").json()["alarms"]] == [
        ("loop-contracting", "halted", "active"), ("loop-healthy", "refusing", "active")]
    assert monitor.get("/api/loops", params={"state": "contracting"}).json()["total"] == 1
    assert monitor.get("/api/loops", params={"agent": "planner"}).json()["loops"][0]["loop_id"] == "loop-healthy"
    assert monitor.get("/api/loops/nope").status_code == 404

    text = monitor.get("/metrics").text
    base = {"service": "svc-e2e"}
    assert metric_value(text, "ctxwatch_mutations_total", kind="append", decision="patch", **base) == 3
    assert metric_value(text, "ctxwatch_mutations_total", kind="prune", decision="patch", **base) == 5
    assert metric_value(text, "ctxwatch_mutations_total", agent="summarizer", decision="halt") == 1
    assert metric_value(text, "ctxwatch_invariant_violations_total", invariant="tool_pairing") == 1
    assert metric_value(text, "ctxwatch_invariant_violations_total", invariant="contraction") == 1
    assert metric_value(text, "ctxwatch_deferrals_total", agent="planner") == 1
    assert metric_value(text, "ctxwatch_orphaned_tool_parts_total", side="tool_use") == 2
    lost = sum(lost for _, _, lost in contracting_cycles()[: in_process.cycle])
    assert metric_value(text, "ctxwatch_lost_literals_total", agent="summarizer") == lost
    # applied rewrites only: the contracting loop's cycles but the one halted, and the healthy loop's 5
    assert metric_value(text, "ctxwatch_rewrite_hash_distance_count") == in_process.cycle - 1 + 5
    assert metric_value(text, "ctxwatch_loops", agent="summarizer", state="contracting") == 1
    assert metric_value(text, "ctxwatch_loops", agent="planner", state="healthy") == 1
    assert metric_value(text, "ctxwatch_contraction_onsets_total", agent="summarizer") == 1
    assert metric_value(text, "ctxwatch_monitor_spans_accepted_total") == in_process.cycle + 10
    assert metric_value(text, "ctxwatch_monitor_spans_ignored_total") == 1
    assert metric_value(text, "ctxwatch_monitor_loops_tracked") == 2
    assert "loop-contracting" not in text and "loop-healthy" not in text  # never a loop id label

    om = monitor.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert om.text.rstrip().endswith("# EOF")
    assert "ctxwatch_mutations_total{" in om.text
    sender.close()


def test_loop_id_from_the_resource(monitor: MonitorProcess) -> None:
    sender = Sender(monitor.url, resource={semconv.LOOP_ID: "loop-from-resource"})
    sender.mutation(None, "rewrite", "patch", d=0.3, before=10, lost=0)
    with sender.tracer.start_as_current_span("tool call"):
        pass  # inherits ctxwatch.loop.id from the resource but is no mutation span: ignored
    sender.flush()
    loops = monitor.get("/api/loops").json()["loops"]
    assert [(loop["loop_id"], loop["cycles"]) for loop in loops] == [("loop-from-resource", 1)]
    assert metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_spans_ignored_total") == 1
    sender.close()


# A more sensitive alarm than the default (small buffers count), set on both sides: the guard's
# detector through DetectorConfig, the monitor's through its config file's [contraction] table.
SENSITIVE = {"min_literals": 1, "enter_cycles": 2}


def _guarded_loop(provider: TracerProvider, loop_id: str, seed: int) -> ContextGuard:
    """An instruction-absorbing compactor under the real guard, run until the guard halts it (or 12 cycles)."""
    guard = ContextGuard(loop_id, agent="absorber", service="guarded", pass_cap=None,
                         enforce={"directive_colocation": "warn"}, detector=DetectorConfig(**SENSITIVE),
                         telemetry=MutationTelemetry(tracer_provider=provider))
    run_absorbing_loop(guard, seed, lambda report: report.decision == "halt")
    return guard


def test_contextguard_drives_the_monitor_to_the_same_alarm(tmp_path: Path) -> None:
    """Record 003, instruction absorption: the real guard halts the loop; the monitor flags it at the
    same cycle, with the same onset and the very same detector state."""
    config = tmp_path / "monitor.toml"
    config.write_text("[contraction]\n" + "".join(f"{k} = {v}\n" for k, v in SENSITIVE.items()))
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--config", str(config)).start()
    provider = TracerProvider(resource=Resource.create({"service.name": "guarded"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
    guards = [_guarded_loop(provider, f"guarded-{seed}", seed) for seed in (7, 11, 23)]
    provider.force_flush()
    halted = [g for g in guards if g.halted_at is not None]
    assert halted, "no guarded loop entered the contraction regime: the scenario no longer contracts"
    for guard in guards:
        detail = monitor.get(f"/api/loops/{guard.loop_id}").json()
        assert detail["detector"] == guard.detector.to_dict()
        assert detail["state"] == guard.detector.state
        assert detail["flagged_cycle"] == guard.halted_at
        assert detail["onset"] == guard.detector.onset
        assert detail["guard_state"] == guard.detector.state
    metrics = httpx.get(monitor.url + "/metrics").text
    assert metric_value(metrics, "ctxwatch_loops", agent="absorber", state="contracting") == len(halted)
    assert metric_value(metrics, "ctxwatch_mutations_total", agent="absorber", decision="halt") == len(halted)
    provider.shutdown()
    monitor.stop()


def test_a_new_episode_starts_the_monitors_detector_afresh_as_the_guards(tmp_path: Path) -> None:
    """After a halt the operator fixes the rewrite policy and calls `guard.new_episode()` (as the halt
    tells them to): the guard's detector starts afresh, and the spans' `ctxwatch.episode` makes the
    monitor's do the same — the loop is healthy again at once, with the guard's very detector state,
    and stays so across a monitor restart."""
    config = tmp_path / "monitor.toml"
    config.write_text("[contraction]\n" + "".join(f"{k} = {v}\n" for k, v in SENSITIVE.items()))
    state = tmp_path / "state.sqlite3"
    monitor = MonitorProcess(state, "--config", str(config)).start()
    provider = TracerProvider(resource=Resource.create({"service.name": "guarded"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
    guard = next(g for g in (_guarded_loop(provider, f"episodic-{seed}", seed) for seed in (7, 11, 23))
                 if g.halted_at is not None)
    provider.force_flush()
    assert monitor.get(f"/api/loops/{guard.loop_id}").json()["state"] == "contracting"

    guard.new_episode()
    fixed = ExtractiveSummarizer(0.8, preserve_literals=True)  # the fixed policy: literals carried verbatim
    text = TextGen(99)
    for _ in range(2):
        guard.observe(guard.messages + [text.message(role, 6, 0.6) for role in ("user", "assistant") * 3],
                      boundary=1)
        report = guard.check(fixed(guard.messages), kind="compact")
        assert report.decision == "patch" and report.hash_distance is not None, report.explain()
    provider.force_flush()
    detail = monitor.get(f"/api/loops/{guard.loop_id}").json()
    assert detail["episode"] == guard.episode == 1
    assert detail["state"] == guard.detector.state == "healthy"
    assert detail["detector"] == guard.detector.to_dict()
    assert detail["cycles"] == guard.detector.cycle == 2 and detail["flagged_cycle"] is None
    assert [c["decision"] for c in detail["history"]][-3:] == ["halt", "patch", "patch"]  # history kept
    metrics = httpx.get(monitor.url + "/metrics").text
    assert metric_value(metrics, "ctxwatch_loops", agent="absorber", state="contracting") == 0
    assert metric_value(metrics, "ctxwatch_contraction_onsets_total", agent="absorber") == 1

    monitor.stop()
    monitor = MonitorProcess(state, "--config", str(config)).start()
    restored = monitor.get(f"/api/loops/{guard.loop_id}").json()
    assert restored["episode"] == 1 and restored["detector"] == guard.detector.to_dict()
    provider.shutdown()
    monitor.stop()


def test_a_late_span_of_a_finished_episode_is_counted_but_not_a_cycle(monitor: MonitorProcess) -> None:
    # the batch processor may deliver an old episode's span after the new episode's first one
    sender = Sender(monitor.url, service="svc-episodes")
    sender.mutation("loop-episodes", "compact", "patch", d=0.4, before=10, lost=0)
    ended_before_the_new_episode = time.time_ns()
    sender.mutation("loop-episodes", "compact", "patch", d=0.3, before=10, lost=0, **{semconv.EPISODE: 1})
    sender.mutation("loop-episodes", "compact", "patch", d=0.2, before=10, lost=0, end_ns=ended_before_the_new_episode)
    sender.flush()
    detail = monitor.get("/api/loops/loop-episodes").json()
    assert detail["episode"] == 1 and detail["cycles"] == 1
    assert [c["d"] for c in detail["history"]] == [0.4, 0.3]
    metrics = monitor.get("/metrics").text
    assert metric_value(metrics, "ctxwatch_mutations_total", service="svc-episodes") == 3
    sender.close()


def test_a_restarted_guard_counting_episodes_from_0_again_is_followed(monitor: MonitorProcess) -> None:
    # one loop id per process (the loop id on the resource): a new process's guard starts at episode 0
    sender = Sender(monitor.url, service="svc-restart")
    sender.mutation("loop-restart", "compact", "patch", d=0.4, before=10, lost=0)
    sender.mutation("loop-restart", "compact", "patch", d=0.3, before=10, lost=0, **{semconv.EPISODE: 1})
    in_process = _send_contracting_loop(sender, "loop-restart", "agent-a")  # the new process, episode 0
    sender.flush()
    detail = monitor.get("/api/loops/loop-restart").json()
    assert detail["episode"] == 0 and detail["state"] == "contracting"
    assert detail["detector"] == in_process.to_dict()
    sender.close()


def test_a_loop_that_only_appends_is_visible_in_the_monitor_from_its_first_turn(monitor: MonitorProcess) -> None:
    """Issue 13: `observe()` of appended turns emits an append span (real SDK → OTLP/HTTP → the monitor
    subprocess), so a loop that never rewrites still appears, counted by kind `append`."""
    provider = TracerProvider(resource=Resource.create({"service.name": "appender"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=monitor.url + "/v1/traces")))
    guard = ContextGuard("loop-append-only", agent="appender", telemetry=MutationTelemetry(tracer_provider=provider))
    messages = [Message("system", "You are a helpful agent.")]
    for turn in range(5):
        messages += [Message("user", f"question {turn}"), Message("assistant", f"answer {turn}")]
        guard.observe(messages)
    provider.force_flush()
    detail = monitor.get("/api/loops/loop-append-only").json()
    assert detail["state"] == "healthy" and detail["guard_state"] == "healthy"
    metrics = httpx.get(monitor.url + "/metrics").text
    assert metric_value(metrics, "ctxwatch_mutations_total", agent="appender", kind="append", decision="patch") == 5
    provider.shutdown()
