"""The ctxwatch monitoring mixin: Prometheus recording rules, alerts and Grafana dashboards generated from
one configuration (`config.Config`), as the monitoring-mixin convention does.

`config` holds what an operator tunes (label selectors, alert thresholds and durations, the runbook base
URL, the datasource); `promql` renders selectors from it; `rules` writes the recording rules and alerts;
`boards` the dashboards. `dashboards/generate.py` writes (or `--check`s) every generated file.
"""
