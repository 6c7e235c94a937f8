"""Generate the ctxwatch Grafana dashboards (dashboards/grafana/dashboards/*.json) from this file.

The committed JSON is what Grafana loads (provisioning: dashboards/grafana/provisioning/); this script
is how it is written, so every panel shares one datasource reference, one set of template variables
and one layout. Run ``python dashboards/grafana/generate.py`` after editing; ``--check`` exits 1 and
names the files that differ from a fresh generation (tests/e2e/test_dashboards.py runs it).

Panels read the recording rules of dashboards/prometheus/rules/ where one exists. Template variables:
`job` (monitor deployment), `service`, `agent`, and `monitor_url`, the monitor's address as seen
from the browser (the compose stack publishes it on http://localhost:8318), for links to its live
page and JSON API.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "ctxwatch-prometheus"}  # provisioning/datasources/prometheus.yml
SCHEMA_VERSION = 41  # Grafana 11.6 / 12.x
MONITOR_URL = "http://localhost:8318"
GRID_WIDTH = 24

F = '{job=~"$job", service=~"$service", agent=~"$agent"'  # the fleet filter; close with "}" or extra matchers
ONE = '{job=~"$job", agent="$agent"'                      # one agent
J = '{job=~"$job"'                                         # one monitor deployment


def _variable(name: str, label: str, query: str, *, multi: bool, include_all: bool = True,
              all_value: str | None = ".*") -> dict[str, Any]:
    current = {"selected": True, "text": ["All"], "value": ["$__all"]} if include_all else {}
    variable: dict[str, Any] = {
        "name": name, "label": label, "type": "query", "datasource": DATASOURCE,
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


JOB = _variable("job", "Monitor job", "label_values(ctxwatch_monitor_loops_tracked, job)", multi=True)
SERVICE = _variable("service", "Service", 'label_values(job_service_agent_state:ctxwatch_loops:sum{job=~"$job"}, '
                    "service)", multi=True)
AGENTS = _variable("agent", "Agent", 'label_values(job_service_agent_state:ctxwatch_loops:sum{job=~"$job", '
                   'service=~"$service"}, agent)', multi=True)
ONE_AGENT = _variable("agent", "Agent", 'label_values(job_service_agent_state:ctxwatch_loops:sum{job=~"$job"}, agent)',
                      multi=False, include_all=False)
INSTANCE = _variable("instance", "Replica", 'label_values(up{job=~"$job"}, instance)', multi=True)
MONITOR = _textbox("monitor_url", "Monitor URL (for links)", MONITOR_URL)
LOOP = _textbox("loop", "Loop id (for the live-page link)", "")


class Board:
    """A dashboard under construction: panels are laid out left to right, then in rows."""

    def __init__(self, uid: str, title: str, description: str, variables: list[dict[str, Any]],
                 links: list[dict[str, Any]] | None = None) -> None:
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
            "datasource": DATASOURCE, "gridPos": self._place(width, height),
            "targets": [{"datasource": DATASOURCE, "refId": r, "expr": expr, "legendFormat": legend, "range": True,
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
                "name": "ctxwatch alerts", "datasource": DATASOURCE, "enable": True, "iconColor": "red",
                "expr": 'ALERTS{alertname=~"Ctxwatch.*", alertstate="firing"}', "step": "60s",
                "titleFormat": "{{alertname}}", "textFormat": "{{agent}} {{instance}}", "useValueForTime": False,
            }]},
        }


def _link(title: str, url: str, tooltip: str) -> dict[str, Any]:
    return {"title": title, "url": url, "targetBlank": True, "tooltip": tooltip, "type": "link",
            "icon": "external link"}


def _dashboard_link(title: str, uid: str) -> dict[str, Any]:
    return {"title": title, "url": f"/d/{uid}?${{__url_time_range}}&${{__all_variables}}", "type": "link",
            "icon": "dashboard", "tooltip": "", "targetBlank": False}


def _quantiles(bucket_rule: str, selector: str) -> list[tuple[str, str]]:
    return [(f"histogram_quantile({q}, sum by (le) ({bucket_rule}{selector}))", f"p{round(q * 100)}")
            for q in (0.1, 0.5, 0.9)]


def fleet() -> Board:
    b = Board("ctxwatch-fleet", "ctxwatch / Fleet overview",
              "Rewrite health across the fleet: decisions, contracting loops, orphans, violations, "
              "distance and literal-loss distributions, deferrals. Per-loop detail: the monitor's live page.",
              [JOB, SERVICE, AGENTS, MONITOR],
              [_dashboard_link("Agent rewrite health", "ctxwatch-agent"),
               _dashboard_link("Monitor health", "ctxwatch-monitor"),
               _link("Monitor live page", "${monitor_url}/", "Loops, alarms and d/r charts per loop")])
    stat = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value", "graphMode": "area"}
    b.add("stat", "Loops tracked", "Loops the selected monitors hold in memory.",
          [(f"sum(job_service_agent_state:ctxwatch_loops:sum{F}}})", "loops")], width=6, height=4, options=stat)
    b.add("stat", "Loops contracting", "Loops in the contraction regime now (record 003).",
          [(f'sum(job_service_agent_state:ctxwatch_loops:sum{F}, state="contracting"}})', "contracting")],
          width=6, height=4, options=stat,
          links=[_link("Alarms on the live page", "${monitor_url}/", "The monitor's list of contracting loops")])
    b.add("stat", "Mutations checked", "Mutation attempts the guards checked, per second (5m rate).",
          [(f"sum(job_service_agent_kind_decision:ctxwatch_mutations:rate5m{F}}})", "mutations/s")],
          unit="ops", width=6, height=4, options=stat)
    mutations = "job_service_agent_kind_decision:ctxwatch_mutations:rate5m"
    b.add("stat", "Refused share", "Share of mutation attempts aborted or halted by the guards.",
          [(f'(sum({mutations}{F}, decision=~"abort|halt"}}) or vector(0)) / sum({mutations}{F}}})', "refused")],
          unit="percentunit", width=6, height=4, options=stat)
    b.row("Decisions and alarms")
    b.add("timeseries", "Mutations by decision", "patch (applied), defer, abort, halt; per second.",
          [(f"sum by (decision) (job_service_agent_kind_decision:ctxwatch_mutations:rate5m{F}}})", "{{decision}}")],
          unit="ops")
    b.add("timeseries", "Loops contracting by agent", "Loops in the contraction regime, per agent.",
          [(f'sum by (agent) (job_service_agent_state:ctxwatch_loops:sum{F}, state="contracting"}})', "{{agent}}")])
    status = "job_service_agent_status:ctxwatch_loops_by_status:sum"
    b.add("timeseries", "Loops by state", "Loops by on-call status: healthy, refusing (the guard refused a rewrite, "
          "the loop went on), contracting, blocked (pass cap, or the same refusal again and again), halted, idle "
          "(no span for idle_after). docs/monitor.md, \"Loop status\".",
          [(f"sum by (status) ({status}{F}}})", "{{status}}")],
          links=[_link("Blocked loops on the live page", "${monitor_url}/?state=blocked", "Loop ids, last refusals")])
    b.add("timeseries", "Loops blocked or halted by agent", "Loops that cannot rewrite (blocked: "
          "CtxwatchLoopBlocked after 10 minutes) or that the guard halted, per agent and status.",
          [(f'sum by (agent, status) ({status}{F}, status=~"blocked|halted"}})', "{{agent}} {{status}}")],
          links=[_link("Halted loops on the live page", "${monitor_url}/?state=halted", "Loop ids, last refusals")])
    b.add("timeseries", "Orphaned tool parts", "tool_use / tool_result parts rewrites would leave unpaired (record "
          "000), per second.",
          [(f"sum by (agent, side) (job_service_agent_side:ctxwatch_orphaned_tool_parts:rate5m{F}}})",
            "{{agent}} {{side}}")], unit="ops")
    b.add("timeseries", "Invariant violations", "Enforced findings by invariant id, per second.",
          [(f"sum by (invariant) (job_service_agent_invariant_decision:ctxwatch_invariant_violations:rate5m{F}}})",
            "{{invariant}}")], unit="ops")
    b.row("Distributions")
    b.add("heatmap", "Hash distance d_t", "Fingerprint distance between consecutive buffers (0..1), by bucket.",
          [(f"sum by (le) (job_service_agent_decision_le:ctxwatch_rewrite_hash_distance_bucket:rate5m{F}}})",
            "{{le}}")], heatmap=True, options={"calculate": False, "yAxis": {"unit": "short"}})
    b.add("heatmap", "Literal-loss rate r_t", "Share of protected literals each applied rewrite drops, by bucket.",
          [(f"sum by (le) (job_service_agent_decision_le:ctxwatch_rewrite_literal_loss_rate_bucket:rate5m{F}}})",
            "{{le}}")], heatmap=True, options={"calculate": False, "yAxis": {"unit": "percentunit"}})
    b.add("timeseries", "Mean literal-loss rate of applied rewrites", "Per agent; the CtxwatchLiteralLossHigh "
          "threshold is 20%.",
          [(f"job_service_agent:ctxwatch_rewrite_literal_loss_rate_applied:mean5m{F}}}", "{{agent}}")],
          unit="percentunit")
    b.add("timeseries", "Deferred backlog", "Share of rewrites deferred to the next session boundary, per agent "
          "(CtxwatchDeferredBacklog above 25%).",
          [(f"job_service_agent:ctxwatch_deferrals_per_rewrite:ratio_rate15m{F}}}", "{{agent}}")],
          unit="percentunit")
    b.add("table", "Firing ctxwatch alerts", "Alerts Prometheus is firing now.",
          [('ALERTS{alertname=~"Ctxwatch.*", alertstate="firing"}', "{{alertname}}")], width=24,
          options={"showHeader": True})
    return b


def agent() -> Board:
    live = [_link("Live page: loops of ${agent}", "${monitor_url}/?agent=${agent}", "The monitor's live page"),
            _link("Live page: loop ${loop}", "${monitor_url}/?loop=${loop}", "d_t against r_t for one loop"),
            _link("Contracting loops of ${agent} (JSON)", "${monitor_url}/api/loops?agent=${agent}&state=contracting",
                  "The monitor's API: loop ids, onset cycles"),
            _link("Alarms of ${agent}", "${monitor_url}/?agent=${agent}&state=blocked",
                  "The live page: blocked loops of the agent and their last refusal")]
    b = Board("ctxwatch-agent", "ctxwatch / Agent rewrite health",
              "One agent's rewrites: decisions by kind, literal loss, hash distance, findings. The loop ids are not "
              "in Prometheus (bounded labels): follow the links to the monitor's live page for one loop.",
              [JOB, ONE_AGENT, MONITOR, LOOP], [*live, _dashboard_link("Fleet overview", "ctxwatch-fleet")])
    stat = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value", "graphMode": "none"}
    b.add("stat", "Loops by state", "healthy / refusing / contracting / blocked / halted / idle, now "
          "(docs/monitor.md, \"Loop status\").",
          [(f"sum by (status) (job_service_agent_status:ctxwatch_loops_by_status:sum{ONE}}})", "{{status}}")],
          width=8, height=4, options=stat, links=live)
    b.add("stat", "Contraction onsets (1h)", "Loops that entered the contraction regime in the last hour.",
          [(f"sum(job_service_agent:ctxwatch_contraction_onsets:increase1h{ONE}}})", "onsets")],
          width=8, height=4, options=stat, links=live)
    b.add("stat", "Literals lost per second", "Protected literals dropped by applied rewrites.",
          [(f'sum(job_service_agent_decision:ctxwatch_lost_literals:rate5m{ONE}, decision="patch"}})', "lost/s")],
          unit="ops", width=8, height=4, options=stat)
    b.add("timeseries", "Mutations by kind and decision", "Per second.",
          [(f"sum by (kind, decision) (job_service_agent_kind_decision:ctxwatch_mutations:rate5m{ONE}}})",
            "{{kind}} {{decision}}")], unit="ops")
    b.add("timeseries", "Literal-loss rate r_t", "Quantiles over the applied rewrites, and their mean.",
          [*_quantiles("job_service_agent_decision_le:ctxwatch_rewrite_literal_loss_rate_bucket:rate5m", ONE + "}"),
           (f"job_service_agent:ctxwatch_rewrite_literal_loss_rate_applied:mean5m{ONE}}}", "mean (applied)")],
          unit="percentunit")
    b.add("timeseries", "Hash distance d_t", "Quantiles; a contracting loop's d_t shrinks below its r_t.",
          _quantiles("job_service_agent_decision_le:ctxwatch_rewrite_hash_distance_bucket:rate5m", ONE + "}"))
    b.add("timeseries", "Findings by invariant", "Violations (enforced) and warnings (reported), per second.",
          [(f"sum by (invariant) (job_service_agent_invariant_decision:ctxwatch_invariant_violations:rate5m{ONE}}})",
            "violation {{invariant}}"),
           (f"sum by (invariant) (job_service_agent_invariant:ctxwatch_invariant_warnings:rate5m{ONE}}})",
            "warning {{invariant}}")], unit="ops")
    b.add("timeseries", "Lost literals by decision", "Literals the proposed rewrites drop, per second.",
          [(f"sum by (decision) (job_service_agent_decision:ctxwatch_lost_literals:rate5m{ONE}}})", "{{decision}}")],
          unit="ops")
    b.add("timeseries", "Deferrals", "Rewrites deferred to the next session boundary, per second, by kind.",
          [(f"sum by (kind) (job_service_agent_kind:ctxwatch_deferrals:rate5m{ONE}}})", "{{kind}}")], unit="ops")
    return b


def monitor() -> Board:
    b = Board("ctxwatch-monitor", "ctxwatch / Monitor health",
              "The monitor replicas themselves: scrape health, OTLP ingest, refusals, latency, loops held, "
              "evictions, state-database writes.",
              [JOB, INSTANCE, MONITOR], [_dashboard_link("Fleet overview", "ctxwatch-fleet"),
                                         _link("Monitor /readyz", "${monitor_url}/readyz", "Readiness")])
    J_I = J + ', instance=~"$instance"'
    stat = {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background", "graphMode": "none"}
    b.add("stat", "Replicas up", "Monitor targets Prometheus scrapes successfully.",
          [(f"sum(up{J_I}}})", "up")], width=6, height=4, options=stat)
    b.add("stat", "Replicas down", "Monitor targets that fail their scrape (CtxwatchMonitorDown).",
          [(f"count(up{J_I}}} == 0) or vector(0)", "down")], width=6, height=4, options=stat)
    b.add("stat", "Loops tracked", "Loops held in memory, all replicas.",
          [(f"sum(ctxwatch_monitor_loops_tracked{J_I}}})", "loops")], width=6, height=4, options=stat)
    b.add("stat", "In-flight ingest requests", "Admitted and not yet answered (429 past --max-inflight).",
          [(f"sum(ctxwatch_monitor_inflight_requests{J_I}}})", "in flight")], width=6, height=4, options=stat)
    b.add("timeseries", "Spans accepted", "Mutation spans accepted per second, per replica.",
          [(f"job_instance:ctxwatch_monitor_spans_accepted:rate5m{J_I}}}", "{{instance}}")], unit="ops")
    b.add("timeseries", "Spans rejected, ignored, undecodable", "Rejected: invalid ctxwatch attributes "
          "(partial_success); ignored: not mutation spans; decode errors: requests answered 400.",
          [(f"sum by (instance) (rate(ctxwatch_monitor_spans_rejected_total{J_I}}}[5m]))", "rejected {{instance}}"),
           (f"sum by (instance) (rate(ctxwatch_monitor_spans_ignored_total{J_I}}}[5m]))", "ignored {{instance}}"),
           (f"sum by (instance, encoding) (rate(ctxwatch_monitor_decode_errors_total{J_I}}}[5m]))",
            "undecodable {{encoding}} {{instance}}")], unit="ops")
    b.add("timeseries", "Requests by handler and status", "Per second.",
          [(f"sum by (handler, code) (rate(ctxwatch_monitor_requests_total{J_I}}}[5m]))", "{{handler}} {{code}}")],
          unit="reqps")
    b.add("timeseries", "Refused ingest", "Share of OTLP requests answered non-2xx, and of spans rejected "
          "(CtxwatchIngestRejecting above 5%).",
          [(f"job_instance:ctxwatch_monitor_ingest_errors:ratio_rate5m{J_I}}}", "requests {{instance}}"),
           (f"job_instance:ctxwatch_monitor_spans_rejected:ratio_rate5m{J_I}}}", "spans {{instance}}")],
          unit="percentunit")
    b.add("timeseries", "Request latency p99", "By handler.",
          [("histogram_quantile(0.99, sum by (handler, le) "
            f"(job_handler_le:ctxwatch_monitor_request_duration_seconds_bucket:rate5m{J}}}))", "{{handler}}")],
          unit="s")
    b.add("timeseries", "State database write p99",
          "Time to commit one batch of requests' changes (SQLite group commit; one observation per batch).",
          [(f"histogram_quantile(0.99, sum by (le) (job_le:ctxwatch_monitor_db_write_duration_seconds_bucket:rate5m"
            f"{J}}}))", "p99")], unit="s")
    b.add("timeseries", "Loops tracked per replica", "With N replicas each holds the loops routed to it.",
          [(f"ctxwatch_monitor_loops_tracked{J_I}}}", "{{instance}}")])
    b.add("timeseries", "Loop evictions", "Loops forgotten: ttl (not seen within the TTL) or cap (past "
          "--max-loops, least recently seen first), per second.",
          [(f"sum by (reason) (rate(ctxwatch_monitor_loop_evictions_total{J_I}}}[5m]))", "{{reason}}")],
          unit="ops")
    return b


BOARDS = {"ctxwatch-fleet.json": fleet, "ctxwatch-agent.json": agent, "ctxwatch-monitor.json": monitor}


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: json.dumps(build().json(), indent=2, sort_keys=True) + "\n" for name, build in BOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) the ctxwatch Grafana dashboards.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed JSON differs")
    parser.add_argument("--out", type=Path, default=OUT, help=f"directory (default {OUT})")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render().items():
        path = args.out / name
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(name)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python {Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
