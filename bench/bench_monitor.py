"""Benchmark of the ctxwatch monitor: throughput, latency, memory, /metrics render time, overload.

Starts the monitor as a subprocess (`bench/monitor_decode_route.py`: the monitor plus the decode-only
route of phase 1, SQLite state,
one uvicorn worker, pinned to CPU 0 when there are two or more) and drives it from this process
(pinned to CPU 1) over loopback with pre-encoded OTLP protobuf requests covering >= 100 concurrent
loops (`--encoding json`: the same requests in OTLP/JSON, ids in hex, as the JavaScript SDK sends them).
Phases:

1+2, interleaved in short runs (`--slice-seconds`), so a load change on a shared machine weighs on both:
1. decode ceiling: POST /bench/decode (same HTTP stack, decodes and reads every span, stores nothing)
2. full ingest: POST /v1/traces (validation, ordering by ctxwatch.sequence, loop state, the shared
   detector, an SQLite commit before each answer; requests queued together share one: group commit).
   Each pass over the pre-encoded bodies renames the loops (`for_pass`), so every span is a new cycle.
3. overload: many more connections than admitted requests: counts 429/503, RSS before and after
4. scale: a fresh monitor filled with 100,000 loops: RSS per tracked loop, GET /metrics render time
5. budget: a fresh monitor, default series budget, 100 agents x 20 services (one loop each):
   /metrics render+fetch time and series count, and /healthz latency while scrapes run back to back
   against /healthz on the idle monitor (same run)
6. idle connections: /healthz latency (a new connection per probe) while 1,000 connections are
   open and idle, against the same probes with none open (same run)
7. decode: `ctxwatch_monitor.otlp_codec.decode` in this process, the same requests as OTLP/JSON and as
   protobuf in interleaved rounds, with two baselines of the same run: `json.loads` alone of the JSON bodies
   (the floor of any JSON decoder) and `decode_json_reference` (every span read by json_format): spans/s of
   each, and the ratios of the medians
8. hostile sender: a well-behaved OTLP/JSON sender (ids in hex: the fast reader) alone, and while a second
   client address posts as much in protobuf's own JSON mapping (base64 ids: every span read by
   json_format, the slow path), and beside a second well-behaved sender (the fair share); once on a monitor
   with the default per-client slow-path budget and once with it off (`--slow-path-rate 0`), same run: the
   well-behaved sender's spans/s and latency each way, the ratios to alone, and what the other got

Prints min / median / max of the throughput of the runs, p50/p99 latency, RSS, and the ratio of the
full path to the decode ceiling measured in the same run. Loopback only; bounded in time.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from ctxwatch import semconv
from ctxwatch_monitor.otlp_codec import decode, decode_json_reference
from ctxwatch_monitor.records import RESOURCE_KEYS, SPAN_KEYS

SPANS_PER_REQUEST = 512
PROTOBUF = {"Content-Type": "application/x-protobuf"}
CONTENT_TYPES = {"protobuf": PROTOBUF, "json": {"Content-Type": "application/json"}}
HOSTILE_ADDRESS = "127.0.0.2"  # loopback too: another client address to the monitor


# --- load ------------------------------------------------------------------------------------------

def _attr(span, key: str, **value) -> None:
    kv = span.attributes.add(key=key)
    for field, v in value.items():
        setattr(kv.value, field, v)


PASS_TAG = b"-p0000"  # in every loop id: `for_pass` makes each pass over the bodies a fresh set of loops


def for_pass(body: bytes, index: int) -> bytes:
    """`body` for the `index`-th pass over the bodies: the same spans for other loops. Every loop's spans
    are numbered (ctxwatch.sequence) from 1, so sending the same body again would only bring late spans."""
    return body if index == 0 else body.replace(PASS_TAG, b"-p%04d" % (index % 10_000))


def build_request(first_loop: int, loops: int, cycle0: int, agents: int = 8, services: int = 0) -> bytes:
    """SPANS_PER_REQUEST mutation spans: consecutive cycles of `loops` loops, every tenth a contracting one,
    each numbered as a guard numbers it (ctxwatch.sequence, ctxwatch.contraction.cycle). Loop i is agent
    i % agents; with `services`, its spans name service (i // agents) % services."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    _attr(resource_spans.resource, "service.name", string_value="bench")
    spans = resource_spans.scope_spans.add().spans
    per_loop = max(1, SPANS_PER_REQUEST // loops)
    t = 1_700_000_000_000_000_000
    for c in range(per_loop):
        cycle = cycle0 + c
        for i in range(loops):
            loop = first_loop + i
            contracting = loop % 10 == 0
            d = max(0.01, 0.6 - 0.05 * cycle) if contracting else 0.4 + 0.01 * (cycle % 5)
            before = 40
            lost = min(before, 2 * cycle) if contracting else 0
            kind = "append" if cycle % 4 == 3 else "compact"
            span = spans.add(name=semconv.span_name(kind), trace_id=os.urandom(16), span_id=os.urandom(8),
                             start_time_unix_nano=t, end_time_unix_nano=t + 1000)
            t += 1000
            _attr(span, semconv.LOOP_ID, string_value=f"bench-loop-{loop}{PASS_TAG.decode()}")
            _attr(span, semconv.SEQUENCE, int_value=cycle + 1)  # one span per cycle; every fourth an append
            _attr(span, semconv.CONTRACTION_CYCLE, int_value=cycle + 1 - (cycle + 1) // 4)
            _attr(span, semconv.GENAI_V1_41.agent_name, string_value=f"agent-{loop % agents}")
            if services:
                _attr(span, semconv.SERVICE_NAME, string_value=f"service-{(loop // agents) % services}")
            _attr(span, semconv.MUTATION_KIND, string_value=kind)
            _attr(span, semconv.DECISION, string_value="patch")
            _attr(span, semconv.PASS_NUMBER, int_value=cycle + 1)
            _attr(span, semconv.PASS_CAP, int_value=64)
            _attr(span, semconv.LITERALS_BEFORE, int_value=before)
            _attr(span, semconv.LITERALS_LOST, int_value=lost if kind != "append" else 0)
            _attr(span, semconv.ORPHANS_TOOL_USE, int_value=0)
            _attr(span, semconv.ORPHANS_TOOL_RESULT, int_value=0)
            _attr(span, semconv.CONTRACTION_STATE, string_value="healthy")
            _attr(span, semconv.MESSAGES_BEFORE, int_value=20)
            _attr(span, semconv.MESSAGES_AFTER, int_value=12)
            _attr(span, semconv.SIZE_BEFORE, int_value=40_000)
            _attr(span, semconv.SIZE_AFTER, int_value=25_000)
            span.attributes.add(key=semconv.VIOLATIONS).value.array_value.SetInParent()
            warnings = span.attributes.add(key=semconv.WARNINGS).value.array_value
            if lost:
                warnings.values.add(string_value="literal_loss")
            if kind != "append":
                _attr(span, semconv.HASH_DISTANCE, double_value=d)
    return request.SerializeToString()


def as_otlp_json(body: bytes) -> bytes:
    """A protobuf request written in OTLP/JSON: the protobuf JSON mapping with trace and span ids in hex."""
    document = json_format.MessageToDict(ExportTraceServiceRequest.FromString(body))
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document, separators=(",", ":")).encode()


# --- the monitor subprocess --------------------------------------------------------------------------

class Monitor:
    def __init__(self, state: Path, *args: str) -> None:
        pin = (lambda: os.sched_setaffinity(0, {0})) if os.cpu_count() and os.cpu_count() >= 2 else None
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("monitor_decode_route.py")), "--port", "0", "--state",
             str(state), "--log-level", "error", *args], stdout=subprocess.PIPE, text=True, preexec_fn=pin)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"monitor did not start: {line!r}")
        self.host, port = line.strip().rsplit("//", 1)[1].split(":")
        self.port = int(port)
        deadline = time.monotonic() + 60
        while self.get("/readyz")[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit("monitor not ready")
            time.sleep(0.05)

    def connection(self, source: str | None = None) -> http.client.HTTPConnection:
        """A connection to the monitor, from the loopback address `source` (another client) if given."""
        return http.client.HTTPConnection(self.host, self.port, timeout=120,
                                          source_address=(source, 0) if source else None)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        try:
            conn = self.connection()
            conn.request("GET", path, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        except OSError:
            return 0, b""

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


class Run:
    """POSTs to `path` from `threads` keep-alive connections, in runs of a few seconds (`run`) that add up:
    span counts per run, statuses, latencies. Bodies are taken in order from one counter shared by the
    connections and by successive runs, so every loop's cycles are sent in order, each once."""

    def __init__(self, monitor: Monitor, path: str, bodies: list[bytes], threads: int,
                 headers: dict[str, str] = PROTOBUF, source: str | None = None) -> None:
        self.monitor, self.path, self.bodies, self.threads, self.headers = monitor, path, bodies, threads, headers
        self.source = source
        self.statuses: dict[int, int] = {}
        self.latencies: list[float] = []
        self.slices: list[float] = []   # spans/s of each run
        self.spans = 0
        self.seconds = 0.0
        self._next = itertools.count()

    def run(self, seconds: float) -> Run:
        lock = threading.Lock()
        bodies, spans = self.bodies, [0]
        start = time.monotonic()
        stop = start + seconds

        def worker() -> None:
            conn = self.monitor.connection(self.source)
            while time.monotonic() < stop:
                k = next(self._next)  # one C call: atomic under the GIL
                body = for_pass(bodies[k % len(bodies)], k // len(bodies))
                sent = time.perf_counter()
                try:
                    conn.request("POST", self.path, body, self.headers)
                    response = conn.getresponse()
                    response.read()
                    status = response.status
                except OSError:
                    status, conn = 0, self.monitor.connection(self.source)
                elapsed = time.perf_counter() - sent
                with lock:
                    self.statuses[status] = self.statuses.get(status, 0) + 1
                    if status == 200:
                        self.latencies.append(elapsed)
                        spans[0] += SPANS_PER_REQUEST
                if status in (429, 503):
                    time.sleep(0.001)

        pool = [threading.Thread(target=worker) for _ in range(self.threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        elapsed = time.monotonic() - start
        self.spans += spans[0]
        self.seconds += elapsed
        self.slices.append(spans[0] / elapsed)
        return self

    @property
    def rate(self) -> float:
        return self.spans / self.seconds

    def latency(self, q: float) -> float:
        ordered = sorted(self.latencies) or [float("nan")]
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


def _sample(text: str, name: str) -> float:
    """The sum of the samples named `name` in a Prometheus text exposition."""
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples if s.name == name)


def _mmm(values: list[float]) -> str:
    return f"min {min(values):,.0f}  median {statistics.median(values):,.0f}  max {max(values):,.0f}"


# --- phases -----------------------------------------------------------------------------------------------

def throughput(args: argparse.Namespace, workdir: Path) -> None:
    bodies = [build_request(first, args.loops_per_request, cycle)
              for cycle in range(0, 40, max(1, SPANS_PER_REQUEST // args.loops_per_request))
              for first in range(0, args.loops, args.loops_per_request)]
    if args.encoding == "json":
        bodies = [as_otlp_json(body) for body in bodies]
    headers = CONTENT_TYPES[args.encoding]
    monitor = Monitor(workdir / "throughput.sqlite3", "--max-inflight", str(args.threads * 2))
    try:
        rss0 = monitor.rss_mib()
        # interleaved in short runs, so a load change on the machine weighs on both alike
        ceiling = Run(monitor, "/bench/decode", bodies, args.threads, headers)
        full = Run(monitor, "/v1/traces", bodies, args.threads, headers)
        while full.seconds < args.seconds:
            ceiling.run(args.slice_seconds * args.ceiling_share)
            full.run(args.slice_seconds)
        rss1 = monitor.rss_mib()
        print(f"loops: {args.loops} concurrent, {SPANS_PER_REQUEST} spans per request, {len(bodies)} distinct "
              f"{args.encoding} bodies of ~{len(bodies[0]) // 1024} KiB, {args.threads} client connections")
        print(f"decode ceiling  : {ceiling.rate:,.0f} spans/s  (per {args.slice_seconds * args.ceiling_share:g} s run: "
              f"{_mmm(ceiling.slices)})")
        print(f"full ingest     : {full.rate:,.0f} spans/s  (per {args.slice_seconds:g} s run: {_mmm(full.slices)})  "
              f"statuses {full.statuses}")
        print(f"ratio full/ceiling: {full.rate / ceiling.rate:.2f}  (target >= 0.60; >= 25,000 spans/s)")
        metrics = monitor.get("/metrics")[1].decode()
        ordering = {name: _sample(metrics, name) for name in ("ctxwatch_monitor_spans_held_total",
                                                               "ctxwatch_monitor_late_spans_total")}
        print(f"ordering        : {ordering['ctxwatch_monitor_spans_held_total']:,.0f} spans held for an earlier one, "
              f"{ordering['ctxwatch_monitor_late_spans_total']:,.0f} late")
        print(f"latency full    : p50 {full.latency(0.50):.1f} ms  p99 {full.latency(0.99):.1f} ms "
              f"(ceiling p50 {ceiling.latency(0.5):.1f} ms)")
        print(f"RSS             : {rss0:.1f} MiB before, {rss1:.1f} MiB after")
        rss_before = monitor.rss_mib()
        flood = Run(monitor, "/v1/traces", bodies, args.threads * 8, headers).run(args.overload_seconds)
        refused = flood.statuses.get(429, 0) + flood.statuses.get(503, 0)
        print(f"overload        : {args.threads * 8} connections, max_inflight {args.threads * 2}: "
              f"statuses {flood.statuses} ({refused} refused with 429/503); RSS {rss_before:.1f} -> "
              f"{monitor.rss_mib():.1f} MiB")
    finally:
        monitor.stop()


def scale(args: argparse.Namespace, workdir: Path) -> None:
    loops = args.scale_loops
    monitor = Monitor(workdir / "scale.sqlite3", "--max-loops", str(loops * 2))
    try:
        baseline = monitor.rss_mib()
        conn = monitor.connection()
        per_request = SPANS_PER_REQUEST // args.scale_cycles
        for first in range(0, loops, per_request):
            conn.request("POST", "/v1/traces", build_request(first, min(per_request, loops - first), 0), PROTOBUF)
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
        status, body = monitor.get("/readyz")
        filled = monitor.rss_mib()
        print(f"scale           : {body.decode()}; RSS {baseline:.1f} MiB empty -> {filled:.1f} MiB "
              f"with {loops:,} loops ({args.scale_cycles} cycles each): "
              f"{(filled - baseline) * 1024 * 1024 / loops:,.0f} bytes per tracked loop (target <= 2048)")
        times = []
        for _ in range(args.metrics_scrapes):
            started = time.perf_counter()
            status, text = monitor.get("/metrics")
            times.append((time.perf_counter() - started) * 1e3)
            assert status == 200
        print(f"/metrics        : {len(text) // 1024} KiB, render+fetch ms {_mmm(times).replace(',', '')} "
              f"(target <= 50 ms with 100,000 loops)")
    finally:
        monitor.stop()


def _probe_ms(monitor: Monitor, path: str, count: int) -> list[float]:
    """`count` GETs of `path`, each on a new connection (as a health probe does), in milliseconds."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        status, _ = monitor.get(path)
        times.append((time.perf_counter() - started) * 1e3)
        assert status == 200, status
    return times


def _mmm_ms(values: list[float]) -> str:
    return f"min {min(values):.2f}  median {statistics.median(values):.2f}  max {max(values):.2f} ms"


def budget(args: argparse.Namespace, workdir: Path) -> None:
    agents, services = 100, 20
    pairs = agents * services
    monitor = Monitor(workdir / "budget.sqlite3", "--max-loops", str(pairs * 2))
    try:
        idle_health = _probe_ms(monitor, "/healthz", args.probes)
        conn = monitor.connection()
        for cycle in range(4):  # cycles 0-2 rewrite, 3 appends
            for first in range(0, pairs, SPANS_PER_REQUEST):
                conn.request("POST", "/v1/traces", build_request(first, min(SPANS_PER_REQUEST, pairs - first), cycle,
                                                                 agents=agents, services=services), PROTOBUF)
                response = conn.getresponse()
                response.read()
                assert response.status == 200, response.status
        times, text = [], b""
        for _ in range(args.metrics_scrapes):
            started = time.perf_counter()
            status, text = monitor.get("/metrics")
            times.append((time.perf_counter() - started) * 1e3)
            assert status == 200
        series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
        overflow = sum(float(line.rsplit(b" ", 1)[1]) for line in text.splitlines()
                       if line.startswith(b"ctxwatch_monitor_series_overflow_total{"))
        print(f"budget          : {agents} agents x {services} services, default budget: {series:,} series "
              f"(limit 20,000), {len(text) // 1024} KiB, {overflow:,.0f} updates to overflow series")
        print(f"/metrics        : render+fetch {_mmm_ms(times)} (target <= 50 ms)")
        stop = threading.Event()

        def scrape() -> None:
            while not stop.is_set():
                monitor.get("/metrics")

        scraper = threading.Thread(target=scrape)
        scraper.start()
        try:
            busy_health = _probe_ms(monitor, "/healthz", args.probes)
        finally:
            stop.set()
            scraper.join()
        ratio = statistics.median(busy_health) / statistics.median(idle_health)
        print(f"/healthz        : idle monitor {_mmm_ms(idle_health)}; during back-to-back scrapes "
              f"{_mmm_ms(busy_health)}; median ratio {ratio:.2f}")
    finally:
        monitor.stop()


def decode_cost(args: argparse.Namespace, workdir: Path) -> None:
    """In-process decode of the same requests in both encodings and the two JSON baselines, interleaved, so
    load weighs on all alike."""
    step = args.loops_per_request
    protobuf = [build_request(first, step, 0) for first in range(0, args.loops, step)]
    json_bodies = [as_otlp_json(body) for body in protobuf]
    decoders = {
        "protobuf": (protobuf, lambda body: decode(body, "protobuf", SPAN_KEYS, RESOURCE_KEYS)),
        "json": (json_bodies, lambda body: decode(body, "json", SPAN_KEYS, RESOURCE_KEYS)),
        "json.loads": (json_bodies, json.loads),
        "json_format": (json_bodies, lambda body: decode_json_reference(body, SPAN_KEYS, RESOURCE_KEYS)),
    }
    rates: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(args.decode_rounds):
        for name, (bodies, read) in decoders.items():
            start = time.perf_counter()
            for body in bodies:
                read(body)
            rates[name].append(len(bodies) * SPANS_PER_REQUEST / (time.perf_counter() - start))
    print(f"decode          : {len(protobuf)} requests of {SPANS_PER_REQUEST} spans, {args.decode_rounds} rounds "
          f"(json.loads: parsing alone; json_format: every span by the reference decoder)")
    for name, values in rates.items():
        print(f"decode {name:11}: {_mmm(values)} spans/s")
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"ratios of the medians: json/protobuf {median['json'] / median['protobuf']:.3f}, "
          f"json/json.loads {median['json'] / median['json.loads']:.3f}, "
          f"json/json_format {median['json'] / median['json_format']:.2f}")


def hostile_sender(args: argparse.Namespace, workdir: Path) -> None:
    def requests(first_loop: int) -> list[bytes]:
        return [build_request(first_loop + first, args.loops_per_request, cycle)
                for cycle in range(0, 40, max(1, SPANS_PER_REQUEST // args.loops_per_request))
                for first in range(0, args.loops, args.loops_per_request)]

    polite = [as_otlp_json(body) for body in requests(0)]
    neighbour = [as_otlp_json(body) for body in requests(1_000_000)]
    slow = [json.dumps(json_format.MessageToDict(ExportTraceServiceRequest.FromString(body)),
                       separators=(",", ":")).encode() for body in requests(2_000_000)]
    headers = CONTENT_TYPES["json"]
    print(f"hostile sender  : {args.threads} well-behaved connections (OTLP/JSON, hex ids) from 127.0.0.1, alone, "
          f"then beside {args.threads} more from {HOSTILE_ADDRESS} sending as much: well-behaved too (the fair "
          f"share; these two interleaved), then hostile (base64 ids: every span read by json_format, pushing "
          f"all along); {args.hostile_seconds:g} s each, in runs of {args.slice_seconds:g} s")
    for label, extra in (("budget on ", ()), ("budget off", ("--slow-path-rate", "0"))):
        monitor = Monitor(workdir / f"hostile-{label.strip()}.sqlite3", *extra)
        try:
            alone, fair, beside = (Run(monitor, "/v1/traces", polite, args.threads, headers) for _ in range(3))
            others = {fair: Run(monitor, "/v1/traces", neighbour, args.threads, headers, source=HOSTILE_ADDRESS),
                      beside: Run(monitor, "/v1/traces", slow, args.threads, headers, source=HOSTILE_ADDRESS)}
            while fair.seconds < args.hostile_seconds:
                alone.run(args.slice_seconds)
                pushing = threading.Thread(target=others[fair].run, args=(args.slice_seconds,))
                pushing.start()
                fair.run(args.slice_seconds)
                pushing.join()
            # the hostile one pushes all along (its budget refills only while it pushes: the steady state)
            pushing = threading.Thread(target=others[beside].run, args=(args.hostile_seconds + 1,))
            pushing.start()
            while beside.seconds < args.hostile_seconds:
                beside.run(args.slice_seconds)
            pushing.join()
            reads = _sample(monitor.get("/metrics")[1].decode(), "ctxwatch_monitor_slow_path_reads_total")
            print(f"  {label}: alone {_mmm(alone.slices)} spans/s (p50 {alone.latency(0.5):.0f} ms)")
            for name, measured in (("beside a well-behaved one", fair), ("beside the hostile one  ", beside)):
                print(f"  {label}: {name} {_mmm(measured.slices)} spans/s (p50 {measured.latency(0.5):.0f} ms, "
                      f"p99 {measured.latency(0.99):.0f} ms), ratio to alone "
                      f"{statistics.median(measured.slices) / statistics.median(alone.slices):.2f}, statuses "
                      f"{measured.statuses}; the other's statuses {others[measured].statuses}")
            print(f"  {label}: {reads:,.0f} spans read by the slow path")
        finally:
            monitor.stop()


def idle_connections(args: argparse.Namespace, workdir: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.idle_connections + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard),
                                                    hard))
    monitor = Monitor(workdir / "idle.sqlite3")
    try:
        baseline = _probe_ms(monitor, "/healthz", args.probes)
        opened = [socket.create_connection((monitor.host, monitor.port)) for _ in range(args.idle_connections)]
        try:  # well within the default 10 s header timeout, which closes them
            loaded = _probe_ms(monitor, "/healthz", args.probes)
            ready = _probe_ms(monitor, "/readyz", args.probes)
        finally:
            for sock in opened:
                sock.close()
        print(f"/healthz        : no idle connections {_mmm_ms(baseline)}")
        print(f"/healthz        : {args.idle_connections:,} idle connections {_mmm_ms(loaded)}; median ratio "
              f"{statistics.median(loaded) / statistics.median(baseline):.2f}  (/readyz {_mmm_ms(ready)})")
    finally:
        monitor.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="full-ingest phase length (default 60)")
    parser.add_argument("--slice-seconds", type=float, default=2.0,
                        help="full-ingest runs, each after a decode-ceiling run (default 2)")
    parser.add_argument("--ceiling-share", type=float, default=0.5,
                        help="length of each decode-ceiling run, relative to a full-ingest run (default 0.5)")
    parser.add_argument("--overload-seconds", type=float, default=5.0)
    parser.add_argument("--loops", type=int, default=1024, help="concurrent loops (>= 100)")
    parser.add_argument("--loops-per-request", type=int, default=128)
    parser.add_argument("--threads", type=int, default=4, help="client connections")
    parser.add_argument("--encoding", choices=tuple(CONTENT_TYPES), default="protobuf",
                        help="OTLP/HTTP encoding of the throughput phase's requests (default protobuf)")
    parser.add_argument("--scale-loops", type=int, default=100_000)
    parser.add_argument("--scale-cycles", type=int, default=4, help="cycles per loop in the scale phase")
    parser.add_argument("--metrics-scrapes", type=int, default=20)
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--probes", type=int, default=200, help="/healthz probes per measurement")
    parser.add_argument("--idle-connections", type=int, default=1000)
    parser.add_argument("--decode-rounds", type=int, default=7, help="rounds of the decode phase (default 7)")
    parser.add_argument("--hostile-seconds", type=float, default=40.0,
                        help="well-behaved sender's time alone, and beside each other sender, per monitor (default 40)")
    parser.add_argument("--only", choices=("throughput", "scale", "budget", "idle", "decode", "hostile"),
                        action="append",
                        help="run only these phases (repeatable; default all)")
    args = parser.parse_args()
    if args.loops < 100:
        parser.error("--loops must be at least 100")
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory(prefix="ctxwatch-bench-") as tmp:
        phases = {"throughput": throughput, "scale": scale, "budget": budget, "idle": idle_connections,
                  "decode": decode_cost, "hostile": hostile_sender}
        for name, phase in phases.items():
            if (args.only is None and not (name == "scale" and args.skip_scale)) or name in (args.only or ()):
                phase(args, Path(tmp))


if __name__ == "__main__":
    main()
