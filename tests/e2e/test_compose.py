"""docker-compose.yml, parsed by a real compose implementation, and every file and target it wires (issue 6).

This machine has no Docker engine, so the stack is not run here: Debian's `docker-compose` (v1, which
implements the compose specification with profiles) parses and resolves the file with the `fleet`
profile on, and the test follows every wire: each bind-mounted file exists, the Prometheus config the
container reads scrapes the monitor service on the monitor's port (and passes `promtool check
config`), Grafana's datasource points at the Prometheus service, the collector exports mutation spans
to the monitor (and, in the fleet profile, load-balances on ctxwatch.loop.id over both replicas),
Alertmanager delivers to the receiver service, and the demo fleets send to a collector.

Safe by default (issue 15): every port is published on 127.0.0.1 unless CTXWATCH_PUBLISH_ADDRESS says
otherwise; the monitors require a bearer token that the `secrets-init` service generates (its script is
run here for real, and a real monitor started with the variable the compose file sets refuses a request
without the file's token) and every collector exporter to a monitor sends that file's token; Grafana's
admin password is generated, never admin/admin; Prometheus runs without its lifecycle and admin APIs.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from mixin_stack import REPO, Service

from ctxwatch import semconv
from ctxwatch_monitor.config import MonitorConfig

COMPOSE = shutil.which("docker-compose")
pytestmark = pytest.mark.skipif(not COMPOSE, reason="needs Debian's docker-compose package (compose v1)")
FLEET = {"monitor-replica-1", "monitor-replica-2", "otel-collector-fleet", "demo-fleet"}
MONITOR_PORT = MonitorConfig().port  # 4318, the port the image's monitor listens on (CTXWATCH_MONITOR_PORT)
MONITORS = ("monitor", "monitor-replica-1", "monitor-replica-2")
SECRETS_SCRIPT = REPO / "dashboards" / "secrets" / "generate_secrets.py"
PUBLISH = "CTXWATCH_PUBLISH_ADDRESS"


@cache
def compose(publish_address: str | None = None) -> dict[str, Any]:
    """`docker-compose config` of the file with every profile on: the resolved model (with
    CTXWATCH_PUBLISH_ADDRESS unset, or set to `publish_address`)."""
    env = {k: v for k, v in os.environ.items() if k != PUBLISH}
    if publish_address is not None:
        env[PUBLISH] = publish_address
    result = subprocess.run([COMPOSE or "docker-compose", "-f", str(REPO / "docker-compose.yml"), "--profile", "fleet",
                             "config"], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
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


def _published(service: str, model: dict[str, Any] | None = None) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each published port, from either form `config`
    prints: compose v1's "ip:published:target/proto" strings or the long form's mappings."""
    out = []
    for port in (model or compose())["services"][service].get("ports", []):
        if isinstance(port, dict):
            out.append((port.get("host_ip", "0.0.0.0"), int(port["published"]), int(port["target"])))
            continue
        *host, published, target = port.split("/")[0].split(":")
        out.append((host[0] if host else "0.0.0.0", int(published), int(target)))
    return out


def _container_ports(service: str) -> set[int]:
    return {target for _, _, target in _published(service)}


def _hostport(address: str) -> tuple[str, int]:
    parts = urlsplit(address if "://" in address else "//" + address)
    assert parts.hostname and parts.port, address
    return parts.hostname, parts.port


def _collector_config(service: str) -> dict[str, Any]:
    [config_arg] = [a for a in services()[service]["command"] if a.startswith("--config=")]
    return yaml.safe_load(host_path(service, config_arg.removeprefix("--config=")).read_text())


def test_compose_parses_with_every_service_and_profile() -> None:
    assert set(services()) == {"secrets-init", "monitor", "demo", "otel-collector", "jaeger", "prometheus",
                               "alertmanager", "alert-receiver", "grafana", *FLEET}
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
def test_monitors_behind_a_collector_admit_as_many_requests_from_it_as_in_all() -> None:
    """Every ingest request reaches a compose monitor from its collector's address, so the per-client
    limit is raised to the whole limit there (docs/operations.md, "Connections and fairness")."""
    from ctxwatch_monitor.config import load_config

    for name in MONITORS:
        config = load_config([], environ=services()[name]["environment"] | {"CTXWATCH_MONITOR_TOKEN_FILE": ""})
        assert config.max_inflight_per_client == config.max_inflight, name


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


# --- safe by default ---------------------------------------------------------------------------------
def _volume_at(service: str, directory: str) -> str:
    """The named volume a service mounts at `directory`."""
    [source] = [src for src, target in _mounts(service) if target == directory]
    assert not source.startswith("/"), f"{service} bind-mounts {source} at {directory}, not a named volume"
    return source


def _generated_secrets() -> dict[str, int]:
    """{path in the secrets-init container: owner uid} of the secrets it generates."""
    command = services()["secrets-init"]["command"]
    assert command[:2] == ["python", "/app/generate_secrets.py"]
    assert host_path("secrets-init", command[1]) == SECRETS_SCRIPT
    return {path: int(uid) for path, uid in (arg.rsplit("=", 1) for arg in command[2:])}


def _secret_in(service: str, path: str) -> int:
    """Check that `service` sees the secrets-init file `path` through the same volume (read-only unless it
    is secrets-init itself); the uid owning the file."""
    directory = str(Path(path).parent)
    assert _volume_at(service, directory) == _volume_at("secrets-init", directory)
    if service != "secrets-init":
        [mode] = [_mode(volume) for volume in services()[service]["volumes"] if _target(volume) == directory]
        assert mode == "ro", f"{service} must mount {directory} read-only"
    return _generated_secrets()[path]


def _target(volume: str | dict[str, Any]) -> str:
    return volume.split(":")[1] if isinstance(volume, str) else volume["target"]


def _mode(volume: str | dict[str, Any]) -> str:
    if isinstance(volume, dict):
        return "ro" if volume.get("read_only") else "rw"
    parts = volume.split(":")
    return parts[2] if len(parts) > 2 else "rw"


def _waits_for_the_secrets(service: str) -> None:
    assert services()[service]["depends_on"]["secrets-init"] == {"condition": "service_completed_successfully"}


def test_every_port_is_published_on_loopback_unless_the_user_opts_in() -> None:
    published = {name: _published(name) for name in services()}
    assert sum(map(len, published.values())) >= 10
    for name, ports in published.items():
        for host, _, _ in ports:
            assert host == "127.0.0.1", f"{name} is published on {host or 'every interface'}"
    opted_in = compose("0.0.0.0")
    for name in services():
        assert [host for host, _, _ in _published(name, opted_in)] == ["0.0.0.0"] * len(published[name])


def test_the_secrets_script_generates_private_values_once_and_keeps_them(tmp_path: Path) -> None:
    token, password = tmp_path / "ctxwatch" / "token", tmp_path / "grafana" / "admin-password"
    uid = os.geteuid()
    args = [sys.executable, str(SECRETS_SCRIPT), f"{token}={uid}", f"{password}={uid}"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and first.stdout.count("generated") == 2, first.stderr
    values = {path: path.read_text() for path in (token, password)}
    for path, value in values.items():
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}", value), "32 random bytes, URL-safe, no newline"
        assert stat.S_IMODE(path.stat().st_mode) == 0o400 and path.stat().st_uid == uid
        assert value not in first.stdout
    assert values[token] != values[password]
    again = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and again.stdout.count("kept") == 2
    assert {path: path.read_text() for path in values} == values  # a restart keeps the token and the password
    bad = subprocess.run([sys.executable, str(SECRETS_SCRIPT), str(token)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected PATH=UID" in bad.stderr


def test_the_monitors_require_the_generated_token(tmp_path: Path) -> None:
    dockerfile = (REPO / "monitor" / "Dockerfile").read_text()
    image_uid = int(re.search(r"useradd .*--uid (\d+)", dockerfile).group(1))
    for name in MONITORS:
        token_file = services()[name]["environment"]["CTXWATCH_MONITOR_TOKEN_FILE"]
        assert _secret_in(name, token_file) == image_uid  # the monitor's user owns (and alone reads) it
        _waits_for_the_secrets(name)
    # a real monitor, configured the way the compose file configures it, with a token the script made
    token_file = tmp_path / "token"
    subprocess.run([sys.executable, str(SECRETS_SCRIPT), f"{token_file}={os.geteuid()}"], check=True, timeout=60,
                   capture_output=True)
    cmd = [sys.executable, "-m", "ctxwatch_monitor", "--host", "127.0.0.1", "--port", "0", "--state", ":memory:"]
    monitor = Service("monitor", cmd, tmp_path, env={"CTXWATCH_MONITOR_TOKEN_FILE": str(token_file)})
    try:
        monitor.url_from_first_line()
        bearer = {"Authorization": f"Bearer {token_file.read_text()}"}
        assert httpx.get(monitor.url + "/api/loops", timeout=10).status_code == 401
        assert httpx.get(monitor.url + "/api/loops", headers=bearer, timeout=10).status_code == 200
        refused = httpx.post(monitor.url + "/v1/traces", content=b"{}", timeout=10,
                             headers={"Content-Type": "application/json"})
        assert refused.status_code == 401
    finally:
        monitor.stop()


def test_every_collector_export_to_a_monitor_carries_the_generated_token() -> None:
    checked = 0
    for collector in ("otel-collector", "otel-collector-fleet"):
        config = _collector_config(collector)
        _check_pipelines(config)
        for name, exporter in config["exporters"].items():
            if "endpoint" not in exporter or _hostport(exporter["endpoint"])[0] not in MONITORS:
                continue
            authenticator = exporter["auth"]["authenticator"]
            assert authenticator.startswith("bearertokenauth") and authenticator in config["service"]["extensions"]
            token_file = config["extensions"][authenticator]["filename"]
            monitor = _hostport(exporter["endpoint"])[0]
            assert token_file == services()[monitor]["environment"]["CTXWATCH_MONITOR_TOKEN_FILE"], name
            _secret_in(collector, token_file)
            checked += 1
    assert checked == 3  # the monitor, and each replica behind the fleet's balancer


def test_grafana_has_a_generated_admin_password_and_anonymous_read_only() -> None:
    grafana = services()["grafana"]
    environment = grafana["environment"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in environment  # no literal password, admin/admin least of all
    assert _secret_in("grafana", environment["GF_SECURITY_ADMIN_PASSWORD__FILE"]) == 472  # the image's grafana user
    _waits_for_the_secrets("grafana")
    assert environment["GF_AUTH_ANONYMOUS_ENABLED"] == "true" and environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert environment["GF_USERS_ALLOW_SIGN_UP"] == "false"


def test_prometheus_runs_without_its_lifecycle_and_admin_apis() -> None:
    command = services()["prometheus"]["command"]
    assert command[0].startswith("--config.file=")
    for flag in ("--web.enable-lifecycle", "--web.enable-admin-api", "--web.enable-remote-write-receiver"):
        assert not any(arg.startswith(flag) for arg in command), f"prometheus runs with {flag}"
