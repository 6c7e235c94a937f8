"""OTLP/gRPC beside OTLP/HTTP (issue 15, item 2), driven by the Python SDK's own gRPC exporter.

A real guard's spans reach the monitor through `opentelemetry-exporter-otlp-proto-grpc`, set up in
code and, as a user would, by `opentelemetry-instrument` with `OTEL_TRACES_EXPORTER=otlp` (which
resolves to gRPC) and nothing else but the endpoint. The error contract over gRPC: a body that is not
an ExportTraceServiceRequest is INVALID_ARGUMENT with a google.rpc.BadRequest, an invalid span is
`partial_success`, a missing token UNAUTHENTICATED, and a request past the admission limit (shared
with OTLP/HTTP) RESOURCE_EXHAUSTED with a google.rpc.RetryInfo, which the OTLP spec makes retryable.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest
from conftest import MonitorProcess, metric_value
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from test_bad_input import mutation, request

from ctxwatch.demo.fleet import ScratchpadLoop
from ctxwatch.telemetry import MutationTelemetry
from ctxwatch_monitor.grpc_server import TRACE_EXPORT

TOKEN = "grpc-s3cret"


def export(target: str, body: bytes, metadata: tuple[tuple[str, str], ...] = ()) -> bytes:
    """One raw TraceService/Export call (the body is sent as given)."""
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(TRACE_EXPORT, request_serializer=None, response_deserializer=None)
        return call(body, metadata=metadata, timeout=30)


def status_details(error: grpc.RpcError) -> status_pb2.Status:
    raw = dict(error.trailing_metadata())["grpc-status-details-bin"]
    return status_pb2.Status.FromString(raw)


def test_the_sdk_grpc_exporter_delivers_a_guards_spans(monitor: MonitorProcess) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "grpc-agent"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint="http://" + monitor.grpc_target,
                                                                    insecure=True)))
    loop = ScratchpadLoop("scratchpad-writer", 0, 4150, MutationTelemetry(provider))
    while not loop.done:
        loop.step()
    assert provider.force_flush(30_000)
    provider.shutdown()
    view = monitor.get(f"/api/loops/{loop.loop_id}").json()
    assert loop.guard.detector.state == "contracting"
    assert (view["state"], view["cycles"], view["flagged_cycle"]) == ("contracting", loop.guard.detector.cycle,
                                                                       loop.guard.halted_at)
    assert view["source"] == "monitor"


def test_otel_traces_exporter_otlp_defaults_reach_the_monitor(monitor: MonitorProcess, tmp_path: Path) -> None:
    """`opentelemetry-instrument` with OTEL_TRACES_EXPORTER=otlp: the SDK picks OTLP/gRPC by default."""
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent("""
        from ctxwatch.demo.fleet import ScratchpadLoop
        from ctxwatch.telemetry import MutationTelemetry

        loop = ScratchpadLoop("scratchpad-writer", 1, 4151, MutationTelemetry())  # the global providers
        while not loop.done:
            loop.step()
        print(loop.loop_id, loop.guard.detector.state, loop.guard.detector.cycle, loop.guard.halted_at)
    """))
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
           "OTEL_LOGS_EXPORTER": "otlp", "OTEL_SERVICE_NAME": "instrumented-agent",
           "OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + monitor.grpc_target}
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED"):
        env.pop(name, None)
    proc = subprocess.run([str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable,
                           str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Failed to export" not in proc.stderr and "UNAVAILABLE" not in proc.stderr, proc.stderr
    loop_id, state, cycles, halted_at = proc.stdout.split()
    view = monitor.get(f"/api/loops/{loop_id}").json()
    assert (view["state"], str(view["cycles"]), str(view["flagged_cycle"])) == (state, cycles, halted_at)


def test_grpc_error_contract(tmp_path: Path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--token", TOKEN, "--max-inflight", "1").start()
    auth = (("authorization", f"Bearer {TOKEN}"),)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            export(monitor.grpc_target, request(mutation("no-token")))
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

        with pytest.raises(grpc.RpcError) as refused:
            export(monitor.grpc_target, b"\x0a\xff\xff\xff", auth)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        status = status_details(refused.value)
        violation = error_details_pb2.BadRequest()
        assert status.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and status.details[0].Unpack(violation)
        assert violation.field_violations[0].description

        body = request(mutation("grpc-ok"), mutation("grpc-bad", **{"ctxwatch.hash.distance": 7.0}))
        response = ExportTraceServiceResponse.FromString(export(monitor.grpc_target, body, auth))
        assert response.partial_success.rejected_spans == 1
        assert "spans[1]" in response.partial_success.error_message
        api = {"Authorization": f"Bearer {TOKEN}"}
        assert monitor.get("/api/loops/grpc-ok", headers=api).status_code == 200
        assert monitor.get("/api/loops/grpc-bad", headers=api).status_code == 404

        # an OTLP/HTTP export that sends its body slowly holds the one admission slot
        release = threading.Event()

        def slow_body() -> Iterator[bytes]:
            yield b"\x0a"
            release.wait(30)
            yield b"\x00"

        slow = threading.Thread(target=lambda: httpx.post(
            monitor.url + "/v1/traces", content=slow_body(), timeout=60,
            headers={**api, "Content-Type": "application/x-protobuf", "Content-Length": "2"}))
        slow.start()
        try:
            for _ in range(300):
                if metric_value(monitor.get("/metrics").text, "ctxwatch_monitor_inflight_requests") == 1:
                    break
                time.sleep(0.02)
            with pytest.raises(grpc.RpcError) as refused:
                export(monitor.grpc_target, request(mutation("grpc-busy")), auth)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            retry = error_details_pb2.RetryInfo()
            assert status_details(refused.value).details[0].Unpack(retry) and retry.retry_delay.seconds >= 1
        finally:
            release.set()
            slow.join(60)
        export(monitor.grpc_target, request(mutation("grpc-after")), auth)
        assert monitor.get("/api/loops/grpc-after", headers=api).status_code == 200
    finally:
        monitor.stop()


def test_a_busy_grpc_port_is_a_one_line_error(monitor: MonitorProcess, tmp_path: Path) -> None:
    port = monitor.grpc_target.rsplit(":", 1)[1]
    proc = subprocess.run([sys.executable, "-m", "ctxwatch_monitor", "--port", "0", "--grpc-port", port,
                           "--state", str(tmp_path / "other.sqlite3")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "OTLP/gRPC" in proc.stderr and port in proc.stderr
