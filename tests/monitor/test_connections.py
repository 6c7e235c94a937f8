"""Connection limits (issue 15, item 6), with real sockets on 127.0.0.1 against the real monitor.

1,000 idle connections used to make every endpoint answer uvicorn's plain-text 503 and were never
timed out; 16 slow senders locked every agent out of ingest; /v1/metrics had no admission. Now
/healthz and /readyz answer while 1,000 connections idle, idle and half-sent heads are closed after
the header timeout, past `max_connections` the longest-idle connection makes room, a 503 under
overload is an OTLP Status with Retry-After, one client address holds at most its share of the
ingest slots, a body that does not arrive in time is answered 408 and frees its slot, and
/v1/metrics shares the admission of /v1/traces. Counts and times are bounded; no timing is asserted.
"""

from __future__ import annotations

import contextlib
import json
import resource
import select
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from conftest import MonitorProcess, Sender
from google.rpc import status_pb2

IDLE = 1000


@pytest.fixture(autouse=True)
def _enough_file_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4096 if hard == resource.RLIM_INFINITY else min(4096, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _address(monitor: MonitorProcess) -> tuple[str, int]:
    parts = urlsplit(monitor.url)
    return parts.hostname or "127.0.0.1", parts.port or 0


@contextlib.contextmanager
def _sockets(monitor: MonitorProcess, count: int, first_bytes: bytes = b"",
             source: str = "127.0.0.1") -> Iterator[list[socket.socket]]:
    opened = []
    try:
        for _ in range(count):
            sock = socket.create_connection(_address(monitor), timeout=10, source_address=(source, 0))
            if first_bytes:
                sock.sendall(first_bytes)
            opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            sock.close()


def _slow_post(path: str, content_type: str = "application/x-protobuf", length: int = 100_000) -> bytes:
    """A request head and the first bytes of a body that never arrives in full."""
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode() + b"\x0a" * 10


def _response(sock: socket.socket, timeout: float = 20) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the next response on `sock` (status 0: closed without one)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, {}, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split(" ")[1]), {k.lower(): v for k, v in headers.items()}, body


def _closed_by_server(sockets: list[socket.socket], deadline: float) -> int:
    """How many of `sockets` the server closed (EOF or reset) before `deadline`."""
    pending = {sock.fileno(): sock for sock in sockets}
    poller, closed = select.poll(), 0
    for fd in pending:
        poller.register(fd, select.POLLIN)
    while pending and time.monotonic() < deadline:
        for fd, _ in poller.poll(500):
            try:
                data = pending[fd].recv(65536)
            except OSError:
                data = b""
            if not data:
                closed += 1
                poller.unregister(fd)
                del pending[fd]
    return closed


def test_health_answers_under_1000_idle_connections_which_time_out(tmp_path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--header-timeout", "3").start()
    try:
        with _sockets(monitor, IDLE) as idle, _sockets(monitor, 50, b"GET /healthz HTTP/1.1\r\nHost:") as half:
            assert monitor.get("/healthz").status_code == 200
            assert monitor.get("/readyz").status_code == 200
            sender = Sender(monitor.url)
            sender.mutation("under-siege", d=0.5, before=10)
            sender.flush()
            sender.close()
            assert monitor.get("/api/loops/under-siege").status_code == 200
            assert _closed_by_server(idle + half, time.monotonic() + 60) == IDLE + 50
        assert monitor.get("/healthz").status_code == 200
    finally:
        assert monitor.stop() == 0


def test_past_max_connections_the_longest_idle_make_room(tmp_path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--max-connections", "50").start()
    try:
        with _sockets(monitor, 80) as idle:
            for _ in range(5):
                assert monitor.get("/healthz").status_code == 200
            assert _closed_by_server(idle[:40], time.monotonic() + 10) >= 30
    finally:
        monitor.stop()


def test_overload_503_is_an_otlp_status_with_retry_after_and_health_still_answers(tmp_path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--max-connections", "8", "--max-inflight", "16",
                             "--max-inflight-per-client", "16", "--retry-after", "7").start()
    try:
        with _sockets(monitor, 8, _slow_post("/v1/metrics")):  # eight requests under way, none idle
            time.sleep(0.5)
            response = httpx.post(monitor.url + "/v1/traces", content=b"{}", timeout=30,
                                  headers={"Content-Type": "application/json"})
            assert response.status_code == 503
            assert response.headers["retry-after"] == "7"
            assert response.headers["content-type"] == "application/json"
            assert json.loads(response.content)["code"] == 14  # UNAVAILABLE
            response = httpx.post(monitor.url + "/v1/traces", content=b"", timeout=30,
                                  headers={"Content-Type": "application/x-protobuf"})
            assert response.status_code == 503
            assert "connections" in status_pb2.Status.FromString(response.content).message
            assert httpx.get(monitor.url + "/healthz", timeout=30).status_code == 200
            assert httpx.get(monitor.url + "/readyz", timeout=30).status_code == 200
        assert httpx.post(monitor.url + "/v1/traces", content=b"", timeout=30,
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 200
    finally:
        monitor.stop()
    assert "Traceback" not in monitor.stderr()


def test_slow_senders_hold_their_share_only_and_time_out(tmp_path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--max-inflight", "16", "--max-inflight-per-client", "8",
                             "--body-timeout", "2").start()
    other_agent = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30)
    try:
        with _sockets(monitor, 16, _slow_post("/v1/traces")) as slow:
            statuses = []
            for sock in slow:
                status, headers, _ = _response(sock)
                statuses.append(status)
                if status == 429:
                    assert "retry-after" in headers
            # 8 of the 16 were refused at once; 8 were admitted, then timed out waiting for their bodies
            assert statuses.count(429) == 8 and statuses.count(408) == 8, statuses
        with _sockets(monitor, 16, _slow_post("/v1/traces")):
            time.sleep(0.5)
            response = other_agent.post(monitor.url + "/v1/traces", content=b"",
                                        headers={"Content-Type": "application/x-protobuf"})
            assert response.status_code == 200  # another address still has slots
    finally:
        other_agent.close()
        monitor.stop()
    assert "Traceback" not in monitor.stderr()


def test_metrics_ingest_shares_the_admission(tmp_path) -> None:
    monitor = MonitorProcess(tmp_path / "state.sqlite3", "--max-inflight", "2").start()
    try:
        with _sockets(monitor, 2, _slow_post("/v1/metrics")):
            time.sleep(0.5)
            for path in ("/v1/traces", "/v1/metrics"):
                response = httpx.post(monitor.url + path, content=b"", timeout=30,
                                      headers={"Content-Type": "application/x-protobuf"})
                assert response.status_code == 429, path
                assert response.headers["retry-after"] == "1"
                assert "in flight" in status_pb2.Status.FromString(response.content).message
        assert httpx.post(monitor.url + "/v1/metrics", content=b"", timeout=30,
                          headers={"Content-Type": "application/x-protobuf"}).status_code == 200
    finally:
        monitor.stop()
