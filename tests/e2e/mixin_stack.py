"""The real monitoring stack on loopback for the mixin tests: monitors, Prometheus, Alertmanager, a webhook.

`Service` runs one subprocess (its stdout lines collected by a thread, stderr to a log file in the
test's tmp dir) and stops it with SIGTERM, then SIGKILL. The monitor and the webhook receiver print
their URL on their first line (they bind port 0); Prometheus and Alertmanager get a port the kernel
just handed out (`free_port`) and are waited for on /-/ready.

Configuration is generated from the shipped files: the rule files with every `for:` shortened to
`FOR_OVERRIDE` (rate windows unchanged), Alertmanager's config with the webhook URL and grouping
delays replaced, and a Prometheus config scraping the given jobs every `SCRAPE_INTERVAL`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"
RULE_FILES = sorted((DASHBOARDS / "prometheus" / "rules").glob("*.rules.yml"))
ALERTMANAGER_CONFIG = DASHBOARDS / "alertmanager" / "alertmanager.yml"
ALERT_RECEIVER = DASHBOARDS / "alertmanager" / "alert_receiver.py"
PROMETHEUS = shutil.which("prometheus")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
SCRAPE_INTERVAL = "1s"
FOR_OVERRIDE = "2s"
START_TIMEOUT = 60.0
T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the kernel just handed out (for binaries that cannot report port 0)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, interval: float = 0.25) -> T:
    """Call `probe` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class Service:
    """One subprocess of the stack."""

    def __init__(self, name: str, cmd: Sequence[str], logs: Path, env: Mapping[str, str] | None = None) -> None:
        self.name, self.cmd = name, list(cmd)
        self.log_path = logs / f"{name}.log"
        self.lines: list[str] = []
        self.url = ""
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self._log, text=True,
                                     env={**os.environ, **(env or {})})
        self._reader = threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def url_from_first_line(self, marker: str = "listening on ") -> Service:
        """Wait for the line announcing the bound address and keep its URL."""
        def announced() -> str | None:
            self._check_alive()
            return next((line for line in self.lines if marker in line), None)
        self.url = wait_for(f"{self.name} to listen", announced, START_TIMEOUT).rsplit(" ", 1)[-1]
        return self

    def ready_at(self, url: str, path: str) -> Service:
        """Wait until GET url+path answers 200."""
        self.url = url

        def ready() -> bool:
            self._check_alive()
            try:
                return httpx.get(url + path, timeout=2).status_code == 200
            except httpx.TransportError:
                return False
        wait_for(f"{self.name} to be ready", ready, START_TIMEOUT)
        return self

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self._reader.join(timeout=5)
        self._log.close()


def start_monitor(name: str, tmp: Path, *args: str) -> Service:
    """`python -m ctxwatch_monitor` on 127.0.0.1, a free port, a state file in `tmp`."""
    cmd = [sys.executable, "-m", "ctxwatch_monitor", "--host", "127.0.0.1", "--port", "0",
           "--state", str(tmp / f"{name}.sqlite3"), "--sync", "normal", "--log-level", "warning", *args]
    service = Service(name, cmd, tmp).url_from_first_line()
    return service.ready_at(service.url, "/readyz")


def start_receiver(tmp: Path) -> Service:
    """The shipped webhook receiver (dashboards/alertmanager/alert_receiver.py) on a free port."""
    cmd = [sys.executable, str(ALERT_RECEIVER), "--host", "127.0.0.1", "--port", "0"]
    return Service("alert-receiver", cmd, tmp).url_from_first_line()


def rules_for_tests(into: Path, for_override: str = FOR_OVERRIDE) -> list[Path]:
    """Copies of the shipped rule files with every alert's `for:` set to `for_override`."""
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for path in RULE_FILES:
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            for rule in group["rules"]:
                if "for" in rule:
                    rule["for"] = for_override
        target = into / path.name
        target.write_text(yaml.safe_dump(doc, sort_keys=False))
        out.append(target)
    return out


def start_alertmanager(tmp: Path, webhook_url: str) -> Service:
    """Alertmanager with the shipped config, the webhook pointed at `webhook_url`, grouping delays of 1s."""
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            webhook["url"] = webhook_url
    for route in [config["route"], *config["route"].get("routes", [])]:
        route.update(group_wait="1s", group_interval="1s")
    path = tmp / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    cmd = [ALERTMANAGER or "prometheus-alertmanager", f"--config.file={path}", f"--storage.path={tmp / 'am-data'}",
           f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]
    return Service("alertmanager", cmd, tmp).ready_at(f"http://127.0.0.1:{port}", "/-/ready")


def start_prometheus(tmp: Path, jobs: Mapping[str, Sequence[str]], alertmanager: str) -> Service:
    """Prometheus scraping `jobs` (name -> host:port targets) with the test rule files, alerting to `alertmanager`."""
    rules = rules_for_tests(tmp / "rules")
    config: dict[str, Any] = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL,
                   "scrape_timeout": SCRAPE_INTERVAL},
        "rule_files": [str(p) for p in rules],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager.removeprefix("http://")]}]}]},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(targets)}]}
                           for job, targets in jobs.items()],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    cmd = [PROMETHEUS or "prometheus", f"--config.file={path}", f"--storage.tsdb.path={tmp / 'prom-data'}",
           f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    return Service("prometheus", cmd, tmp).ready_at(f"http://127.0.0.1:{port}", "/-/ready")


class PromQL:
    """The Prometheus HTTP API: instant queries, alerts, targets."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _get(self, path: str, **params: Any) -> Any:
        body = httpx.get(self.url + path, params=params, timeout=30).json()
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) of `expr`; AssertionError naming it if it fails to parse."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        data = self._get("/api/v1/query", **params)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        return data["result"]

    def series_values(self, expr: str, at: float | None = None, drop: Sequence[str] = (),
                      by_name: bool = False) -> dict[frozenset[tuple[str, str]], float]:
        """`expr` as {label set without `drop` (and the metric name unless `by_name`): value}, values of
        samples whose remaining labels coincide added up."""
        hidden = set(drop) if by_name else {*drop, "__name__"}
        out: dict[frozenset[tuple[str, str]], float] = {}
        for sample in self.query(expr, at):
            key = frozenset((k, v) for k, v in sample["metric"].items() if k not in hidden)
            out[key] = out.get(key, 0.0) + float(sample["value"][1])
        return out

    def firing(self) -> list[dict[str, Any]]:
        return [a for a in self._get("/api/v1/alerts")["alerts"] if a["state"] == "firing"]

    def label_values(self, label: str, match: str) -> list[str]:
        return self._get(f"/api/v1/label/{label}/values", **{"match[]": match})
