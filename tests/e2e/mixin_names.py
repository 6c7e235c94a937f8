"""What the mixin's expressions read: the shipped rules, the metric names in a PromQL expression, and
every series name the monitor can expose (from its own metric families, so a rename there shows here)."""

from __future__ import annotations

import re
from typing import Any

import yaml
from mixin_stack import RULE_FILES

from ctxwatch_monitor.instruments import Instruments
from ctxwatch_monitor.metric_store import Histogram

# PromQL words that look like metric names once labels, strings, ranges and numbers are removed
PROMQL_WORDS = {"sum", "rate", "increase", "unless", "offset", "and", "or", "absent", "histogram_quantile", "count",
                "vector", "label_values"}
PROMETHEUS_SERIES = {"up", "ALERTS"}


def shipped_rules() -> list[dict[str, Any]]:
    """Every rule of the shipped rule files."""
    return [rule for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]
            for rule in group["rules"]]


def recorded_names() -> set[str]:
    return {rule["record"] for rule in shipped_rules() if "record" in rule}


def monitor_metric_names() -> set[str]:
    """Every series name the monitor's /metrics can carry (histograms with their three suffixes)."""
    names = set()
    for family in Instruments(label_cap=10).metric_set.families.values():
        suffixes = ("_bucket", "_sum", "_count") if isinstance(family, Histogram) else ("",)
        names.update(family.name + suffix for suffix in suffixes)
    return names


def known_names() -> set[str]:
    """What an expression of the mixin may read."""
    return monitor_metric_names() | recorded_names() | PROMETHEUS_SERIES


def referenced_metrics(expr: str) -> set[str]:
    """Metric and recording-rule names an expression reads (label matchers, strings, ranges, numbers and
    grouping clauses removed)."""
    bare = re.sub(r'\{[^}]*\}|"[^"]*"|\[[^\]]*\]|\b\d+(\.\d+)?[smhdwy]?\b', " ", expr)
    bare = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    return set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)) - PROMQL_WORDS
