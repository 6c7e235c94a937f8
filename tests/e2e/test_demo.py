"""`ctxwatch demo`, the main job, run as a user runs it: a real monitor subprocess, a simulated fleet
through real guards and the real OTLP exporter; contracting loops flagged, healthy loops never. Stopped
by Ctrl-C or SIGTERM, it prints a partial summary, stops its monitor and removes its temp folder."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from mixin_stack import wait_for


def test_demo_runs_flags_the_contracting_loops_and_never_the_healthy_ones(tmp_path):
    summary = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, "-m", "ctxwatch.cli", "demo", "--duration", "30",
                           "--summary-json", str(summary)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "what fired" in proc.stdout and "live page: http://127.0.0.1:" in proc.stdout
    agents = json.loads(summary.read_text())["agents"]
    assert len(agents) >= 5 and all(a["loops"] >= 3 for a in agents.values())

    absorbing = agents["scratchpad-writer"]
    assert absorbing["flagged"], absorbing
    # the monitor flags each halted loop at the very cycle the in-process detector halted it
    for loop_id, cycle in absorbing["halted_cycles"].items():
        assert absorbing["flagged_cycles"][loop_id] == cycle
    for healthy in ("support-summarizer", "research-ranker"):
        assert agents[healthy]["flagged"] == [], agents[healthy]
        assert agents[healthy]["decisions"].get("abort", 0) == 0
        assert agents[healthy]["decisions"].get("patch", 0) > 0

    assert agents["ops-compactor"]["violations"].get("tool_pairing", 0) > 0
    assert agents["ledger-keeper"]["violations"].get("policy_isolation", 0) > 0
    assert agents["config-fixer"]["violations"].get("plan_reference", 0) > 0
    assert all(a["as_designed"] for a in agents.values())


def test_demo_rejects_bad_usage_with_exit_2():
    for args, reason in ((["--duration", "-3"], "must be positive"), (["--port", "99999"], "must be a TCP port")):
        proc = subprocess.run([sys.executable, "-m", "ctxwatch.cli", "demo", *args], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2 and reason in proc.stderr, proc.stderr


def _port_in_use(port: int) -> bool:
    """Whether something listens on 127.0.0.1:`port` (SO_REUSEADDR: closed connections in TIME_WAIT
    do not count; Linux still refuses the bind while a socket listens there)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def _children(pid: int) -> list[int]:
    """Pids whose parent is `pid` (from /proc/*/stat: the field after the parenthesized command)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("signum, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, True)],
                         ids=["ctrl-c-to-the-terminal-group", "sigterm-to-the-demo", "hang-up-to-the-terminal-group"])
def test_a_stopped_demo_prints_a_partial_summary_stops_its_monitor_and_removes_its_temp_folder(
        tmp_path, signum, to_group):
    """Ctrl-C in a terminal, and closing the terminal (SIGHUP), signal the whole foreground process group
    (here: a session of its own); `kill` and `docker stop` send SIGTERM to the demo alone. Either way
    nothing may be left behind."""
    temp, summary = tmp_path / "tmp", tmp_path / "summary.json"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ctxwatch.cli", "demo", "--duration", "600", "--summary-json",
                             str(summary)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    monitors: list[int] = []
    try:
        def announced() -> re.Match | None:
            assert proc.poll() is None, "".join(lines)
            return next(filter(None, (re.search(r"live page: http://127\.0\.0\.1:(\d+)/", ln) for ln in lines)),
                        None)
        port = int(wait_for("the demo's live page URL", announced, 120).group(1))
        wait_for("spans of the fleet at the monitor",
                 lambda: httpx.get(f"http://127.0.0.1:{port}/api/loops", timeout=5).json()["total"] > 0, 120)
        monitors = [pid for pid in _children(proc.pid)
                    if b"ctxwatch_monitor" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        [workdir] = temp.glob("ctxwatch-demo-*")
        assert len(monitors) == 1 and _port_in_use(port) and (workdir / "monitor.sqlite").exists()

        if to_group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        assert proc.wait(timeout=120) == 128 + signum, "".join(lines)
        reader.join(timeout=10)
    finally:
        for pid in [proc.pid, *monitors]:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
    output = "".join(lines)
    assert not _running(monitors[0]), "the monitor outlived the demo"
    assert not _port_in_use(port), f"port {port} is still taken after the demo stopped"
    assert list(temp.iterdir()) == [], "the demo left its temp folder behind"
    assert "Traceback" not in output, output
    name = signal.Signals(signum).name
    assert f"interrupted by {name} after" in output and "partial summary" in output and "what fired" in output
    partial = json.loads(summary.read_text())
    assert partial["interrupted_by"] == name
    assert sum(a["cycles"] for a in partial["agents"].values()) > 0
