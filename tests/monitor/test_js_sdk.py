"""The OpenTelemetry JS SDK as the sender (issue 15, "Must show"): many batches flushed at once.

Real guards (the demo fleet's loops, healthy and contracting, some over two episodes) run here; their
spans' names and attributes go to a Node script (tests/monitor/js/export_spans.js) that makes the same
spans with the stock JS SDK and exports them through its `BatchSpanProcessor` and the OTLP/HTTP
protobuf exporter, or its OTLP/HTTP JSON one (hex ids, integers as JSON numbers). The batch size is
small and nothing but the first batch leaves before `forceFlush()`, which then sends every pending
batch at once, in parallel (24 of them, under the exporter's default limit of 30 concurrent exports, past
which it drops spans): the arrival order the issue saw move alarms. The monitor's
per-loop state, episode, cycle count and alarm cycle must equal each guard's.

The npm packages (tests/monitor/js/package.json, exact versions) are installed once with `npm
install` into `.venv/node-otel` of the checkout; the test is skipped only when `node` or `npm` is
missing (`.ci/run` installs them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import MonitorProcess, metric_value
from test_ordering import Fleet, settled

JS = Path(__file__).parent / "js"
CACHE = Path(__file__).resolve().parents[2] / ".venv" / "node-otel"
# forceFlush() sends every pending batch at once; the exporter refuses more than its concurrencyLimit
# (30 by default: "Concurrent export limit reached", the spans are lost), so stay just under it
PARALLEL_BATCHES = 24


def node_modules() -> Path:
    """The JS SDK's packages, installed into CACHE by npm unless already there at these versions."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed to run the OpenTelemetry JS SDK (.ci/run installs them)")
    wanted = (JS / "package.json").read_text()
    CACHE.mkdir(parents=True, exist_ok=True)
    stamp = CACHE / "package.json"
    if not stamp.exists() or stamp.read_text() != wanted or not (CACHE / "node_modules").is_dir():
        stamp.write_text(wanted)
        proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=CACHE,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
    return CACHE / "node_modules"


def interleaved(spans: list) -> list:
    """The fleet's spans as concurrent loops would emit them: one span of each loop in turn, each loop's
    own spans in their order."""
    by_loop: dict[str, list] = {}
    for span in spans:
        by_loop.setdefault(span.attributes["ctxwatch.loop.id"], []).append(span)
    queues = list(by_loop.values())
    out = []
    while queues:
        out += [queue.pop(0) for queue in queues]
        queues = [queue for queue in queues if queue]
    return out


def _json_attributes(attributes: dict) -> dict:
    return {key: list(value) if isinstance(value, tuple) else value for key, value in attributes.items()}


@pytest.mark.parametrize("protocol", ["proto", "json"])
def test_js_sdk_force_flush_of_many_batches(tmp_path: Path, protocol: str) -> None:
    modules = node_modules()
    fleet = Fleet(seed=11)
    spans = interleaved(fleet.take())
    batch_size = -(-len(spans) // PARALLEL_BATCHES)
    spans_file = tmp_path / "spans.json"
    spans_file.write_text(json.dumps([{"name": s.name, "attributes": _json_attributes(dict(s.attributes))}
                                      for s in spans]))
    # every span arrives (the assertions below check it), so a long wait costs nothing: it only has to
    # outlast how far apart the parallel batches land on a loaded machine (0.3 s did not, once)
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--order-wait", "10").start()
    try:
        proc = subprocess.run(["node", str(JS / "export_spans.js"), monitor.url, str(spans_file), str(batch_size),
                               protocol],
                              capture_output=True, text=True, timeout=300, env={"NODE_PATH": str(modules),
                                                                                "PATH": "/usr/bin:/bin"})
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["spans"] == len(spans)
        metrics = monitor.get("/metrics").text
        assert metric_value(metrics, "ctxwatch_monitor_spans_accepted_total") == len(spans)
        assert metric_value(metrics, "ctxwatch_monitor_requests_total", handler="traces",
                            code="200") == -(-len(spans) // batch_size)  # one request per batch
        views = settled(monitor, [loop.loop_id for loop in fleet.loops])
        assert any(loop.guard.detector.state == "contracting" for loop in fleet.loops)
        for loop in fleet.loops:
            view, guard = views[loop.loop_id], loop.guard
            assert (view["episode"], view["state"], view["cycles"], view["flagged_cycle"]) == (
                guard.episode, guard.detector.state, guard.detector.cycle, guard.halted_at), view
            assert view["source"] == "monitor" and view["service"] == "ctxwatch-demo"
    finally:
        monitor.stop()
