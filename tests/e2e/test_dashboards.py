"""The Grafana dashboards and their provisioning, checked without Grafana (issue 6).

The committed JSON equals a fresh generation by dashboards/grafana/generate.py; every dashboard is at
the current schema version, names the provisioned datasource by its uid, lays its panels out without
overlap, reads only metrics the monitor exposes or the rules record, and the per-agent board links to
the monitor's live page for one loop. (That the expressions return data is shown against a real
Prometheus in test_stack.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mixin_names import known_names, referenced_metrics
from mixin_stack import DASHBOARDS

GRAFANA = DASHBOARDS / "grafana"
BOARDS = sorted((GRAFANA / "dashboards").glob("*.json"))
SCHEMA_VERSION = 41  # Grafana 11.6 / 12


def _board(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_committed_json_equals_a_fresh_generation(tmp_path: Path) -> None:
    check = subprocess.run([sys.executable, str(GRAFANA / "generate.py"), "--check"], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stderr
    fresh = subprocess.run([sys.executable, str(GRAFANA / "generate.py"), "--out", str(tmp_path)],
                           capture_output=True, text=True, timeout=60)
    assert fresh.returncode == 0, fresh.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in BOARDS]
    for path in BOARDS:
        assert (tmp_path / path.name).read_text() == path.read_text(), path.name


def test_check_names_a_stale_dashboard(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(GRAFANA / "generate.py"), "--out", str(tmp_path)], check=True, timeout=60)
    (tmp_path / "ctxwatch-fleet.json").write_text("{}")
    check = subprocess.run([sys.executable, str(GRAFANA / "generate.py"), "--check", "--out", str(tmp_path)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 1 and "ctxwatch-fleet.json" in check.stderr


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
