"""Bad input never yields a 5xx, a crash or a traceback (issue 5, DESIGN.md "Monitor contract").

Hypothesis throws random bytes, truncated protobuf, wrong attribute types, NaN/inf/negative
figures and huge strings at POST /v1/traces of the real service (a subprocess); after every case
/healthz must answer. The OTLP error contract is checked case by case: 400 with a message for
malformed bodies, 413 over the cap (a gzip bomb included: the decompressed size counts), 415 for
other media types, partial_success naming each rejected span, 401 without the token (nothing
stored). schemathesis then fuzzes every operation of the OpenAPI schema the monitor serves.
"""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import MonitorProcess, metric_value
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ctxwatch import semconv

PROTOBUF = {"Content-Type": "application/x-protobuf"}
MAX_BODY = 4 << 20
TOKEN = "s3cret-token"
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MonitorProcess]:
    state = tmp_path_factory.mktemp("bad-input") / "state.sqlite3"
    proc = MonitorProcess(state, "--max-body-bytes", str(MAX_BODY)).start()
    try:
        yield proc
    finally:
        proc.stop()
        assert "Traceback" not in proc.stderr()


def _value(raw: Any) -> dict[str, Any]:
    """An OTLP AnyValue for a Python value (the type decides the field)."""
    if isinstance(raw, bool):
        return {"bool_value": raw}
    if isinstance(raw, int):
        return {"int_value": raw}
    if isinstance(raw, float):
        return {"double_value": raw}
    if isinstance(raw, bytes):
        return {"bytes_value": raw}
    if isinstance(raw, list):
        return {"array_value": {"values": [_value(v) for v in raw]}}
    return {"string_value": raw}


def request(*spans: dict[str, Any], resource: dict[str, Any] | None = None) -> bytes:
    """A protobuf ExportTraceServiceRequest with one span per attribute dict."""
    resource_attrs = [{"key": k, "value": _value(v)} for k, v in (resource or {"service.name": "fuzz"}).items()]
    return ExportTraceServiceRequest(resource_spans=[{
        "resource": {"attributes": resource_attrs},
        "scope_spans": [{"spans": [
            {"name": "ctxwatch compact", "trace_id": b"\x01" * 16, "span_id": (i + 1).to_bytes(8, "big"),
             "end_time_unix_nano": 1_700_000_000_000_000_000 + i,
             "attributes": [{"key": k, "value": _value(v)} for k, v in attrs.items()]}
            for i, attrs in enumerate(spans)]}],
    }]).SerializeToString()


def mutation(loop_id: str = "fuzz-loop", **overrides: Any) -> dict[str, Any]:
    attrs = {semconv.LOOP_ID: loop_id, semconv.MUTATION_KIND: "compact", semconv.DECISION: "patch",
             semconv.HASH_DISTANCE: 0.3, semconv.LITERALS_BEFORE: 10, semconv.LITERALS_LOST: 1,
             semconv.ORPHANS_TOOL_USE: 0, semconv.ORPHANS_TOOL_RESULT: 0, semconv.VIOLATIONS: ["literal_loss"]}
    attrs.update(overrides)
    return {k: v for k, v in attrs.items() if v is not None}


def post(server: MonitorProcess, body: bytes, headers: dict[str, str] | None = None) -> httpx.Response:
    response = server.post("/v1/traces", content=body, headers=headers or PROTOBUF)
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text
    assert server.get("/healthz").status_code == 200
    return response


def partial(response: httpx.Response) -> tuple[int, str]:
    assert response.status_code == 200
    message = ExportTraceServiceResponse.FromString(response.content)
    return message.partial_success.rejected_spans, message.partial_success.error_message


def status_message(response: httpx.Response) -> str:
    return status_pb2.Status.FromString(response.content).message


# --- hypothesis ------------------------------------------------------------------------------------

@FUZZ
@given(body=st.binary(max_size=4096), content_type=st.sampled_from(
    ["application/x-protobuf", "application/json", "application/protobuf"]), gzipped=st.booleans())
def test_random_bytes(server: MonitorProcess, body: bytes, content_type: str, gzipped: bool) -> None:
    headers = {"Content-Type": content_type}
    if gzipped:
        body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
    assert post(server, body, headers).status_code in (200, 400)


@FUZZ
@given(cut=st.integers(min_value=1, max_value=2000), n=st.integers(min_value=1, max_value=5))
def test_truncated_protobuf(server: MonitorProcess, cut: int, n: int) -> None:
    body = request(*[mutation(f"trunc-{i}") for i in range(n)])
    assert post(server, body[: min(cut, len(body) - 1)]).status_code in (200, 400)


_WRONG = st.one_of(st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(),
                   st.text(max_size=80), st.binary(max_size=16),
                   st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3))


@FUZZ
@given(key=st.sampled_from(sorted({semconv.LOOP_ID, semconv.MUTATION_KIND, semconv.DECISION, semconv.HASH_DISTANCE,
                                   semconv.LITERALS_BEFORE, semconv.LITERALS_LOST, semconv.ORPHANS_TOOL_USE,
                                   semconv.VIOLATIONS, semconv.PASS_NUMBER, semconv.CONTRACTION_STATE})),
       value=_WRONG)
def test_wrong_types_and_figures(server: MonitorProcess, key: str, value: Any) -> None:
    rejected, message = partial(post(server, request(mutation("typed-ok"), mutation("typed-probe", **{key: value}))))
    assert rejected in (0, 1)
    if rejected:
        assert "spans[1]" in message and key in message


@pytest.mark.parametrize("key,value", [
    (semconv.HASH_DISTANCE, math.nan), (semconv.HASH_DISTANCE, math.inf), (semconv.HASH_DISTANCE, -0.5),
    (semconv.HASH_DISTANCE, 1.5), (semconv.LITERALS_BEFORE, -1), (semconv.LITERALS_LOST, 50),
    (semconv.ORPHANS_TOOL_RESULT, -3), (semconv.HASH_DISTANCE, "0.3"), (semconv.LITERALS_LOST, 1.0),
    (semconv.DECISION, "maybe"), (semconv.VIOLATIONS, [1, 2]), (semconv.LOOP_ID, "x" * 100_000),
])
def test_invalid_span_is_rejected_by_name(server: MonitorProcess, key: str, value: Any) -> None:
    rejected, message = partial(post(server, request(mutation("named-ok"), mutation("named-bad", **{key: value}))))
    assert rejected == 1
    assert "resourceSpans[0].scopeSpans[0].spans[1]" in message
    assert key in message or semconv.LITERALS_LOST in message
    assert server.get("/api/loops/named-bad").status_code == 404


def test_json_encoding_and_json_errors(server: MonitorProcess) -> None:
    span = {"name": "ctxwatch rewrite", "endTimeUnixNano": "1700000000000000000", "attributes": [
        {"key": semconv.LOOP_ID, "value": {"stringValue": "json-loop"}},
        {"key": semconv.MUTATION_KIND, "value": {"stringValue": "rewrite"}},
        {"key": semconv.DECISION, "value": {"stringValue": "patch"}},
        {"key": semconv.HASH_DISTANCE, "value": {"doubleValue": 0.25}},
        {"key": semconv.LITERALS_BEFORE, "value": {"intValue": "12"}},
        {"key": semconv.LITERALS_LOST, "value": {"intValue": 2}}]}
    bad = {"name": "x", "attributes": [{"key": semconv.MUTATION_KIND, "value": {"stringValue": "rewrite"}},
                                       {"key": semconv.DECISION, "value": {"stringValue": "patch"}},
                                       {"key": semconv.LOOP_ID, "value": {"stringValue": "json-bad"}},
                                       {"key": semconv.HASH_DISTANCE, "value": {"doubleValue": "NaN"}}]}
    body = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span, bad]}]}]}
    response = post(server, json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert response.headers["content-type"] == "application/json"
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert semconv.HASH_DISTANCE in response.json()["partialSuccess"]["errorMessage"]
    detail = server.get("/api/loops/json-loop").json()
    assert detail["history"][0]["d"] == 0.25 and detail["history"][0]["literals_lost"] == 2

    for broken, where in ((b"{not json", "not valid JSON"), (b'{"resourceSpans": 3}', "resourceSpans"),
                          (b'{"resourceSpans": [{"scopeSpans": [{"spans": [7]}]}]}', "spans[0]")):
        response = post(server, broken, {"Content-Type": "application/json"})
        assert response.status_code == 400 and where in response.json()["message"]


def test_error_contract(server: MonitorProcess) -> None:
    response = post(server, b"\x0a\xff\xff\xff", PROTOBUF)
    assert response.status_code == 400 and "protobuf" in status_message(response)
    assert post(server, b"{}", {"Content-Type": "text/plain"}).status_code == 415
    assert post(server, b"{}", {"Content-Type": "application/json", "Content-Encoding": "br"}).status_code == 415
    too_big = request(mutation("big") | {"not.ours": "z" * (MAX_BODY + 10)})
    response = post(server, too_big)
    assert response.status_code == 413 and "limit" in status_message(response)
    response = post(server, b"\x1f\x8b\x08\x00garbage", {**PROTOBUF, "Content-Encoding": "gzip"})
    assert response.status_code == 400
    assert post(server, gzip.compress(request(mutation("gz-loop"))), {**PROTOBUF, "Content-Encoding": "gzip"}
                ).status_code == 200
    assert server.get("/api/loops/gz-loop").status_code == 200
    ignored = metric_value(server.get("/metrics").text, "ctxwatch_monitor_spans_ignored_total")
    assert partial(post(server, request({"http.method": "GET"}, {semconv.LOOP_ID: "only-resource-like"})))[0] == 0
    assert metric_value(server.get("/metrics").text, "ctxwatch_monitor_spans_ignored_total") == ignored + 2


def test_gzip_bomb_is_refused_without_inflating_it(server: MonitorProcess) -> None:
    deflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\x00" * (1 << 20)
    bomb = b"".join(deflater.compress(chunk) for _ in range(256)) + deflater.flush()  # 256 MiB inflated
    assert len(bomb) < MAX_BODY
    response = post(server, bomb, {**PROTOBUF, "Content-Encoding": "gzip"})
    assert response.status_code == 413 and "decompressed" in status_message(response)


def test_ten_thousand_spans_in_one_request(server: MonitorProcess) -> None:
    body = request(*[mutation(f"bulk-{i % 500}", **{semconv.HASH_DISTANCE: 0.5}) for i in range(10_000)])
    assert partial(post(server, body)) == (0, "")
    page = server.get("/api/loops", params={"limit": 1}).json()
    assert page["total"] >= 500
    assert server.get("/api/loops/bulk-7").json()["cycles"] == 20


def test_token_required(tmp_path: Path) -> None:
    proc = MonitorProcess(tmp_path / "auth.sqlite3", "--token", TOKEN, "--metrics-auth").start()
    try:
        body = request(mutation("auth-loop"))
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                        {"Authorization": "Bearer " + TOKEN[:-1]}):
            assert proc.post("/v1/traces", content=body, headers={**PROTOBUF, **headers}).status_code == 401
            assert proc.get("/api/loops", headers=headers).status_code == 401
            assert proc.get("/metrics", headers=headers).status_code == 401
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert proc.get("/api/loops", headers=good).json()["total"] == 0  # nothing stored
        assert metric_value(proc.get("/metrics", headers=good).text, "ctxwatch_monitor_spans_accepted_total") == 0
        assert proc.get("/healthz").status_code == 200 and proc.get("/readyz").status_code == 200
        assert proc.post("/v1/traces", content=body, headers={**PROTOBUF, **good}).status_code == 200
        assert proc.get("/api/loops", headers=good).json()["total"] == 1
    finally:
        proc.stop()


def test_schemathesis_against_the_openapi_schema(server: MonitorProcess) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).with_name("schemathesis")), "run", server.url + "/openapi.json",
         "--checks", "not_a_server_error,response_schema_conformance", "--max-examples", "25", "--seed", "5",
         "--workers", "1"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert server.get("/healthz").status_code == 200
