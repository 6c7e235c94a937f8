"""The one configuration the mixin is generated from: selectors, alert thresholds and durations, runbooks.

Every figure an alert fires on is here once; the alert expressions, their descriptions and the dashboard
panels that mention a threshold all read it from here (`rules`, `boards`). A deployment with other job
names or stricter thresholds generates its own files from `dataclasses.replace(DEFAULT, ...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Threshold:
    """An alert condition: fire when the figure is above `value` for `for_` (a Prometheus duration)."""

    value: float
    for_: str


@dataclass(frozen=True)
class Config:
    """What the generated rules, alerts and dashboards depend on (see the module docstring)."""

    # where each alert's runbook section is: this URL + the alert name in lower case (docs/operations.md)
    runbook_base_url: str = "https://github.com/ctxwatch/ctxwatch/blob/main/docs/operations.md#"
    # the scrape jobs of the monitors (a regular expression over `job`), for CtxwatchMonitorDown
    monitor_job_regex: str = "ctxwatch-monitor.*"
    # the Grafana datasource every panel names (dashboards/grafana/provisioning/datasources/prometheus.yml)
    datasource_uid: str = "ctxwatch-prometheus"
    # the monitor's address as a browser sees it, the default of the dashboards' `monitor_url` variable
    monitor_url: str = "http://localhost:8318"
    loop_contracting: Threshold = field(default_factory=lambda: Threshold(0, "2m"))
    loop_blocked: Threshold = field(default_factory=lambda: Threshold(0, "10m"))
    orphaned_tool_pairs: Threshold = field(default_factory=lambda: Threshold(0, "1m"))
    policy_edit_refused: Threshold = field(default_factory=lambda: Threshold(0, "0m"))
    pass_cap_reached: Threshold = field(default_factory=lambda: Threshold(0, "0m"))
    literal_loss_high: Threshold = field(default_factory=lambda: Threshold(0.2, "15m"))   # mean r_t, applied
    deferred_backlog: Threshold = field(default_factory=lambda: Threshold(0.25, "15m"))   # share deferred
    monitor_down: Threshold = field(default_factory=lambda: Threshold(0, "2m"))
    ingest_rejecting: Threshold = field(default_factory=lambda: Threshold(0.05, "10m"))   # share refused

    def runbook_url(self, alert: str) -> str:
        return self.runbook_base_url + alert.lower()


DEFAULT = Config()

_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}


def in_words(duration: str) -> str:
    """A Prometheus duration of one unit in words: "15m" -> "15 minutes", "1h" -> "1 hour"."""
    count, unit = int(duration[:-1]), _UNITS[duration[-1]]
    return f"{count} {unit}{'' if count == 1 else 's'}"


def percent(share: float) -> str:
    """A threshold share as the panels and descriptions print it: 0.2 -> "20%"."""
    return f"{share:.0%}"
