"""The monitoring mixin against real Prometheus and Alertmanager, all on loopback (issue 6, DESIGN.md data flow).

One simulated fleet (tests/e2e/mixin_fleet.py: real ContextGuards, real OTel SDK, OTLP/HTTP), then a real
Claude Code session of the corpus backfilled as ``replay --otlp`` does it (agent ``claude-code``, service
``coding-agents``: the coding-agent fleet of issue 18, with its version and its tokens before each compaction;
paused after its first span and each mutation until Prometheus has scraped them, so its counters have rates
and start alike on every replica), are exported
three ways at once:

  job ctxwatch-monitor          one monitor fed every span
  job ctxwatch-monitor-sharded  two monitors, each fed the loops the load balancer routes to it
  job ctxwatch-monitor-capped   one monitor with --max-loops 2 (its evictions feed the eviction panel)
  job ctxwatch-monitor-down     a port nothing listens on (a replica that is down)

Prometheus (Debian's binary) scrapes them every second with the shipped rules (every `for:` shortened
to 2s, see mixin_stack.rules_for_tests) and sends alerts to Alertmanager (Debian's binary, shipped
config) which delivers them to the shipped webhook receiver. Then:

- record 003: CtxwatchLoopContracting fires for the agent whose loops contract (absorber) and for no
  other agent, and Alertmanager delivers it to the webhook;
- every rule expression and every dashboard panel expression parses and returns data;
- the coding-agent panels: compactions by agent and version carry the session's recorded version, and the
  tokens-before-compaction quantiles lie within the buckets of its recorded ``preTokens``;
- sharding: the fleet-level recording rules over the two replicas equal those over the single monitor.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from corpus_files import claude_code_pre_tokens, claude_code_with_pre_tokens, jsonl
from mixin_fleet import AGENTS, CONTRACTING_AGENT, HEALTHY_AGENT, SERVICE, Fleet, ShardRouter, SpanCount, shard_of
from mixin_names import shipped_rules
from mixin_stack import (
    ALERTMANAGER,
    DASHBOARDS,
    PROMETHEUS,
    PromQL,
    Service,
    free_port,
    start_alertmanager,
    start_monitor,
    start_prometheus,
    start_receiver,
    wait_for,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ctxwatch import semconv
from ctxwatch.literals import LiteralRegistry
from ctxwatch.replay.audit import MutationAudit, Observer, audit_session
from ctxwatch.replay.backfill import Backfill, session_backfill
from ctxwatch.sessions import Mutation, Session, Snapshot
from ctxwatch.telemetry.mutation import MutationTelemetry

pytestmark = [
    pytest.mark.skipif(not (PROMETHEUS and ALERTMANAGER),
                       reason="needs Debian's prometheus and prometheus-alertmanager packages"),
    pytest.mark.timeout(420),
]

SINGLE, SHARDED, CAPPED, DOWN = ("ctxwatch-monitor", "ctxwatch-monitor-sharded", "ctxwatch-monitor-capped",
                                 "ctxwatch-monitor-down")
CYCLES = 24          # mutations per loop, one per round (one round per scrape)
ALERT_TIMEOUT = 120.0
CODING_AGENT, CODING_SERVICE = "claude-code", "coding-agents"  # the replayed session's labels
# Substitutions for the dashboards' template variables (see _panel_expressions for `agent`).
VARIABLES = {"job": "ctxwatch-monitor.*", "service": ".*", "instance": ".*", "monitor_url": "", "loop": ""}


def _bad_requests(url: str) -> None:
    """What a broken or foreign sender does: an undecodable body (400), a mutation span with an invalid
    decision (rejected in partial_success) and an ordinary span (ignored)."""
    assert httpx.post(url + "/v1/traces", content=b"\x0a\xff\xff not protobuf",
                      headers={"Content-Type": "application/x-protobuf"}, timeout=30).status_code == 400
    attrs = [{"key": "ctxwatch.mutation.kind", "value": {"stringValue": "compact"}},
             {"key": "ctxwatch.decision", "value": {"stringValue": "maybe"}},
             {"key": "ctxwatch.loop.id", "value": {"stringValue": "broken-sender"}}]
    spans = [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": name,
              "kind": 1, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000000001000",
              "attributes": attributes} for name, attributes in (("ctxwatch compact", attrs), ("chat", []))]
    body = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "bad"},
                                                                               "spans": spans}]}]}
    answer = httpx.post(url + "/v1/traces", json=body, timeout=30)
    assert answer.status_code == 200 and int(answer.json()["partialSuccess"]["rejectedSpans"]) == 1, answer.text


@dataclass
class Stack:
    prom: PromQL
    receiver: Service
    fleet: Fleet
    spans: int
    sharded_loops: list[set[str]]
    session: Path  # the replayed Claude Code session
    replayed_at: float  # when Prometheus had scraped all of it (unix s): rates over it are read at this time
    driven_at: float  # when Prometheus had scraped the fleet's last round (unix s)

    def fleet_settled(self) -> float:
        """When to read the fleet's rates: once the rules have been evaluated over its last round, and while
        that round is still inside the 5m windows however long the replay and the tests before took."""
        return min(time.time(), self.driven_at + 30)


def _accepted(prom: PromQL, job: str) -> float:
    result = prom.query(f'sum(ctxwatch_monitor_spans_accepted_total{{job="{job}"}})')
    return float(result[0]["value"][1]) if result else 0.0


def _until_scraped(provider: TracerProvider, count: SpanCount, prom: PromQL) -> int:
    """Send the spans ended so far and wait until Prometheus has scraped them from both the single monitor
    and the replicas; returns how many there are."""
    sent = count.ended
    assert provider.force_flush(30_000)
    wait_for(f"Prometheus to scrape {sent} spans", lambda: all(
        _accepted(prom, job) == sent for job in (SINGLE, SHARDED)), 60, interval=0.1)
    return sent


def _drive(fleet: Fleet, provider: TracerProvider, count: SpanCount, ingest_urls: list[str], prom: PromQL) -> int:
    """Run the fleet round by round; after each round wait until Prometheus has scraped its spans (the
    decisions and the append spans of observed turns), so each round lands in its own scrape. Returns the
    spans sent."""
    sent = 0
    while fleet.step():
        assert provider.force_flush(30_000)
        for url in ingest_urls:
            _bad_requests(url)
        sent = _until_scraped(provider, count, prom)
    return sent


class _Paced(Observer):
    """The replay's span emitter, waiting until Prometheus has scraped what it sent after the session's first
    span and after each recorded mutation: every series the session opens (its appends, each mutation's kind,
    its findings) is first scraped at the value it was born with on every target alike, and the compactions
    land in scrapes of their own (the version and tokens-before series have rates). Without this, a series
    born inside a burst of appends starts at a different value on each replica, and the sharding check below
    would compare scrape alignments instead of sums."""

    def __init__(self, backfill: Backfill, scraped: Callable[[], object]) -> None:
        self.backfill, self.scraped = backfill, scraped

    def started(self, session: Session) -> None:
        self.backfill.started(session)

    def snapshot(self, snapshot: Snapshot) -> None:
        first = not self.backfill.spans
        self.backfill.snapshot(snapshot)
        if first and self.backfill.spans:
            self.scraped()

    def mutation(self, mutation: Mutation, audit: MutationAudit) -> None:
        self.backfill.mutation(mutation, audit)
        self.scraped()


def _replay(path: Path, telemetry: MutationTelemetry, provider: TracerProvider, count: SpanCount,
            prom: PromQL) -> tuple[int, str]:
    """Backfill the session `path` as ``replay --otlp`` does (`session_backfill`), paced by `_Paced`; returns
    the spans sent in all and the session's loop id."""
    registry = LiteralRegistry()
    audit = audit_session(path, registry=registry, observer_for=lambda a: _Paced(session_backfill(
        a, telemetry, lambda: provider.force_flush(30_000), agent=CODING_AGENT, service=CODING_SERVICE,
        registry=registry), lambda: _until_scraped(provider, count, prom)))
    assert audit.readable and len([m for m in audit.mutations if m.kind == "compact"]) >= 2, audit.error
    return _until_scraped(provider, count, prom), audit.loop_id


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, corpus: Path) -> Iterator[Stack]:
    sessions = claude_code_with_pre_tokens(corpus, compactions=2)
    assert sessions, "no Claude Code session with two compactions recording preTokens in the corpus"
    tmp = tmp_path_factory.mktemp("mixin")
    services: list[Service] = []
    provider = TracerProvider(resource=Resource.create({"service.name": "mixin-fleet"}))
    try:
        receiver = start_receiver(tmp)
        services.append(receiver)
        single, shard0, shard1 = (start_monitor(n, tmp) for n in ("single", "shard-0", "shard-1"))
        capped = start_monitor("capped", tmp, "--max-loops", "2")
        services += [single, shard0, shard1, capped]
        alertmanager = start_alertmanager(tmp, receiver.url + "/alerts")
        services.append(alertmanager)
        hostport = lambda s: s.url.removeprefix("http://")  # noqa: E731
        jobs = {SINGLE: [hostport(single)], SHARDED: [hostport(shard0), hostport(shard1)],
                CAPPED: [hostport(capped)], DOWN: [f"127.0.0.1:{free_port()}"]}
        prometheus = start_prometheus(tmp, jobs, alertmanager.url)
        services.append(prometheus)
        prom = PromQL(prometheus.url)
        wait_for("every live monitor to be scraped",
                 lambda: len(prom.query('up{job=~"ctxwatch-monitor.*"} == 1')) == 4, 60)

        exporter = lambda s: OTLPSpanExporter(endpoint=s.url + "/v1/traces", timeout=30)  # noqa: E731
        count = SpanCount()
        provider.add_span_processor(count)
        for target in (exporter(single), ShardRouter([exporter(shard0), exporter(shard1)]), exporter(capped)):
            provider.add_span_processor(BatchSpanProcessor(target, schedule_delay_millis=100))
        fleet = Fleet(MutationTelemetry(tracer_provider=provider), CYCLES)
        _drive(fleet, provider, count, [single.url, shard0.url, shard1.url], prom)
        driven_at = time.time()
        spans, replayed = _replay(sessions[0], fleet.telemetry, provider, count, prom)
        sharded = [{loop for loop in (*fleet.loops, replayed) if shard_of(loop, REPLICAS) == i}
                   for i in range(REPLICAS)]
        yield Stack(prom, receiver, fleet, spans, sharded, sessions[0], time.time(), driven_at)
    finally:
        provider.shutdown()
        for service in reversed(services):
            service.stop()


def _simulated(alerts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The alerts about the simulated fleet's agents, and those about no agent (the monitor's own): what the
    replayed real session raises is a fact of that session (its compactions lose most literals), not a
    scenario of this test."""
    return [a for a in alerts if "agent" not in a["labels"] or a["labels"]["agent"] in AGENTS]


def _delivered(receiver: Service) -> list[dict[str, Any]]:
    return [json.loads(line) for line in receiver.lines if line.startswith("{")]


def test_contracting_agent_alert_reaches_the_webhook(stack: Stack) -> None:
    """Record 003, instruction absorption: all three absorber loops contract (the monitor's detector, the
    guard's own, flags them), no summarizer loop does; the alert fires for the absorber only and
    Alertmanager delivers it to the webhook."""
    absorbers = [decisions for loop, decisions in stack.fleet.decisions.items() if loop.startswith(CONTRACTING_AGENT)]
    assert absorbers and all(len(decisions) == CYCLES for decisions in absorbers)

    def delivered_contracting() -> list[dict[str, Any]]:
        return [a for a in _delivered(stack.receiver) if a["alertname"] == "CtxwatchLoopContracting"
                and a["status"] == "firing" and a["labels"]["agent"] in AGENTS]
    delivered = wait_for("CtxwatchLoopContracting to reach the webhook", delivered_contracting, ALERT_TIMEOUT)
    assert {a["labels"]["agent"] for a in delivered} == {CONTRACTING_AGENT}
    assert {a["labels"]["service"] for a in delivered} == {SERVICE}
    alert = delivered[0]
    assert alert["labels"]["severity"] == "critical" and alert["receiver"] == "ctxwatch-webhook"
    assert alert["annotations"]["runbook_url"].endswith("docs/operations.md#ctxwatchloopcontracting")
    assert "instruction absorption" in alert["annotations"]["description"]

    firing = _simulated(stack.prom.firing())
    contracting = [a for a in firing if a["labels"]["alertname"] == "CtxwatchLoopContracting"]
    assert {(a["labels"]["job"], a["labels"]["agent"]) for a in contracting} >= {
        (SINGLE, CONTRACTING_AGENT), (SHARDED, CONTRACTING_AGENT)}
    assert all(a["labels"]["agent"] == CONTRACTING_AGENT for a in contracting)
    # the healthy agent raises nothing at all
    assert not [a for a in firing if a["labels"].get("agent") == HEALTHY_AGENT]
    loops = stack.prom.series_values(f'job_service_agent_state:ctxwatch_loops:sum{{job="{SINGLE}"}}', drop=("job",))
    assert loops[frozenset({("service", SERVICE), ("agent", CONTRACTING_AGENT), ("state", "contracting")})] == 3
    assert loops.get(frozenset({("service", SERVICE), ("agent", HEALTHY_AGENT), ("state", "contracting")}), 0) == 0


def test_every_alert_fires_for_its_scenario(stack: Stack) -> None:
    """Each failure mode of the fleet raises its own alert (and MonitorDown names the dead replica)."""
    expected = {"CtxwatchLoopContracting": CONTRACTING_AGENT, "CtxwatchLiteralLossHigh": CONTRACTING_AGENT,
                "CtxwatchOrphanedToolPairs": "orphaner", "CtxwatchPolicyEditRefused": "editor",
                "CtxwatchPassCapReached": "capped", "CtxwatchDeferredBacklog": "deferrer"}

    def all_firing() -> list[dict[str, Any]] | None:
        firing = stack.prom.firing()
        names = {a["labels"]["alertname"] for a in firing}
        return firing if names >= {*expected, "CtxwatchMonitorDown", "CtxwatchIngestRejecting",
                                    "CtxwatchLoopBlocked"} else None
    firing = _simulated(wait_for("every alert to fire", all_firing, ALERT_TIMEOUT))
    for name, agent in expected.items():
        assert {a["labels"]["agent"] for a in firing if a["labels"]["alertname"] == name} == {agent}, name
    # every refusal of orphaner's and editor's loops names the same invariant: blocked; capped's refusals
    # alternate with applied prunes, so it may or may not be blocked when Prometheus evaluates
    blocked = {a["labels"]["agent"] for a in firing if a["labels"]["alertname"] == "CtxwatchLoopBlocked"}
    assert {"orphaner", "editor"} <= blocked <= {"orphaner", "editor", "capped"}, blocked
    down = [a["labels"] for a in firing if a["labels"]["alertname"] == "CtxwatchMonitorDown"]
    assert [labels["job"] for labels in down] == [DOWN]
    rejecting = {a["labels"]["job"] for a in firing if a["labels"]["alertname"] == "CtxwatchIngestRejecting"}
    assert rejecting == {SINGLE, SHARDED}


def _rule_expressions() -> list[tuple[str, str]]:
    return [(rule.get("record") or rule["alert"], rule["expr"]) for rule in shipped_rules()]


def _panel_expressions() -> list[tuple[str, list[str]]]:
    """(where, the expression with its variables substituted): multi-value variables by their "All" value;
    a single-value variable (the per-agent board's agent) by each agent of the fleet in turn, the panel
    having data when it has data for at least one of them."""
    out = []
    for path in sorted((DASHBOARDS / "grafana" / "dashboards").glob("*.json")):
        board = json.loads(path.read_text())
        variables = {v["name"]: v for v in board["templating"]["list"]}
        queries = [(f"variable {v['name']}", v["definition"]) for v in variables.values() if v["type"] == "query"]
        panels = [(f"panel {p['title']!r}", t["expr"]) for p in board["panels"] for t in p.get("targets", [])]
        for where, expr in queries + panels:
            used = set(re.findall(r"\$(\w+)", expr))
            assert used <= variables.keys(), f"{path.name} {where} uses undefined variables {used - variables.keys()}"
            for name in used & VARIABLES.keys():
                expr = expr.replace(f"${name}", VARIABLES[name])
            if "agent" in used and not variables["agent"]["multi"]:
                out.append((f"{path.name} {where}", [expr.replace("$agent", agent) for agent in AGENTS]))
            else:
                out.append((f"{path.name} {where}", [expr.replace("$agent", ".*")]))
    return out


def _returns_data(prom: PromQL, candidates: list[str]) -> bool:
    for expr in candidates:
        label_values = re.fullmatch(r"label_values\((.*), (\w+)\)", expr)
        if label_values and prom.label_values(label_values.group(2), label_values.group(1)):
            return True
        if not label_values and prom.query(expr):
            return True
    return False


def test_every_rule_and_panel_expression_returns_data(stack: Stack) -> None:
    """A panel (or rule) that can never show data is a defect: after the simulated load each expression
    parses and returns at least one sample (alert expressions: their alert's condition holds)."""
    expressions = [(where, [expr]) for where, expr in _rule_expressions()] + _panel_expressions()
    assert len(expressions) > 50
    # increase()-based rules need two samples after each change: give the last round time to be scraped
    deadline = time.monotonic() + 60
    empty = expressions
    while empty and time.monotonic() < deadline:
        empty = [(where, expr) for where, expr in empty if not _returns_data(stack.prom, expr)]
        if empty:
            time.sleep(1)
    assert not empty, "expressions without data:\n" + "\n".join(f"{w}: {e[0]}" for w, e in empty)


def test_the_prompt_cache_panel_shows_what_deferral_saved(stack: Stack) -> None:
    """Issue 16, record 000: the deferrer's compactions of its consumed prefix are all deferred, so they
    invalidate none of it, while its provider keeps serving that prefix from the cache: the fleet board's
    prompt-cache panel reads a positive cache-read rate and an invalidated rate of 0 for it."""
    def rate(rule: str) -> float | None:
        result = stack.prom.query(f'sum({rule}{{job="{SINGLE}", agent="deferrer"}})', stack.fleet_settled())
        return float(result[0]["value"][1]) if result else None

    wait_for("the deferrer's cache-read rate", lambda: (rate("job_service_agent:ctxwatch_cache_read_tokens:rate5m")
                                                       or 0) > 0, 60)
    assert rate("job_service_agent:ctxwatch_cache_invalidated_tokens:rate5m") == 0
    assert set(stack.fleet.decisions["deferrer-0"]) == {"defer"}


def test_the_coding_agent_panels_show_the_replayed_session(stack: Stack) -> None:
    """Issue 18: the fleet board's compactions by agent and version carry the version the session file
    records (the guarded fleet, which configures none, has no version label), and its tokens-before-
    compaction quantiles lie within the buckets of the session's recorded preTokens."""
    (version,) = {r["version"] for _, r in jsonl(stack.session) if isinstance(r.get("version"), str)}
    pre_tokens = claude_code_pre_tokens(stack.session)
    prom = stack.prom
    coding = f'{{job="{SINGLE}", agent="{CODING_AGENT}", kind="compact"}}'
    by_version = "job_service_agent_agent_version_kind:ctxwatch_mutations_applied:rate5m" + coding
    # read at one time, once the rules have been evaluated over the last scrape (and while the session's
    # compactions are within the 5m windows)
    settled = lambda: min(time.time(), stack.replayed_at + 30)  # noqa: E731
    wait_for("the rules over the replayed session", lambda: prom.query(by_version, settled()), 60)
    at = settled()
    counted = prom.series_values(f'sum by (agent, agent_version) (ctxwatch_mutations_total{{job="{SINGLE}", '
                                 'kind="compact", decision="patch"})', at)
    assert {dict(key).get("agent_version"): value for key, value in counted.items()
            if dict(key)["agent"] == CODING_AGENT} == {version: len(pre_tokens)}
    assert all("agent_version" not in dict(key) for key in counted if dict(key)["agent"] != CODING_AGENT)
    assert {dict(key).get("agent_version") for key in prom.series_values(by_version, at)} == {version}

    bounds = (0.0, *(semconv.TOKENS_BEFORE_HISTOGRAM.buckets or ()), float("inf"))
    low = max(b for b in bounds if b < min(pre_tokens))
    high = min(b for b in bounds if b >= max(pre_tokens))
    buckets = "job_service_agent_kind_le:ctxwatch_rewrite_tokens_before_bucket:rate5m" + coding
    for q in (0.5, 0.9):
        (sample,) = prom.query(f"histogram_quantile({q}, sum by (le) ({buckets}))", at)
        assert low <= float(sample["value"][1]) <= high, (q, sample, pre_tokens)


# Rules whose value is a level (a gauge summed over replicas): equal exactly, as are the raw counters and
# histogram buckets behind every rule. Rules over rate()/increase() are extrapolated by Prometheus per scrape
# target from that target's own sample times, so the sum over two replicas differs from one target's value
# by the extrapolation: measured here up to 7% for series half a minute old, the same events on one target
# alone differing by 3% between two scrape alignments (it shrinks as a series spans more of the 5m window).
LEVEL_RULES = ("job_service_agent_state:ctxwatch_loops:sum", "job:ctxwatch_monitor_loops_tracked:sum")
RATE_TOLERANCE = 0.10
REPLICAS = 2  # of the sharded monitor


def _first_events(rule: str) -> float:
    """What a rule may differ by when a series appears with its first event: Prometheus has no sample
    before it, so rate() cannot see that event, once per series — and sharding makes one series per
    replica of what a single monitor keeps in one. For rare events (a histogram bucket of the few applied
    rewrites losing under 15% of their literals) that event is a large share of the rate."""
    if rule.endswith(":rate5m"):
        return REPLICAS / 300  # one event per replica over the 5-minute window, per second
    return 1e-9


def _fleet_rules() -> list[str]:
    return [name for name, _ in _rule_expressions() if name.startswith("job_service_agent")]


def test_sharded_replicas_equal_a_single_monitor(stack: Stack) -> None:
    """DESIGN.md scale-out: loops routed by ctxwatch.loop.id to two replicas, one Prometheus scraping
    both: the fleet-level recording rules equal a single monitor's fed the same spans."""
    assert all(stack.sharded_loops), "the routing put every loop on one replica; the test would prove nothing"
    prom = stack.prom
    at = time.time()
    per_replica = prom.series_values(f'ctxwatch_monitor_loops_tracked{{job="{SHARDED}"}}', at, drop=("job",))
    assert sorted(per_replica.values()) == sorted(float(len(s)) for s in stack.sharded_loops)

    # the raw series behind every rule, summed over replicas: the same counts (histogram sums of d_t and r_t
    # are float sums added in another order, hence the relative 1e-9)
    raw = '{__name__=~"ctxwatch_.+", __name__!~"ctxwatch_monitor_.+", job="%s"}'
    single_raw = prom.series_values(raw % SINGLE, at, drop=("job", "instance"), by_name=True)
    sharded_raw = prom.series_values(raw % SHARDED, at, drop=("job", "instance"), by_name=True)
    assert single_raw and single_raw.keys() == sharded_raw.keys()
    for key, value in single_raw.items():
        assert sharded_raw[key] == pytest.approx(value, rel=1e-9), dict(key)

    for rule in (*LEVEL_RULES, *_fleet_rules()):
        when = at if rule in LEVEL_RULES else stack.fleet_settled()  # rates: while the fleet is in the windows
        single = prom.series_values(f'{rule}{{job="{SINGLE}"}}', when, drop=("job",))
        sharded = prom.series_values(f'{rule}{{job="{SHARDED}"}}', when, drop=("job",))
        assert single, f"{rule} has no data for the single monitor"
        assert single.keys() == sharded.keys(), rule
        for key, value in single.items():
            if rule in LEVEL_RULES:
                assert sharded[key] == value, (rule, dict(key))
            elif math.isnan(value):  # a mean over a window without events (0/0) on both
                assert math.isnan(sharded[key]), (rule, dict(key))
            elif dict(key).get("service") != CODING_SERVICE:
                assert sharded[key] == pytest.approx(value, rel=RATE_TOLERANCE, abs=_first_events(rule)), (
                    rule, dict(key))
            # the replayed session's spans arrive as one burst, paced only at its mutations: the rate a target
            # extrapolates over a burst depends on where its scrapes fall in it (13% apart was seen between
            # the two jobs), so its rate rules are only compared by their raw counters, equal above
