"""One sender pushing its spans onto the slow decoding path on purpose cannot slow the others down.

A real monitor (`--slow-path-burst 40`, small so that the test is short, and `--slow-path-rate 0.001`, so
that the bucket refills by less than one read in the longest the test may take on a loaded machine: what is
refused does not depend on the machine's speed) and three senders on three loopback addresses: a hostile one
posting OTLP/JSON in protobuf's own JSON mapping (base64 ids: every span read by json_format, about eight times
the cost of the fast reader) and protobuf with an invalid byte in a span (read span by span); a well-behaved
one posting OTLP/JSON as the OTLP specification
writes it; and an agent exporting protobuf through the OpenTelemetry SDK. The hostile sender's slow
requests are refused with 429, `Retry-After` and a message naming the budget once its budget is spent,
nothing of them applied, and counted; while its budget is spent its OTLP/JSON requests are refused before
they are parsed, and its valid protobuf still goes through; the others are never refused.
Once its bucket has refilled, a client in debt has its retry accepted (the exporters retry a 429): a second
monitor, with a rate that refills in seconds. Over OTLP/gRPC the same refusal is RESOURCE_EXHAUSTED with a
RetryInfo.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import grpc
import httpx
import pytest
from conftest import MonitorProcess, Sender, metric_value
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_bad_input import mutation, request
from test_grpc import export, status_details

from ctxwatch import semconv
from ctxwatch_monitor.clients import client_key

HOSTILE, POLITE = "127.0.0.2", "127.0.0.3"
STILL = "0.001"  # a slow-path rate whose refill over a test's run, however slow the machine, is under one read
JSON = {"Content-Type": "application/json"}
PROTOBUF = {"Content-Type": "application/x-protobuf"}


def spans(loop_id: str, first: int, count: int) -> bytes:
    """A protobuf request of `count` numbered mutation spans of one loop."""
    return request(*[mutation(loop_id, **{semconv.SEQUENCE: s, semconv.GUARD_INSTANCE: loop_id})
                     for s in range(first, first + count)])


def as_json(body: bytes, hex_ids: bool) -> bytes:
    """The request in protobuf's JSON mapping (base64 ids: the slow path), or with hex ids as OTLP/JSON says."""
    document: dict[str, Any] = json_format.MessageToDict(ExportTraceServiceRequest.FromString(body))
    if hex_ids:
        for resource_spans in document["resourceSpans"]:
            for span in resource_spans["scopeSpans"][0]["spans"]:
                for key in ("traceId", "spanId"):
                    span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def client(monitor: MonitorProcess, address: str) -> httpx.Client:
    """An HTTP client sending from `address` (a new connection, from a port of its own)."""
    return httpx.Client(base_url=monitor.url, timeout=60, transport=httpx.HTTPTransport(local_address=address))


def refusals(monitor: MonitorProcess, encoding: str) -> float:
    return metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_slow_path_refusals_total", encoding=encoding)


def test_a_sender_pushing_spans_onto_the_slow_path_is_refused_with_429_and_the_others_are_not(tmp_path: Any) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--slow-path-rate", STILL, "--slow-path-burst", "40").start()
    hostile, polite = client(monitor, HOSTILE), client(monitor, POLITE)
    agent = Sender(monitor.url)
    try:
        statuses: list[int] = []
        sent, hostile_accepted = 1, 0
        for _ in range(3):  # 30 slow spans a request: the first leaves 10 of the 40 saved up, the second runs the
            # bucket 20 into debt (a request's first read needs the bucket above 0), the third is refused
            answer = hostile.post("/v1/traces", content=as_json(spans("hostile", sent, 30), hex_ids=False),
                                  headers=JSON)
            statuses.append(answer.status_code)
            if answer.status_code == 200:
                sent, hostile_accepted = sent + 30, hostile_accepted + 30
            ok = polite.post("/v1/traces", content=as_json(spans("polite", 10 * len(statuses) - 9, 10), hex_ids=True),
                             headers=JSON)
            assert ok.status_code == 200 and ok.json() == {}
            agent.mutation("agent-loop")
        assert statuses == [200, 200, 429], statuses
        assert answer.headers["retry-after"] == "1"
        message = json_format.Parse(answer.text, status_pb2.Status()).message
        assert "slow decoding path" in message and f"{STILL} a second, 40 at once" in message and "hex ids" in message
        assert refusals(monitor, "json") == 1

        # nothing of a refused request is applied; while its budget is spent, the hostile sender's OTLP/JSON is
        # refused before it is parsed, well-formed or not (nothing of it read), and its protobuf still goes through
        assert monitor.get("/api/loops/hostile").json()["sequence"] == hostile_accepted
        reads = metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_slow_path_reads_total", encoding="json")
        fast = hostile.post("/v1/traces", content=as_json(spans("hostile", sent, 10), hex_ids=True), headers=JSON)
        assert fast.status_code == 429 and "slow decoding path is spent" in fast.text
        assert metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_slow_path_reads_total",
                            encoding="json") == reads
        assert monitor.get("/api/loops/hostile").json()["sequence"] == hostile_accepted
        assert hostile.post("/v1/traces", content=b"{not json", headers=JSON).status_code == 429  # never parsed
        with client(monitor, HOSTILE) as again:  # a new connection (another source port): the same client
            assert again.post("/v1/traces", content=b"{}", headers=JSON).status_code == 429
        valid = hostile.post("/v1/traces", content=spans("hostile", sent, 10), headers=PROTOBUF)
        assert valid.status_code == 200 and monitor.get("/api/loops/hostile").json()["sequence"] == sent + 9
        sent += 10
        broken = spans("hostile", sent, 3).replace(b"hostile", b"host\xffle", 1)  # read span by span: refused
        assert hostile.post("/v1/traces", content=broken, headers=PROTOBUF).status_code == 429
        assert refusals(monitor, "protobuf") == 1 and monitor.get("/api/loops/hostile").json()["sequence"] == sent - 1

        # the others were never refused, and everything they sent is there
        agent.flush()
        assert monitor.get("/api/loops/polite").json()["sequence"] == 10 * len(statuses)
        assert monitor.get("/api/loops/agent-loop").status_code == 200
        reads = metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_slow_path_reads_total", encoding="json")
        assert reads >= hostile_accepted

        # a request needing more slow reads than the bucket saves up would never fit: 413, not retried
        with client(monitor, "127.0.0.4") as fresh:
            too_big = fresh.post("/v1/traces", content=as_json(spans("big", 1, 41), hex_ids=False), headers=JSON)
        assert too_big.status_code == 413 and "retry-after" not in too_big.headers
        assert "more than 40" in json_format.Parse(too_big.text, status_pb2.Status()).message
        assert monitor.get("/api/loops/big").status_code == 404
    finally:
        agent.close()
        hostile.close()
        polite.close()
        monitor.close(grace_s=30.0)


def test_a_client_in_debt_has_its_retry_accepted_once_its_bucket_has_refilled(tmp_path: Any) -> None:
    """The budget's debt is temporary: a client that ran its bucket into debt has the request it sends again, as an
    exporter retries a 429 after `Retry-After`, accepted once the bucket has refilled (20 reads a second here).
    Whether a retry comes before that, and is refused, depends on the machine's speed: only its outcome is checked."""
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--slow-path-rate", "20", "--slow-path-burst", "40").start()
    hostile = client(monitor, HOSTILE)
    try:
        for first in (1, 41):  # 40 slow reads each: the bucket emptied, then 40 into debt
            assert hostile.post("/v1/traces", content=as_json(spans("indebted", first, 40), hex_ids=False),
                                headers=JSON).status_code == 200
        deadline = time.monotonic() + 120
        retry = as_json(spans("indebted", 81, 10), hex_ids=False)
        while (answer := hostile.post("/v1/traces", content=retry, headers=JSON)).status_code == 429:
            assert time.monotonic() < deadline, "the slow-path budget never refilled"
            time.sleep(float(answer.headers["retry-after"]))
        assert answer.status_code == 200 and monitor.get("/api/loops/indebted").json()["sequence"] == 90
    finally:
        hostile.close()
        monitor.close(grace_s=30.0)


def test_over_grpc_a_spent_slow_path_budget_is_resource_exhausted_with_retry_info(tmp_path: Any) -> None:
    """The same budget over OTLP/gRPC (the same receiver): protobuf with an invalid byte in a span is read
    span by span, each span charged; once spent, RESOURCE_EXHAUSTED with a RetryInfo (retried by the
    exporters) and the budget named; valid protobuf from the same client still goes through."""
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--slow-path-rate", STILL, "--slow-path-burst", "4").start()
    try:
        broken = spans("grpc-slow", 1, 3).replace(b"grpc-slow", b"grpc\xffslow", 1)
        export(monitor.grpc_target, broken)  # 3 slow reads of the 4 saved up
        export(monitor.grpc_target, broken)  # 1 left: taken, 2 into debt
        with pytest.raises(grpc.RpcError) as refused:
            export(monitor.grpc_target, broken)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        status = status_details(refused.value)
        retry = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(retry) and retry.retry_delay.seconds >= 1
        assert "slow decoding path is spent" in status.message
        export(monitor.grpc_target, spans("grpc-fast", 1, 3))
        assert monitor.get("/api/loops/grpc-fast").json()["sequence"] == 3
        assert refusals(monitor, "protobuf") == 1
    finally:
        monitor.close(grace_s=30.0)


@pytest.mark.parametrize(("address", "client"), [
    ("192.0.2.7", "192.0.2.7"),
    ("::ffff:192.0.2.7", "192.0.2.7"),                      # an IPv4 client on a dual-stack socket
    ("2001:db8:1:2::1", "2001:db8:1:2::/64"),               # a host picks any address of its /64 at will
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),
    ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
    ("testclient", "testclient"),                           # not an IP address: one client by its name
])
def test_a_client_is_its_ipv4_address_or_its_ipv6_slash_64(address: str, client: str) -> None:
    assert client_key(address) == client
