"""Running the monitor for the demo as a child process, and asking it what it saw.

ctxwatch never imports ctxwatch_monitor (the agent library must not depend on the service), so
the demo starts `python -m ctxwatch_monitor` and talks to it over HTTP on loopback like any
other client would. The tests and the benchmarks start the monitor with this same class.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class MonitorUnavailable(RuntimeError):
    """The monitor could not be started or does not answer."""


class MonitorProcess:
    """`python -m ctxwatch_monitor` on 127.0.0.1 (a free port by default), for the demo, the tests and
    the benchmarks: `start()` it (again after `stop()`, on the same state), read `url` (and
    `grpc_target` unless ``--grpc-port off``), `stop()` or `kill9()` it, `close()` it for good. Its
    stderr goes to an anonymous temp file (read by `stderr()` and when it fails to start), so a chatty
    monitor can never block on a full pipe."""

    def __init__(self, state: Path | str, *args: str, port: int = 0, env: Mapping[str, str] | None = None,
                 startup_timeout_s: float = 60.0, own_session: bool = False) -> None:
        """`args` are more command-line options; `own_session` puts it in its own session, so that a
        terminal's Ctrl-C (or hang-up) reaches only its parent, which stops it (the demo)."""
        self.cmd = [sys.executable, "-m", "ctxwatch_monitor", "--host", "127.0.0.1", "--port", str(port),
                    "--state", str(state), "--log-level", "warning", *args]
        self.env = {**os.environ, **(env or {})}
        self.startup_timeout_s, self.own_session = startup_timeout_s, own_session
        self.proc: subprocess.Popen[str] | None = None
        self._stderr: Any = None
        self.url = ""
        self.grpc_target = ""  # host:port of OTLP/gRPC ("" when it is off)
        self.client = MonitorClient("")

    def start(self) -> MonitorProcess:
        """Start it and wait until it answers /readyz (`MonitorUnavailable` if it does not)."""
        self._close_stderr()
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in stop()/close()
        try:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
                                         env=self.env, start_new_session=self.own_session)
        except OSError as exc:
            raise MonitorUnavailable(f"cannot start the monitor: {exc}") from None
        try:
            self._await_ready()
        except BaseException:  # a failed start, or a signal while starting: never leave the child behind
            self.stop()
            raise
        return self

    def _listening_line(self, what: str, *, first: bool) -> str:
        """The address announced by the next output line, which must contain `what`. The first line is
        waited for (at most the startup timeout); a later one was printed with it or EOF follows (a
        select would miss a line already read into the pipe's buffer)."""
        assert self.proc is not None and self.proc.stdout is not None
        ready = select.select([self.proc.stdout], [], [], self.startup_timeout_s)[0] if first else True
        line = self.proc.stdout.readline() if ready else ""
        if what not in line:
            self.proc.kill()
            self.proc.wait()
            err = self.stderr()
            last = (err.strip().splitlines() or [line.strip() or "no output"])[-1]
            hint = " (install ctxwatch[monitor])" if "No module named" in err else ""
            raise MonitorUnavailable(f"the monitor did not start: {last}{hint}")
        return line.strip().rsplit(" ", 1)[-1]

    def _await_ready(self) -> None:
        self.url = self._listening_line("listening on ", first=True)
        grpc_off = any(a == "off" and b == "--grpc-port" for b, a in zip(self.cmd, self.cmd[1:], strict=False))
        self.grpc_target = "" if grpc_off else self._listening_line("OTLP/gRPC listening on ", first=False)
        self.client = MonitorClient(self.url)
        deadline = time.monotonic() + self.startup_timeout_s
        while not self.client.ready():
            if time.monotonic() > deadline or not self.alive():
                raise MonitorUnavailable(f"the monitor at {self.url} never became ready")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """Kill it without warning (a crash) and reap it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, grace_s: float = 30.0) -> int:
        """Stop it (SIGTERM, then SIGKILL after `grace_s`) and reap it; its exit code."""
        proc = self.proc
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def stderr(self) -> str:
        """What it wrote to stderr so far (all of it, once it has exited)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return str(self._stderr.read())

    def close(self, grace_s: float = 5.0) -> None:
        """Stop it and close its files."""
        self.stop(grace_s)
        self._close_stderr()

    def _close_stderr(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


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
