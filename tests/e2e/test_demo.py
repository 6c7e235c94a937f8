"""`ctxwatch demo`, the main job, run as a user runs it: a real monitor subprocess, a simulated fleet
through real guards and the real OTLP exporter; contracting loops flagged, healthy loops never."""

import json
import subprocess
import sys


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
