"""The shipped Prometheus rules and Alertmanager config, checked by the real tools (issue 6).

`promtool check rules` is clean, `promtool test rules` passes (every alert firing and not firing,
dashboards/prometheus/tests/), `amtool check-config` accepts the Alertmanager config, every alert the
issue names exists with a severity and its three annotations, and every runbook_url points at a
section of docs/operations.md. Every metric a rule reads is one the monitor exposes (its families
are instantiated here), so a rename in the monitor fails this test.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from mixin_names import known_names, referenced_metrics, shipped_rules
from mixin_stack import ALERTMANAGER_CONFIG, DASHBOARDS, REPO, RULE_FILES

PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="needs Debian's prometheus package (promtool)")
ISSUE_ALERTS = {"CtxwatchLoopContracting", "CtxwatchOrphanedToolPairs", "CtxwatchPolicyEditRefused",
                "CtxwatchPassCapReached", "CtxwatchLiteralLossHigh", "CtxwatchDeferredBacklog",
                "CtxwatchMonitorDown", "CtxwatchIngestRejecting"}
RUNBOOK_BASE = "https://github.com/ctxwatch/ctxwatch/blob/main/docs/operations.md#"


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)


@needs_promtool
def test_promtool_check_rules_is_clean() -> None:
    result = _run(PROMTOOL, "check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    """dashboards/prometheus/tests/: each alert firing and not firing, with the shipped `for:` durations."""
    tests = sorted((DASHBOARDS / "prometheus" / "tests").glob("*.test.yml"))
    assert tests
    result = _run(PROMTOOL, "test", "rules", *map(str, tests))
    assert result.returncode == 0, result.stdout + result.stderr
    tested = set(re.findall(r"alertname: (\w+)", "".join(p.read_text() for p in tests)))
    assert tested >= ISSUE_ALERTS


@pytest.mark.skipif(not AMTOOL, reason="needs Debian's prometheus-alertmanager package (amtool)")
def test_amtool_accepts_the_alertmanager_config() -> None:
    result = _run(AMTOOL, "check-config", str(ALERTMANAGER_CONFIG))
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout + result.stderr


def test_every_alert_has_severity_annotations_and_a_runbook_section() -> None:
    alerts = {rule["alert"]: rule for rule in shipped_rules() if "alert" in rule}
    assert set(alerts) >= ISSUE_ALERTS
    runbooks = (REPO / "docs" / "operations.md").read_text()
    sections = {re.sub(r"[^a-z0-9-]", "", h.strip().lower().replace(" ", "-"))
                for h in re.findall(r"^#{2,3} (.+)$", runbooks, flags=re.M)}
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"critical", "warning"}, name
        assert {"summary", "description", "runbook_url"} <= rule["annotations"].keys(), name
        url = rule["annotations"]["runbook_url"]
        assert url == RUNBOOK_BASE + name.lower(), (name, url)
        assert name.lower() in sections, f"docs/operations.md has no section '## {name}'"


def test_rules_read_only_metrics_the_monitor_exposes() -> None:
    """Keeps the mixin in step with the monitor's metric names (issue 5)."""
    known = known_names()
    for rule in shipped_rules():
        unknown = referenced_metrics(rule["expr"]) - known
        assert not unknown, f"{rule.get('record') or rule.get('alert')} reads unknown metrics {unknown}"
