"""No span can poison the monitor's state (issue 15, item 3).

Each poison span of the issue — an integer outside int64, a string that is not valid UTF-8 (a lone
surrogate in JSON, invalid bytes in protobuf), a 10^30 `ctxwatch.episode` — is sent to the real
service (a subprocess) next to an innocent span in the same request: the poison span is rejected on
its own in `partial_success`, the innocent one is stored, and `/metrics`, `/api/loops` and `/healthz`
answer 200 afterwards. The last test restarts the monitor on the same state file: everything innocent
is back, nothing poisoned was persisted. Unknown fields inside an OTLP JSON value are ignored (the
OTLP JSON mapping says so), and 400s carry a google.rpc.BadRequest detail naming the field.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import AGENT, MonitorProcess
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from test_bad_input import mutation, request

from ctxwatch import semconv
from ctxwatch_monitor.metric_store import Counter, MetricSet
from ctxwatch_monitor.records import MAX_CONTEXT_FIGURE

JSON = {"Content-Type": "application/json"}
PROTOBUF = {"Content-Type": "application/x-protobuf"}
INNOCENT: list[str] = []   # loop ids stored by the tests below, checked again after the restart


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("poison") / "state.sqlite3"


@pytest.fixture(scope="module")
def server(state: Path) -> Iterator[MonitorProcess]:
    proc = MonitorProcess(state).start()
    try:
        yield proc
    finally:
        proc.stop()
        assert "Traceback" not in proc.stderr()


def _json_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_json_value(v) for v in value]}}
    return {"stringValue": value}


def json_request(*spans: dict[str, Any], resource: dict[str, Any] | None = None) -> bytes:
    """An OTLP/JSON request; a value given as a dict is sent as that AnyValue object unchanged.
    `ensure_ascii` writes a lone surrogate as the escape "\\ud800", as a JSON client would."""
    def attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": k, "value": v if isinstance(v, dict) else _json_value(v)} for k, v in attrs.items()]

    body = {"resourceSpans": [{"resource": {"attributes": attributes(resource or {"service.name": "poison"})},
                               "scopeSpans": [{"spans": [
                                   {"name": "ctxwatch compact", "traceId": "01" * 16, "spanId": f"{i + 1:016x}",
                                    "endTimeUnixNano": str(1_700_000_000_000_000_000 + i),
                                    "attributes": attributes(attrs)} for i, attrs in enumerate(spans)]}]}]}
    return json.dumps(body, ensure_ascii=True).encode()


def protobuf_with_bytes(placeholder: str, replacement: bytes, *spans: dict[str, Any],
                        resource: dict[str, Any] | None = None) -> bytes:
    """A protobuf request with `placeholder` (a string in it) replaced by `replacement` of the same length,
    which may be invalid UTF-8: no protobuf runtime would serialize that, a hostile client can."""
    body = request(*spans, resource=resource)
    assert len(replacement) == len(placeholder.encode()) and body.count(placeholder.encode()) == 1
    return body.replace(placeholder.encode(), replacement)


def rejected(response: httpx.Response) -> tuple[int, str]:
    assert response.status_code == 200, response.text
    if response.headers["content-type"] == "application/json":
        partial = response.json().get("partialSuccess", {})
        return int(partial.get("rejectedSpans", 0)), partial.get("errorMessage", "")
    message = ExportTraceServiceResponse.FromString(response.content).partial_success
    return message.rejected_spans, message.error_message


def assert_serving(server: MonitorProcess) -> dict[str, Any]:
    """/metrics, /api/loops and /healthz answer 200; returns the loops page."""
    metrics = server.get("/metrics")
    assert metrics.status_code == 200, metrics.text
    metrics.content.decode("utf-8")
    loops = server.get("/api/loops", params={"limit": 1000})
    assert loops.status_code == 200, loops.text
    assert server.get("/healthz").status_code == 200
    assert server.get("/api/fleet").status_code == 200
    return loops.json()


def send(server: MonitorProcess, body: bytes, headers: dict[str, str], innocent: str, poisoned: int = 1) -> str:
    """Post `body` (one innocent span first, then poison), check only the poison was rejected."""
    count, message = rejected(server.post("/v1/traces", content=body, headers=headers))
    assert count == poisoned, message
    ids = {loop["loop_id"] for loop in assert_serving(server)["loops"]}
    assert innocent in ids
    INNOCENT.append(innocent)
    return message


HUGE = "9" * 400
SURROGATE = "x\ud800y"


@pytest.mark.parametrize("key", [semconv.LITERALS_BEFORE, semconv.PASS_NUMBER, semconv.EPISODE, semconv.SEQUENCE])
def test_json_integer_outside_int64_is_rejected(server: MonitorProcess, key: str) -> None:
    innocent = f"json-int-ok-{key}"
    body = json_request(mutation(innocent), mutation(f"json-int-bad-{key}", **{key: {"intValue": HUGE}}))
    message = send(server, body, JSON, innocent)
    assert key in message and "int64" in message and "spans[1]" in message
    # unquoted, as a JSON number, too; and just past the edge
    for raw in (int(HUGE), 2**63):
        body = json_request(mutation(innocent), mutation(f"json-int-bad-{key}", **{key: {"intValue": raw}}))
        assert "int64" in send(server, body, JSON, innocent)


@pytest.mark.parametrize("key", [semconv.LITERALS_BEFORE, semconv.ORPHANS_TOOL_USE, semconv.SIZE_AFTER,
                                 semconv.TOKENS_BEFORE, *semconv.CACHE_FIGURES])
def test_a_figure_beyond_any_context_window_is_rejected_alone(server: MonitorProcess, key: str) -> None:
    # review F8 (session 7): one span of a new loop added 2**62 tokens to a counter every honest sender of its
    # agent and service labels shares, for good; a count of one context is at most MAX_CONTEXT_FIGURE
    innocent = f"json-figure-ok-{key}"
    body = json_request(mutation(innocent, **{key: 7}), mutation(f"json-figure-bad-{key}", **{key: 2**62}))
    message = send(server, body, JSON, innocent)
    assert "spans[1]" in message and key in message and "more than any context window" in message


@pytest.mark.parametrize("key", semconv.CACHE_FIGURES)
@pytest.mark.parametrize("value, problem", [(-1, "must be >= 0"), ("12", "must be an int"), (1.5, "must be an int"),
                                            (True, "must be an int"), ({"intValue": HUGE}, "int64")])
def test_a_hostile_cache_figure_is_rejected_alone(server: MonitorProcess, key: str, value: Any, problem: str) -> None:
    # issue 16: the prompt-cache figures are validated like every other count, per span
    innocent = f"json-cache-ok-{key}"
    body = json_request(mutation(innocent, **{key: 7}), mutation(f"json-cache-bad-{key}", **{key: value}))
    message = send(server, body, JSON, innocent)
    assert "spans[1]" in message and key in message and problem in message
    field = dict(zip(semconv.CACHE_FIGURES, ("invalidated_chars", "invalidated_tokens", "read_tokens",
                                             "creation_tokens"), strict=True))[key]
    cache = server.get(f"/api/loops/{innocent}").json()["cache"]
    assert cache[field] % 7 == 0 and cache[field] > 0  # 7 per innocent span sent (one per parameter)
    assert server.get(f"/api/loops/json-cache-bad-{key}").status_code == 404


def test_json_episode_of_ten_to_the_thirty_is_rejected(server: MonitorProcess) -> None:
    body = json_request(mutation("json-episode-ok", **{semconv.EPISODE: 3}),
                        mutation("json-episode-bad", **{semconv.EPISODE: 10**30}))
    message = send(server, body, JSON, "json-episode-ok")
    assert semconv.EPISODE in message
    assert server.get("/api/loops/json-episode-ok").json()["episode"] == 3


def test_json_double_too_large_for_a_float_is_rejected(server: MonitorProcess) -> None:
    """An integer of 400 digits where a double goes: json_format's float() overflows (it was a 500)."""
    body = json_request(mutation("json-double-ok"), mutation("json-double-bad",
                                                             **{semconv.HASH_DISTANCE: {"doubleValue": int(HUGE)}}))
    message = send(server, body, JSON, "json-double-ok")
    assert "spans[1]" in message and semconv.HASH_DISTANCE in message and "too large for a double" in message


@pytest.mark.parametrize("key", [semconv.LOOP_ID, AGENT, semconv.SERVICE_NAME, semconv.CONTRACTION_STATE,
                                 semconv.VIOLATIONS])
def test_json_lone_surrogate_is_rejected(server: MonitorProcess, key: str) -> None:
    innocent = f"json-utf8-ok-{key}"
    value = [SURROGATE] if key == semconv.VIOLATIONS else SURROGATE
    poison = mutation(f"json-utf8-bad-{key}", **{key: value})
    message = send(server, json_request(mutation(innocent), poison), JSON, innocent)
    assert "spans[1]" in message and key in message


def test_json_lone_surrogate_in_the_resource_rejects_its_spans(server: MonitorProcess) -> None:
    good = json_request(mutation("json-resource-ok"))
    assert rejected(server.post("/v1/traces", content=good, headers=JSON))[0] == 0
    bad = json_request(mutation("json-resource-bad-a", **{semconv.LOOP_ID: None}),
                       resource={"service.name": SURROGATE, semconv.LOOP_ID: "json-resource-bad-b"})
    count, message = rejected(server.post("/v1/traces", content=bad, headers=JSON))
    assert count == 1 and "service.name" in message
    assert_serving(server)
    INNOCENT.append("json-resource-ok")


@pytest.mark.parametrize("key", [semconv.LOOP_ID, AGENT, semconv.SERVICE_NAME, "not.read.by.the.monitor"])
def test_protobuf_invalid_utf8_is_rejected_alone(server: MonitorProcess, key: str) -> None:
    innocent = f"pb-utf8-ok-{key}"
    body = protobuf_with_bytes("PLACEHOLDER", b"PLACE\xff\xfeLDER", mutation(innocent),
                               mutation(f"pb-utf8-bad-{key}", **{key: "PLACEHOLDER"}), mutation(innocent + "-2"))
    message = send(server, body, PROTOBUF, innocent)
    assert "spans[1]" in message and "UTF-8" in message
    assert server.get(f"/api/loops/{innocent}-2").status_code == 200
    INNOCENT.append(innocent + "-2")


def test_protobuf_invalid_utf8_in_a_resource_rejects_only_its_spans(server: MonitorProcess) -> None:
    body = protobuf_with_bytes("PLACEHOLDER", b"PLACE\xff\xfeLDER", mutation("pb-resource-bad"),
                               resource={"service.name": "PLACEHOLDER"})
    good = request(mutation("pb-resource-ok"))
    count, message = rejected(server.post("/v1/traces", content=body, headers=PROTOBUF))
    assert count == 1 and "resource" in message
    assert rejected(server.post("/v1/traces", content=good, headers=PROTOBUF))[0] == 0
    assert_serving(server)
    INNOCENT.append("pb-resource-ok")


def test_protobuf_int64_extremes_are_stored_and_rendered(server: MonitorProcess) -> None:
    """The largest values protobuf can carry are accepted (the figures of one context: the largest a context
    can have) and later written everywhere without error."""
    top = 2**63 - 1
    body = request(mutation("pb-int64-max", **{semconv.EPISODE: top, semconv.SEQUENCE: top,
                                               semconv.CONTRACTION_CYCLE: top, semconv.PASS_NUMBER: top,
                                               semconv.LITERALS_BEFORE: MAX_CONTEXT_FIGURE,
                                               semconv.LITERALS_LOST: MAX_CONTEXT_FIGURE}))
    assert rejected(server.post("/v1/traces", content=body, headers=PROTOBUF))[0] == 0
    assert_serving(server)
    # a loop's first span of a later episode is held aside for the episodes before it (docs/monitor.md, "Order"),
    # then taken once it has waited order_wait: rendered either way
    deadline = time.monotonic() + 60
    while server.get("/api/loops/pb-int64-max").json()["episode"] != top:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert server.get("/api/loops/pb-int64-max").json()["sequence"] == top
    INNOCENT.append("pb-int64-max")


def test_unknown_fields_inside_a_json_value_are_ignored(server: MonitorProcess) -> None:
    span = mutation("json-unknown-field", **{semconv.LITERALS_BEFORE: {"intValue": "12", "futureField": 1},
                                            semconv.DECISION: {"stringValue": "patch", "x": {"y": []}}})
    assert rejected(server.post("/v1/traces", content=json_request(span), headers=JSON))[0] == 0
    detail = server.get("/api/loops/json-unknown-field").json()
    assert detail["history"][0]["literals_before"] == 12
    both = mutation("json-two-values", **{semconv.LITERALS_BEFORE: {"intValue": "1", "stringValue": "1"}})
    count, message = rejected(server.post("/v1/traces", content=json_request(both), headers=JSON))
    assert count == 1 and semconv.LITERALS_BEFORE in message
    INNOCENT.append("json-unknown-field")


def test_a_400_carries_bad_request_details(server: MonitorProcess) -> None:
    response = server.post("/v1/traces", content=b'{"resourceSpans": [{"scopeSpans": 5}]}', headers=JSON)
    assert response.status_code == 400
    (detail,) = response.json()["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert detail["fieldViolations"][0]["field"] == "resourceSpans[0].scopeSpans"
    response = server.post("/v1/traces", content=b"\x0a\x05\x12\x03\x12\x09\x00", headers=PROTOBUF)
    assert response.status_code == 400
    status = status_pb2.Status.FromString(response.content)
    violation = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(violation)
    assert violation.field_violations[0].field.startswith("resourceSpans[0]")


def test_after_a_restart_nothing_poisoned_was_persisted(server: MonitorProcess, state: Path) -> None:
    before = {loop["loop_id"]: loop for loop in assert_serving(server)["loops"]}
    assert set(INNOCENT) <= set(before)
    assert not [loop_id for loop_id in before if "bad" in loop_id]
    server.stop()
    restarted = MonitorProcess(state).start()
    try:
        after = {loop["loop_id"]: loop for loop in assert_serving(restarted)["loops"]}
        assert after.keys() == before.keys()
        assert all(after[i]["episode"] == before[i]["episode"] for i in after)
        text = restarted.get("/metrics").text
        assert "\\ud800" not in text and HUGE not in text
    finally:
        assert restarted.stop() in (0, -15)
        assert "Traceback" not in restarted.stderr()
    server.start()  # the module's fixture stops it again


def test_a_series_that_cannot_be_written_is_left_out_and_counted() -> None:
    """Should an unwritable value reach a family anyway, /metrics still renders the rest."""
    skipped = Counter("unwritable_total", "left out")
    good = Counter("good_total", "fine", ("agent",))
    metric_set = MetricSet([good], skipped=skipped)
    good.inc(("a",), 2)
    good.inc((SURROGATE,), 1)
    good.inc(("huge",), 10**400)
    for accept in ("text/plain", "application/openmetrics-text; version=1.0.0"):
        body, _ = metric_set.render(accept)
        text = body.decode()
        assert 'good_total{agent="a"} 2.0' in text
        assert "huge" not in text
    assert skipped.values[()] == 4  # two series left out of each of the two renders


def test_a_guard_cycle_past_uint32_saturates_in_the_history() -> None:
    """Regression: a held span of `test_protobuf_int64_extremes...` (ctxwatch.contraction.cycle = 2^63 - 1)
    applied once its gap was given up made the packed history entry raise struct.error in the gap-expiry task."""
    from ctxwatch_monitor.loops import LoopState

    loop = LoopState("pb-int64-max", "svc", "agent", ("svc", "agent"), "healthy", None, 0.0)
    loop.record(10, 1.0, "compact", "patch", 0.3, 0.1, 2**63 - 1, 2**63 - 1, 2**63 - 1)
    (entry,) = loop.cycles_in_order()
    assert (entry.cycle, entry.literals_before, entry.literals_lost) == (2**32 - 1, 2**16 - 1, 2**16 - 1)
