"""Running the monitor for the demo as a child process, and asking it what it saw.

ctxwatch never imports ctxwatch_monitor (the agent library must not depend on the service), so
the demo starts `python -m ctxwatch_monitor` and talks to it over HTTP on loopback like any
other client would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class MonitorUnavailable(RuntimeError):
    """The monitor could not be started or does not answer."""


class MonitorProcess:
    """`python -m ctxwatch_monitor` on 127.0.0.1, stopped on `close()`. Its stderr goes to an anonymous
    temp file (read when it fails to start), so a chatty monitor can never block on a full pipe."""

    def __init__(self, port: int, state: Path, *, startup_timeout_s: float = 30.0) -> None:
        cmd = [sys.executable, "-m", "ctxwatch_monitor", "--host", "127.0.0.1", "--port", str(port),
               "--state", str(state), "--log-level", "warning",
               "--grpc-port", "off"]  # the demo's guards send OTLP/HTTP; 4317 stays free for the user
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        try:
            # its own session: a terminal's Ctrl-C (or hang-up) reaches the demo only, which keeps the
            # monitor up for the partial summary and then stops it (close)
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                         start_new_session=True)
        except OSError as exc:
            self._stderr.close()
            raise MonitorUnavailable(f"cannot start the monitor: {exc}") from None
        try:
            self._await_ready(startup_timeout_s)
        except BaseException:  # a failed start, or a signal while starting: never leave the child behind
            self.close()
            raise

    def _await_ready(self, startup_timeout_s: float) -> None:
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "listening on " not in line:
            self.proc.kill()
            self.proc.wait()
            self._stderr.seek(0)
            err = self._stderr.read()
            last = (err.strip().splitlines() or [line.strip() or "no output"])[-1]
            hint = " (install ctxwatch[monitor])" if "No module named" in err else ""
            raise MonitorUnavailable(f"the monitor did not start: {last}{hint}")
        self.url = line.split("listening on ", 1)[1].strip()
        self.client = MonitorClient(self.url)
        deadline = time.monotonic() + startup_timeout_s
        while not self.client.ready():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise MonitorUnavailable(f"the monitor at {self.url} never became ready")
            time.sleep(0.1)

    def close(self, grace_s: float = 5.0) -> None:
        """Stop the monitor (SIGTERM, then SIGKILL after `grace_s`), reap it and close its pipes."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


class MonitorClient:
    """The few read calls the demo makes to a monitor's JSON API."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=self.timeout_s) as resp:  # noqa: S310 - loopback
            return json.loads(resp.read())

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=self.timeout_s) as resp:  # noqa: S310
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def loops(self) -> list[dict[str, Any]]:
        """Every loop the monitor tracks (all pages)."""
        out: list[dict[str, Any]] = []
        while True:
            page = self._get(f"/api/loops?offset={len(out)}&limit=500")
            out.extend(page["loops"])
            if not page["loops"] or len(out) >= page["total"]:
                return out

    def alarms(self) -> list[dict[str, Any]]:
        return self._get("/api/alarms")["alarms"]
