"""docker-compose.yml, parsed by a real compose implementation, and every file and target it wires (issue 6).

This machine has no Docker engine, so the stack is not run here: Debian's `docker-compose` (v1, which
implements the compose specification with profiles) parses and resolves the file with the `fleet`
profile on, and the test follows every wire: each bind-mounted file exists, the Prometheus config the
container reads scrapes the monitor service on the monitor's port (and passes `promtool check
config`), Grafana's datasource points at the Prometheus service, the collector exports mutation spans
to the monitor (and, in the fleet profile, load-balances on ctxwatch.loop.id over both replicas),
Alertmanager delivers to the receiver service, and the demo fleets send to a collector.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from mixin_stack import REPO

from ctxwatch import semconv
from ctxwatch_monitor.config import MonitorConfig

COMPOSE = shutil.which("docker-compose")
pytestmark = pytest.mark.skipif(not COMPOSE, reason="needs Debian's docker-compose package (compose v1)")
FLEET = {"monitor-replica-1", "monitor-replica-2", "otel-collector-fleet", "demo-fleet"}
MONITOR_PORT = MonitorConfig().port  # 4318, the port the image's monitor listens on (CTXWATCH_MONITOR_PORT)


@cache
def compose() -> dict[str, Any]:
    """`docker-compose config` of the file with every profile on: the resolved model."""
    result = subprocess.run([COMPOSE or "docker-compose", "-f", str(REPO / "docker-compose.yml"), "--profile", "fleet",
                             "config"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def services() -> dict[str, Any]:
    return compose()["services"]


def _mounts(service: str) -> list[tuple[str, str]]:
    """(host path or volume name, container path) of a service's volumes."""
    out = []
    for volume in services()[service].get("volumes", []):
        source, target = volume.split(":")[:2] if isinstance(volume, str) else (volume["source"], volume["target"])
        out.append((source, target))
    return out


def host_path(service: str, container_path: str) -> Path:
    """The repository file a service sees at `container_path` through its bind mounts."""
    for source, target in _mounts(service):
        if source.startswith("/") and (container_path == target or container_path.startswith(target + "/")):
            return Path(source) / container_path[len(target):].lstrip("/")
    raise AssertionError(f"{service} mounts nothing at {container_path}")


def _container_ports(service: str) -> set[int]:
    return {int(p["target"]) for p in services()[service].get("ports", [])}


def _hostport(address: str) -> tuple[str, int]:
    parts = urlsplit(address if "://" in address else "//" + address)
    assert parts.hostname and parts.port, address
    return parts.hostname, parts.port


def _collector_config(service: str) -> dict[str, Any]:
    [config_arg] = [a for a in services()[service]["command"] if a.startswith("--config=")]
    return yaml.safe_load(host_path(service, config_arg.removeprefix("--config=")).read_text())


def test_compose_parses_with_every_service_and_profile() -> None:
    assert set(services()) == {"monitor", "demo", "otel-collector", "jaeger", "prometheus", "alertmanager",
                               "alert-receiver", "grafana", *FLEET}
    for name, service in services().items():
        assert (name in FLEET) == (service.get("profiles") == ["fleet"]), name


def test_images_are_pinned_and_the_monitor_is_built_from_its_dockerfile() -> None:
    for name, service in services().items():
        image = service["image"]
        tag = image.rsplit(":", 1)[-1] if ":" in image else ""
        assert re.search(r"\d", tag) and tag != "latest", f"{name}: image {image} is not pinned to a version"
        if "build" in service:
            assert Path(service["build"]["context"]) == REPO
            assert (REPO / service["build"]["dockerfile"]) == REPO / "monitor" / "Dockerfile"
    dockerfile = (REPO / "monitor" / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11\.\d+-slim-\w+$", dockerfile, flags=re.M)
    for sources in re.findall(r"^COPY (.+) \S+$", dockerfile, flags=re.M):
        for source in sources.split():
            assert (REPO / source).exists(), f"monitor/Dockerfile copies missing {source}"
    assert f"CTXWATCH_MONITOR_PORT={MONITOR_PORT}" in dockerfile
    assert 'CMD ["python", "-m", "ctxwatch_monitor"]' in dockerfile


def test_every_mounted_file_exists_and_named_volumes_are_declared() -> None:
    declared = set(compose().get("volumes") or {})
    for name in services():
        for source, _ in _mounts(name):
            if source.startswith("/"):
                assert Path(source).exists(), f"{name} mounts missing {source}"
                assert Path(source).resolve().is_relative_to(REPO), f"{name} mounts {source} outside the repo"
            else:
                assert source in declared, f"{name} uses undeclared volume {source}"


def test_monitors_listen_where_they_are_reached() -> None:
    for name in ("monitor", "monitor-replica-1", "monitor-replica-2"):
        assert services()[name]["command"] == ["python", "-m", "ctxwatch_monitor"]
        assert _container_ports(name) == {MONITOR_PORT}


@pytest.mark.skipif(not shutil.which("promtool"), reason="needs Debian's prometheus package (promtool)")
def test_prometheus_scrapes_the_monitor_and_alerts_to_alertmanager() -> None:
    [config_arg] = [a for a in services()["prometheus"]["command"] if a.startswith("--config.file=")]
    path = host_path("prometheus", config_arg.removeprefix("--config.file="))
    check = subprocess.run(["promtool", "check", "config", str(path)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    config = yaml.safe_load(path.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    [static] = jobs["ctxwatch-monitor"]["static_configs"]
    assert [_hostport(t) for t in static["targets"]] == [("monitor", MONITOR_PORT)]
    [dns] = jobs["ctxwatch-monitor-fleet"]["dns_sd_configs"]
    assert set(dns["names"]) == {"monitor-replica-1", "monitor-replica-2"} and dns["port"] == MONITOR_PORT
    for job in ("ctxwatch-monitor", "ctxwatch-monitor-fleet"):
        assert re.fullmatch("ctxwatch-monitor.*", job)  # the CtxwatchMonitorDown selector
    [alerting] = config["alerting"]["alertmanagers"]
    assert [_hostport(t) for t in alerting["static_configs"][0]["targets"]] == [("alertmanager", 9093)]
    assert 9093 in _container_ports("alertmanager")
    host, port = _hostport(jobs["otel-collector"]["static_configs"][0]["targets"][0])
    assert host == "otel-collector" and port == _collector_config("otel-collector")["service"]["telemetry"][
        "metrics"]["readers"][0]["pull"]["exporter"]["prometheus"]["port"]


def test_grafana_datasource_points_at_prometheus_and_loads_the_dashboards() -> None:
    datasources = host_path("grafana", "/etc/grafana/provisioning/datasources/prometheus.yml")
    [source] = yaml.safe_load(datasources.read_text())["datasources"]
    assert _hostport(source["url"]) == ("prometheus", 9090) and 9090 in _container_ports("prometheus")
    provider = yaml.safe_load(host_path("grafana", "/etc/grafana/provisioning/dashboards/ctxwatch.yml").read_text())
    dashboards = host_path("grafana", provider["providers"][0]["options"]["path"])
    assert sorted(p.name for p in dashboards.glob("*.json")) == [
        "ctxwatch-agent.json", "ctxwatch-fleet.json", "ctxwatch-monitor.json"]
    home = services()["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert host_path("grafana", home).is_file()


def _check_pipelines(config: dict[str, Any]) -> None:
    for name, pipeline in config["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in config[kind], f"pipeline {name} uses undefined {kind[:-1]} {component}"


def _grpc_port(receiver: dict[str, Any]) -> int:
    return _hostport(receiver["protocols"]["grpc"]["endpoint"])[1]


def test_collector_sends_mutation_spans_to_the_monitor_and_all_traces_to_jaeger() -> None:
    config = _collector_config("otel-collector")
    _check_pipelines(config)
    pipelines = config["service"]["pipelines"]
    assert _hostport(config["exporters"]["otlphttp/monitor"]["endpoint"]) == ("monitor", MONITOR_PORT)
    assert "otlphttp/monitor" in pipelines["traces/monitor"]["exporters"]
    assert _hostport(config["exporters"]["otlp/jaeger"]["endpoint"]) == ("jaeger", 4317)
    assert pipelines["traces/backend"]["processors"] == ["batch"]  # every span, unfiltered
    http = _hostport(config["receivers"]["otlp"]["protocols"]["http"]["endpoint"])[1]
    assert {http, _grpc_port(config["receivers"]["otlp"])} <= _container_ports("otel-collector")
    mutation_filter = config["processors"]["filter/ctxwatch-mutations"]["traces"]["span"]
    assert mutation_filter == [f'attributes["{semconv.MUTATION_KIND}"] == nil']


def test_fleet_collector_load_balances_on_the_loop_id_over_both_replicas() -> None:
    config = _collector_config("otel-collector-fleet")
    _check_pipelines(config)
    balancer = config["exporters"]["loadbalancing/monitors"]
    assert balancer["routing_key"] == "attributes" and balancer["routing_attributes"] == [semconv.LOOP_ID]
    grpc_receivers = {_grpc_port(r): name for name, r in config["receivers"].items() if "grpc" in r["protocols"]}
    pipelines = config["service"]["pipelines"].values()
    replicas = set()
    for hostname in balancer["resolver"]["static"]["hostnames"]:
        host, port = _hostport(hostname)
        assert host in ("127.0.0.1", "localhost") and port in grpc_receivers, hostname
        [pipeline] = [p for p in pipelines if p["receivers"] == [grpc_receivers[port]]]
        [exporter] = pipeline["exporters"]
        replica, replica_port = _hostport(config["exporters"][exporter]["endpoint"])
        assert replica_port == MONITOR_PORT and replica in services()
        replicas.add(replica)
    assert replicas == {"monitor-replica-1", "monitor-replica-2"}
    ingress = [p for p in pipelines if "loadbalancing/monitors" in p["exporters"]]
    assert [p["receivers"] for p in ingress] == [["otlp"]]


def test_demo_fleets_send_to_their_collector() -> None:
    for demo, collector in (("demo", "otel-collector"), ("demo-fleet", "otel-collector-fleet")):
        command = services()[demo]["command"]
        assert command[:3] == ["ctxwatch", "demo", "--otlp"]
        host, port = _hostport(command[3])
        http = _hostport(_collector_config(collector)["receivers"]["otlp"]["protocols"]["http"]["endpoint"])[1]
        assert (host, port) == (collector, http)


def test_alertmanager_delivers_to_the_receiver_service() -> None:
    [config_arg] = [a for a in services()["alertmanager"]["command"] if a.startswith("--config.file=")]
    config = yaml.safe_load(host_path("alertmanager", config_arg.removeprefix("--config.file=")).read_text())
    [receiver] = config["receivers"]
    [webhook] = receiver["webhook_configs"]
    command = services()["alert-receiver"]["command"]
    assert _hostport(webhook["url"]) == ("alert-receiver", int(command[command.index("--port") + 1]))
    assert host_path("alert-receiver", command[1]).name == "alert_receiver.py"
