"""The ctxwatch Grafana dashboards (dashboards/grafana/dashboards/*.json), built from `config.Config`.

The committed JSON is what Grafana loads (provisioning: dashboards/grafana/provisioning/); this module is
how it is written, so every panel shares one datasource reference, one set of template variables and one
layout. Panels read the recording rules of `rules` (by their names there) where one exists, select with
`promql.Selector`s over the template variables, and quote alert thresholds from the config. Template
variables: `job` (monitor deployment), `service`, `agent`, and `monitor_url`, the monitor's address as
seen from the browser (the compose stack publishes it on http://localhost:8318), for links to its live
page and JSON API.
"""

from __future__ import annotations

from typing import Any

from . import rules as r
from .config import Config, in_words, percent
from .promql import Not, Regex, Selector

SCHEMA_VERSION = 41  # Grafana 11.6 / 12.x
GRID_WIDTH = 24

FLEET = Selector.of(job=Regex("$job"), service=Regex("$service"), agent=Regex("$agent"))  # the fleet filter
ONE = Selector.of(job=Regex("$job"), agent="$agent")                                      # one agent
JOB = Selector.of(job=Regex("$job"))                                                      # one monitor deployment
REPLICAS = JOB.and_(instance=Regex("$instance"))                                          # its replicas
FIRING = Selector.of(alertname=Regex("Ctxwatch.*"), alertstate="firing")


def _datasource(config: Config) -> dict[str, str]:
    return {"type": "prometheus", "uid": config.datasource_uid}


def _variable(config: Config, name: str, label: str, query: str, *, multi: bool, include_all: bool = True,
              all_value: str | None = ".*") -> dict[str, Any]:
    current = {"selected": True, "text": ["All"], "value": ["$__all"]} if include_all else {}
    variable: dict[str, Any] = {
        "name": name, "label": label, "type": "query", "datasource": _datasource(config),
        "query": {"query": query, "refId": f"{name}-values", "qryType": 1},
        "definition": query, "refresh": 2, "sort": 1, "multi": multi, "includeAll": include_all,
        "current": current, "options": [], "hide": 0,
    }
    if include_all:
        variable["allValue"] = all_value
    return variable


def _textbox(name: str, label: str, default: str) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "textbox", "query": default, "hide": 0,
            "current": {"text": default, "value": default}, "options": [{"selected": True, "text": default,
                                                                           "value": default}]}


class Variables:
    """The template variables of the dashboards."""

    def __init__(self, config: Config) -> None:
        loops = r.LOOPS
        self.job = _variable(config, "job", "Monitor job", "label_values(ctxwatch_monitor_loops_tracked, job)",
                             multi=True)
        self.service = _variable(config, "service", "Service", f"label_values({JOB(loops)}, service)", multi=True)
        in_services = JOB.and_(service=Regex("$service"))
        self.agents = _variable(config, "agent", "Agent", f"label_values({in_services(loops)}, agent)", multi=True)
        self.one_agent = _variable(config, "agent", "Agent", f"label_values({JOB(loops)}, agent)", multi=False,
                                   include_all=False)
        self.instance = _variable(config, "instance", "Replica", f"label_values({JOB('up')}, instance)", multi=True)
        self.monitor = _textbox("monitor_url", "Monitor URL (for links)", config.monitor_url)
        self.loop = _textbox("loop", "Loop id (for the live-page link)", "")


class Board:
    """A dashboard under construction: panels are laid out left to right, then in rows."""

    def __init__(self, config: Config, uid: str, title: str, description: str, variables: list[dict[str, Any]],
                 links: list[dict[str, Any]] | None = None) -> None:
        self.datasource = _datasource(config)
        self.uid, self.title, self.description = uid, title, description
        self.variables, self.links = variables, links or []
        self.panels: list[dict[str, Any]] = []
        self._x = self._y = self._row_height = 0

    def _place(self, width: int, height: int) -> dict[str, int]:
        if self._x + width > GRID_WIDTH:
            self._x, self._y, self._row_height = 0, self._y + self._row_height, 0
        pos = {"x": self._x, "y": self._y, "w": width, "h": height}
        self._x += width
        self._row_height = max(self._row_height, height)
        return pos

    def add(self, kind: str, title: str, description: str, targets: list[tuple[str, str]], *, unit: str = "short",
            width: int = 12, height: int = 8, options: dict[str, Any] | None = None,
            links: list[dict[str, Any]] | None = None, heatmap: bool = False) -> None:
        """A panel of `kind` (timeseries, stat, heatmap, table) with (expression, legend) targets."""
        ref = [chr(ord("A") + i) for i in range(len(targets))]
        panel: dict[str, Any] = {
            "id": len(self.panels) + 1, "type": kind, "title": title, "description": description,
            "datasource": self.datasource, "gridPos": self._place(width, height),
            "targets": [{"datasource": self.datasource, "refId": r, "expr": expr, "legendFormat": legend, "range": True,
                         "instant": kind == "table", **({"format": "heatmap"} if heatmap else {})}
                        for r, (expr, legend) in zip(ref, targets, strict=True)],
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": options or {},
        }
        if links:
            panel["links"] = links
        self.panels.append(panel)

    def row(self, title: str) -> None:
        if self._x:
            self._x, self._y, self._row_height = 0, self._y + self._row_height, 0
        self.panels.append({"id": len(self.panels) + 1, "type": "row", "title": title, "collapsed": False,
                            "gridPos": {"x": 0, "y": self._y, "w": GRID_WIDTH, "h": 1}, "panels": []})
        self._y += 1

    def json(self) -> dict[str, Any]:
        return {
            "uid": self.uid, "title": self.title, "description": self.description, "tags": ["ctxwatch"],
            "editable": True, "graphTooltip": 1, "refresh": "30s", "schemaVersion": SCHEMA_VERSION,
            "time": {"from": "now-6h", "to": "now"}, "timezone": "browser", "version": 1,
            "templating": {"list": self.variables}, "links": self.links, "panels": self.panels,
            "annotations": {"list": [{
                "name": "ctxwatch alerts", "datasource": self.datasource, "enable": True, "iconColor": "red",
                "expr": FIRING("ALERTS"), "step": "60s",
                "titleFormat": "{{alertname}}", "textFormat": "{{agent}} {{instance}}", "useValueForTime": False,
            }]},
        }


def _link(title: str, url: str, tooltip: str) -> dict[str, Any]:
    return {"title": title, "url": url, "targetBlank": True, "tooltip": tooltip, "type": "link",
            "icon": "external link"}


def _dashboard_link(title: str, uid: str) -> dict[str, Any]:
    return {"title": title, "url": f"/d/{uid}?${{__url_time_range}}&${{__all_variables}}", "type": "link",
            "icon": "dashboard", "tooltip": "", "targetBlank": False}


def _quantiles(bucket_rule: str, selector: Selector) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by (le) ({selector(bucket_rule)}))", f"p{round(q * 100)}")
            for q in (0.1, 0.5, 0.9)]


def fleet(config: Config) -> Board:
    v = Variables(config)
    b = Board(config, "ctxwatch-fleet", "ctxwatch / Fleet overview",
              "Rewrite health across the fleet: decisions, contracting loops, orphans, violations, "
              "distance and literal-loss distributions, deferrals. Per-loop detail: the monitor's live page.",
              [v.job, v.service, v.agents, v.monitor],
              [_dashboard_link("Agent rewrite health", "ctxwatch-agent"),
               _dashboard_link("Monitor health", "ctxwatch-monitor"),
               _link("Monitor live page", "${monitor_url}/", "Loops, alarms and d/r charts per loop")])
    stat = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value", "graphMode": "area"}
    b.add("stat", "Loops tracked", "Loops the selected monitors hold in memory.",
          [(f"sum({FLEET(r.LOOPS)})", "loops")], width=6, height=4, options=stat)
    b.add("stat", "Loops contracting", "Loops in the contraction regime now (record 003).",
          [(f"sum({FLEET(r.LOOPS, state='contracting')})", "contracting")],
          width=6, height=4, options=stat,
          links=[_link("Alarms on the live page", "${monitor_url}/", "The monitor's list of contracting loops")])
    b.add("stat", "Mutations checked", "Mutation attempts the guards checked, per second (5m rate).",
          [(f"sum({FLEET(r.MUTATIONS)})", "mutations/s")], unit="ops", width=6, height=4, options=stat)
    b.add("stat", "Refused share", "Share of mutation attempts aborted or halted by the guards.",
          [(f"(sum({FLEET(r.MUTATIONS, decision=Regex('abort|halt'))}) or vector(0)) / sum({FLEET(r.MUTATIONS)})",
            "refused")], unit="percentunit", width=6, height=4, options=stat)
    b.row("Decisions and alarms")
    b.add("timeseries", "Mutations by decision", "patch (applied), defer, abort, halt; per second.",
          [(f"sum by (decision) ({FLEET(r.MUTATIONS)})", "{{decision}}")], unit="ops")
    b.add("timeseries", "Loops contracting by agent", "Loops in the contraction regime, per agent.",
          [(f"sum by (agent) ({FLEET(r.LOOPS, state='contracting')})", "{{agent}}")])
    b.add("timeseries", "Loops by state", "Loops by on-call status: healthy, refusing (the guard refused a rewrite, "
          "the loop went on), contracting, blocked (pass cap, or the same refusal again and again), halted, idle "
          "(no span for idle_after). docs/monitor.md, \"Loop status\".",
          [(f"sum by (status) ({FLEET(r.LOOPS_BY_STATUS)})", "{{status}}")],
          links=[_link("Blocked loops on the live page", "${monitor_url}/?state=blocked", "Loop ids, last refusals")])
    b.add("timeseries", "Loops blocked or halted by agent", "Loops that cannot rewrite (blocked: "
          f"CtxwatchLoopBlocked after {in_words(config.loop_blocked.for_)}) or that the guard halted, per agent and "
          "status.",
          [(f"sum by (agent, status) ({FLEET(r.LOOPS_BY_STATUS, status=Regex('blocked|halted'))})",
            "{{agent}} {{status}}")],
          links=[_link("Halted loops on the live page", "${monitor_url}/?state=halted", "Loop ids, last refusals")])
    b.add("timeseries", "Orphaned tool parts", "tool_use / tool_result parts rewrites would leave unpaired (record "
          "000), per second.",
          [(f"sum by (agent, side) ({FLEET(r.ORPHANS)})", "{{agent}} {{side}}")], unit="ops")
    b.add("timeseries", "Invariant violations", "Enforced findings by invariant id, per second.",
          [(f"sum by (invariant) ({FLEET(r.VIOLATIONS)})", "{{invariant}}")], unit="ops")
    b.add("timeseries", "Applied rewrites per hour by agent and kind", "Compactions, microcompactions (prune), "
          "elisions... the agents applied, per hour: for a coding-agent fleet followed by `ctxwatch watch`.",
          [(f"3600 * sum by (agent, kind) ({FLEET(r.MUTATIONS, kind=Not('append'), decision='patch')})",
            "{{agent}} {{kind}}")], width=24)
    b.add("timeseries", "Compactions per hour by agent and version", "Applied compactions per hour, by agent and "
          "the agent's version (gen_ai.agent.version: the session file's for `ctxwatch watch` and `replay --otlp`, "
          "the configured one for a guard). At most 20 versions at once, anything else is _OTHER; none: empty.",
          [(f"3600 * sum by (agent, agent_version) ({FLEET(r.REWRITES_BY_VERSION, kind='compact')})",
            "{{agent}} {{agent_version}}")])
    b.add("timeseries", "Tokens before compaction by agent", "The agent's own count of the tokens in its context "
          "when it compacted (Claude Code's compactMetadata.preTokens; Codex and Gemini CLI record none): median "
          "and 90th percentile over the last 5 minutes' compactions.",
          [(f"histogram_quantile({q}, sum by (agent, le) ({FLEET(r.TOKENS_BEFORE_BUCKETS, kind='compact')}))",
            f"{{{{agent}}}} p{round(q * 100)}") for q in (0.5, 0.9)])
    b.row("Distributions")
    b.add("heatmap", "Hash distance d_t", "Fingerprint distance between consecutive buffers (0..1), by bucket.",
          [(f"sum by (le) ({FLEET(r.HASH_DISTANCE_BUCKETS)})", "{{le}}")], heatmap=True,
          options={"calculate": False, "yAxis": {"unit": "short"}})
    b.add("heatmap", "Literal-loss rate r_t", "Share of protected literals each applied rewrite drops, by bucket.",
          [(f"sum by (le) ({FLEET(r.LOSS_RATE_BUCKETS)})", "{{le}}")], heatmap=True,
          options={"calculate": False, "yAxis": {"unit": "percentunit"}})
    b.add("timeseries", "Mean literal-loss rate of applied rewrites", "Per agent; the CtxwatchLiteralLossHigh "
          f"threshold is {percent(config.literal_loss_high.value)}.",
          [(FLEET(r.LOSS_RATE_APPLIED), "{{agent}}")], unit="percentunit")
    b.add("timeseries", "Deferred backlog", "Share of rewrites deferred to the next session boundary, per agent "
          f"(CtxwatchDeferredBacklog above {percent(config.deferred_backlog.value)}).",
          [(FLEET(r.DEFERRED_SHARE), "{{agent}}")], unit="percentunit")
    b.add("timeseries", "Prompt cache: tokens invalidated vs read, by agent", "Estimated tokens of consumed "
          "context the applied rewrites invalidated for the provider's prompt cache (re-sent, and billed, at full "
          "price), against the tokens the providers report they served from their cache; per second. A deferred "
          "or refused rewrite invalidates nothing (docs/telemetry.md, \"What rewrites cost\").",
          [(f"sum by (agent) ({FLEET(r.CACHE_INVALIDATED)})", "{{agent}} invalidated"),
           (f"sum by (agent) ({FLEET(r.CACHE_READ)})", "{{agent}} cache read")], width=24)
    b.add("table", "Firing ctxwatch alerts", "Alerts Prometheus is firing now.",
          [(FIRING("ALERTS"), "{{alertname}}")], width=24, options={"showHeader": True})
    return b


def agent(config: Config) -> Board:
    v = Variables(config)
    live = [_link("Live page: loops of ${agent}", "${monitor_url}/?agent=${agent}", "The monitor's live page"),
            _link("Live page: loop ${loop}", "${monitor_url}/?loop=${loop}", "d_t against r_t for one loop"),
            _link("Contracting loops of ${agent} (JSON)", "${monitor_url}/api/loops?agent=${agent}&state=contracting",
                  "The monitor's API: loop ids, onset cycles"),
            _link("Alarms of ${agent}", "${monitor_url}/?agent=${agent}&state=blocked",
                  "The live page: blocked loops of the agent and their last refusal")]
    b = Board(config, "ctxwatch-agent", "ctxwatch / Agent rewrite health",
              "One agent's rewrites: decisions by kind, literal loss, hash distance, findings. The loop ids are not "
              "in Prometheus (bounded labels): follow the links to the monitor's live page for one loop.",
              [v.job, v.one_agent, v.monitor, v.loop], [*live, _dashboard_link("Fleet overview", "ctxwatch-fleet")])
    stat = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value", "graphMode": "none"}
    b.add("stat", "Loops by state", "healthy / refusing / contracting / blocked / halted / idle, now "
          "(docs/monitor.md, \"Loop status\").",
          [(f"sum by (status) ({ONE(r.LOOPS_BY_STATUS)})", "{{status}}")], width=8, height=4, options=stat, links=live)
    b.add("stat", "Contraction onsets (1h)", "Loops that entered the contraction regime in the last hour.",
          [(f"sum({ONE(r.ONSETS_1H)})", "onsets")], width=8, height=4, options=stat, links=live)
    b.add("stat", "Literals lost per second", "Protected literals dropped by applied rewrites.",
          [(f"sum({ONE(r.LOST_LITERALS, decision='patch')})", "lost/s")], unit="ops", width=8, height=4, options=stat)
    b.add("timeseries", "Mutations by kind and decision", "Per second.",
          [(f"sum by (kind, decision) ({ONE(r.MUTATIONS)})", "{{kind}} {{decision}}")], unit="ops")
    b.add("timeseries", "Literal-loss rate r_t", "Quantiles over the applied rewrites, and their mean.",
          [*_quantiles(r.LOSS_RATE_BUCKETS, ONE), (ONE(r.LOSS_RATE_APPLIED), "mean (applied)")], unit="percentunit")
    b.add("timeseries", "Hash distance d_t", "Quantiles; a contracting loop's d_t shrinks below its r_t.",
          _quantiles(r.HASH_DISTANCE_BUCKETS, ONE))
    b.add("timeseries", "Findings by invariant", "Violations (enforced) and warnings (reported), per second.",
          [(f"sum by (invariant) ({ONE(r.VIOLATIONS)})", "violation {{invariant}}"),
           (f"sum by (invariant) ({ONE(r.WARNINGS)})", "warning {{invariant}}")], unit="ops")
    b.add("timeseries", "Lost literals by decision", "Literals the proposed rewrites drop, per second.",
          [(f"sum by (decision) ({ONE(r.LOST_LITERALS)})", "{{decision}}")], unit="ops")
    b.add("timeseries", "Deferrals", "Rewrites deferred to the next session boundary, per second, by kind.",
          [(f"sum by (kind) ({ONE(r.DEFERRALS)})", "{{kind}}")], unit="ops")
    return b


def _rate(by: str, counter: str, selector: Selector) -> str:
    return f"sum by ({by}) (rate({selector(counter)}[5m]))"


def monitor(config: Config) -> Board:
    v = Variables(config)
    b = Board(config, "ctxwatch-monitor", "ctxwatch / Monitor health",
              "The monitor replicas themselves: scrape health, OTLP ingest, refusals, latency, loops held, "
              "evictions, state-database writes.",
              [v.job, v.instance, v.monitor], [_dashboard_link("Fleet overview", "ctxwatch-fleet"),
                                               _link("Monitor /readyz", "${monitor_url}/readyz", "Readiness")])
    stat = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background", "graphMode": "none"}
    b.add("stat", "Replicas up", "Monitor targets Prometheus scrapes successfully.",
          [(f"sum({REPLICAS('up')})", "up")], width=6, height=4, options=stat)
    b.add("stat", "Replicas down", "Monitor targets that fail their scrape (CtxwatchMonitorDown).",
          [(f"count({REPLICAS('up')} == 0) or vector(0)", "down")], width=6, height=4, options=stat)
    b.add("stat", "Loops tracked", "Loops held in memory, all replicas.",
          [(f"sum({REPLICAS('ctxwatch_monitor_loops_tracked')})", "loops")], width=6, height=4, options=stat)
    b.add("stat", "In-flight ingest requests", "Admitted and not yet answered (429 past --max-inflight).",
          [(f"sum({REPLICAS('ctxwatch_monitor_inflight_requests')})", "in flight")], width=6, height=4, options=stat)
    b.add("timeseries", "Spans accepted", "Mutation spans accepted per second, per replica.",
          [(REPLICAS(r.SPANS_ACCEPTED), "{{instance}}")], unit="ops")
    b.add("timeseries", "Spans rejected, ignored, undecodable", "Rejected: invalid ctxwatch attributes "
          "(partial_success); ignored: not mutation spans; decode errors: requests answered 400.",
          [(_rate("instance", "ctxwatch_monitor_spans_rejected_total", REPLICAS), "rejected {{instance}}"),
           (_rate("instance", "ctxwatch_monitor_spans_ignored_total", REPLICAS), "ignored {{instance}}"),
           (_rate("instance, encoding", "ctxwatch_monitor_decode_errors_total", REPLICAS),
            "undecodable {{encoding}} {{instance}}")], unit="ops")
    b.add("timeseries", "Requests by handler and status", "Per second.",
          [(_rate("handler, code", "ctxwatch_monitor_requests_total", REPLICAS), "{{handler}} {{code}}")],
          unit="reqps")
    b.add("timeseries", "Refused ingest", "Share of OTLP requests answered non-2xx, and of spans rejected "
          f"(CtxwatchIngestRejecting above {percent(config.ingest_rejecting.value)}).",
          [(REPLICAS(r.INGEST_ERRORS), "requests {{instance}}"), (REPLICAS(r.SPANS_REJECTED), "spans {{instance}}")],
          unit="percentunit")
    b.add("timeseries", "Request latency p99", "By handler.",
          [(f"histogram_quantile(0.99, sum by (handler, le) ({JOB(r.REQUEST_DURATION_BUCKETS)}))", "{{handler}}")],
          unit="s")
    b.add("timeseries", "State database write p99",
          "Time to commit one batch of requests' changes (SQLite group commit; one observation per batch).",
          [(f"histogram_quantile(0.99, sum by (le) ({JOB(r.DB_WRITE_BUCKETS)}))", "p99")], unit="s")
    b.add("timeseries", "Loops tracked per replica", "With N replicas each holds the loops routed to it.",
          [(REPLICAS("ctxwatch_monitor_loops_tracked"), "{{instance}}")])
    b.add("timeseries", "Loop evictions", "Loops forgotten: ttl (not seen within the TTL) or cap (past "
          "--max-loops, least recently seen first), per second.",
          [(_rate("reason", "ctxwatch_monitor_loop_evictions_total", REPLICAS), "{{reason}}")], unit="ops")
    return b


BOARDS = {"ctxwatch-fleet.json": fleet, "ctxwatch-agent.json": agent, "ctxwatch-monitor.json": monitor}
