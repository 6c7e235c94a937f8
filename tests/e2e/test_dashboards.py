"""The Grafana dashboards and their provisioning, checked without Grafana (issue 6); the mixin they are
generated from with the rules and alerts (issue 17).

The committed rules, alerts and dashboards equal a fresh generation by dashboards/generate.py, and a
changed threshold, job selector or runbook URL in the mixin's config reaches every file that names it;
every dashboard is at
the current schema version, names the provisioned datasource by its uid, lays its panels out without
overlap, reads only metrics the monitor exposes or the rules record, and the per-agent board links to
the monitor's live page for one loop. (That the expressions return data is shown against a real
Prometheus in test_stack.py.)
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from mixin_names import known_names, referenced_metrics
from mixin_stack import DASHBOARDS, RULE_FILES

GRAFANA = DASHBOARDS / "grafana"
BOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
GENERATE = DASHBOARDS / "generate.py"
SCHEMA_VERSION = 41  # Grafana 11.6 / 12


def _board(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(GENERATE), *args], capture_output=True, text=True, timeout=60)


def test_committed_files_equal_a_fresh_generation(tmp_path: Path) -> None:
    check = _generate("--check")
    assert check.returncode == 0, check.stderr
    fresh = _generate("--out", str(tmp_path))
    assert fresh.returncode == 0, fresh.stderr
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = [*(p.relative_to(DASHBOARDS) for p in BOARDS), *(p.relative_to(DASHBOARDS) for p in RULE_FILES)]
    assert generated == sorted(committed)
    for name in generated:
        assert (tmp_path / name).read_text() == (DASHBOARDS / name).read_text(), name


@pytest.mark.parametrize("stale", ["grafana/dashboards/ctxwatch-fleet.json",
                                   "prometheus/rules/ctxwatch-alerts.rules.yml"])
def test_check_names_a_stale_file(tmp_path: Path, stale: str) -> None:
    assert _generate("--out", str(tmp_path)).returncode == 0
    (tmp_path / stale).write_text("{}")
    check = _generate("--check", "--out", str(tmp_path))
    assert check.returncode == 1 and stale in check.stderr


@pytest.fixture(scope="module")
def mixin() -> Any:
    """dashboards/generate.py, imported (it puts the mixin package beside it on the path)."""
    sys.path.insert(0, str(DASHBOARDS))
    try:
        yield importlib.import_module("generate")
    finally:
        sys.path.remove(str(DASHBOARDS))


def test_one_config_change_reaches_the_rules_alerts_and_panels(mixin: Any) -> None:
    """The mixin convention: a threshold, the monitors' job selector and the runbook URL are set once."""
    from mixin.config import DEFAULT, Threshold

    default = mixin.render()
    changed = mixin.render(replace(DEFAULT, literal_loss_high=Threshold(0.35, "30m"), monitor_job_regex="agents-mon.*",
                                   runbook_base_url="https://runbooks.example/ctxwatch#"))
    alerts = {r["alert"]: r for g in yaml.safe_load(changed["prometheus/rules/ctxwatch-alerts.rules.yml"])["groups"]
              for r in g["rules"]}
    loss = alerts["CtxwatchLiteralLossHigh"]
    assert loss["expr"].endswith("> 0.35") and loss["for"] == "30m"
    assert "Above 35% for 30 minutes" in loss["annotations"]["description"]
    assert 'up{job=~"agents-mon.*"} == 0' in alerts["CtxwatchMonitorDown"]["expr"]
    assert all(r["annotations"]["runbook_url"] == "https://runbooks.example/ctxwatch#" + name.lower()
               for name, r in alerts.items())
    fleet = changed["grafana/dashboards/ctxwatch-fleet.json"]
    assert "threshold is 35%" in fleet and "threshold is 20%" in default["grafana/dashboards/ctxwatch-fleet.json"]
    assert changed["prometheus/rules/ctxwatch-recording.rules.yml"] == default[
        "prometheus/rules/ctxwatch-recording.rules.yml"]


def test_every_selector_is_balanced(mixin: Any) -> None:
    """No expression of the generated files has an unbalanced brace, bracket or parenthesis."""
    exprs = [t["expr"] for name, text in mixin.render().items() if name.endswith(".json")
             for p in json.loads(text)["panels"] for t in p.get("targets", [])]
    exprs += [r["expr"] for name, text in mixin.render().items() if name.endswith(".yml")
              for g in yaml.safe_load(text)["groups"] for r in g["rules"]]
    for expr in exprs:
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
        depth = {"{": 0, "[": 0, "(": 0}
        for ch in bare:
            if ch in "{[(":
                depth[ch] += 1
            elif ch in "}])":
                depth["{[("["}])".index(ch)]] -= 1
                assert min(depth.values()) >= 0, expr
        assert set(depth.values()) == {0}, expr


def test_provisioning_matches_the_dashboards() -> None:
    datasource = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    [source] = datasource["datasources"]
    assert source["type"] == "prometheus" and source["uid"] == "ctxwatch-prometheus"
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "ctxwatch.yml").read_text())
    assert provider["providers"][0]["type"] == "file"
    uids = set()
    for path in BOARDS:
        board = _board(path)
        uids.add(board["uid"])
        assert board["schemaVersion"] == SCHEMA_VERSION
        for panel in board["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == source["uid"], (path.name, panel["title"])
                assert all(t["datasource"]["uid"] == source["uid"] for t in panel["targets"])
        for variable in board["templating"]["list"]:
            if variable["type"] == "query":
                assert variable["datasource"]["uid"] == source["uid"]
    assert uids == {"ctxwatch-fleet", "ctxwatch-agent", "ctxwatch-monitor"}


@pytest.mark.parametrize("path", BOARDS, ids=[p.stem for p in BOARDS])
def test_panels_are_laid_out_without_overlap(path: Path) -> None:
    cells: dict[tuple[int, int], str] = {}
    ids = set()
    for panel in _board(path)["panels"]:
        ids.add(panel["id"])
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]
    assert len(ids) == len(_board(path)["panels"])


def test_panels_read_only_known_metrics() -> None:
    known = known_names()
    for path in BOARDS:
        board = _board(path)
        exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
        exprs += [v["definition"].removeprefix("label_values(").rsplit(",", 1)[0]
                  for v in board["templating"]["list"] if v["type"] == "query"]
        for expr in exprs:
            unknown = referenced_metrics(expr) - known
            assert not unknown, f"{path.name}: {expr} reads unknown metrics {unknown}"


def test_agent_board_links_to_the_live_page_for_one_loop() -> None:
    board = _board(GRAFANA / "dashboards" / "ctxwatch-agent.json")
    urls = [link["url"] for link in board["links"]]
    assert "${monitor_url}/?loop=${loop}" in urls
    assert "${monitor_url}/api/loops?agent=${agent}&state=contracting" in urls
    names = {v["name"] for v in board["templating"]["list"]}
    assert {"monitor_url", "loop", "agent", "job"} <= names
