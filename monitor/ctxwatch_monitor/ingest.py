"""`POST /v1/traces`: the OTLP/HTTP receiver, and the `Receiver` it shares with OTLP/gRPC.

Order of refusals: 401 (token), 415 (content type or encoding), 413 (declared length), then in the
`Receiver`: 503 (state not loaded or not writable), 429 (more than `max_inflight` requests
admitted, HTTP and gRPC together, or `max_inflight_per_client` from the client: `admission`; a client
is its address, `clients`), 429 for an OTLP/JSON request of a client whose budget of slow reads is spent
(`slow_path`: refused before its body is read and parsed), then the body is read with the
decompressed-size cap (413), decoded (400, never retried; 429 once the client's budget of slow reads
runs out), applied and committed (requests queued meanwhile share the transaction: `batches`) before the
answer. Decoding runs on a pool of its own (one thread per admitted request at most), not on the state
thread every sender's spans are applied on, and once per request: a request the group commit applies again
(`batches`) is not decoded, nor charged to its client's budget, again. Spans that are
individually invalid are reported in `partial_success`. 429 and 503 carry `Retry-After`;
`grpc_server` maps the same refusals to gRPC codes. `POST /v1/metrics` goes
through the same admission and body cap, then drops the body. Admitted requests are bounded, so
memory held by request bodies is at most `max_inflight * max_body_bytes` however fast clients
send; a client that sends its body too slowly is cut off by the connection's body timeout
(`connections`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.requests import ClientDisconnect

from .admission import Admission
from .auth import CHALLENGE, BearerAuth
from .batches import GroupCommit
from .clients import client_key
from .engine import Engine, IngestResult, StateReset, Unavailable
from .otlp_codec import DecodeError, RawSpan, decode, error_body, media_type, success_body
from .records import RESOURCE_KEYS, SPAN_KEYS
from .slow_path import SlowPathBudget, SlowPathSpent
from .wire import JSON, WireError, declared_length_ok, guess_encoding, media_encoding, read_body

_OPENAPI_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"type": "object"}},
        },
    },
}


class Refusal(Exception):
    """An export refused: the HTTP status, the message, whether the client should retry (Retry-After /
    gRPC RetryInfo) and the offending field (400s)."""

    def __init__(self, status: int, message: str, *, retry: bool = False, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry, self.field = status, message, retry, field


class Receiver:
    """Admission, decoding, validation and the group commit of trace exports, whatever the transport."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.admission = Admission(engine.config.max_inflight, engine.config.max_inflight_per_client)
        self.slow_path = SlowPathBudget(engine.config.slow_path_rate, engine.config.slow_path_burst)
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop serving it, once started
        # one thread per admitted request at most: a long decode never holds another request's back
        self._decoders = ThreadPoolExecutor(max_workers=engine.config.max_inflight,
                                            thread_name_prefix="ctxwatch-decode")
        self.batches = GroupCommit(engine.call, engine.apply, engine.commit, poison=(StateReset,))

    def _decode(self, body: bytes, encoding: str, client: str) -> list[RawSpan]:
        """Decode one request body (on a decoding thread), its slow reads charged to `client`'s budget."""
        allowance = self.slow_path.allowance(client)
        try:
            return decode(body, encoding, SPAN_KEYS, RESOURCE_KEYS, allowance)
        finally:
            if allowance.reads:
                self.engine.instruments.slow_path_reads.inc((encoding,), allowance.reads)

    def shutdown(self) -> None:
        self._decoders.shutdown(wait=True)

    async def export(self, read: Callable[[], Awaitable[bytes]], encoding: str, *, client: str = "",
                     keep: bool = True) -> IngestResult:
        """Admit one export from the address `client`, read its body with `read`, decode, apply and commit it
        (`Refusal` if refused). With `keep` False it is read and dropped (metric exports)."""
        engine, admission = self.engine, self.admission
        if not engine.ready:
            raise Refusal(503, "the monitor's state is not available; retry later", retry=True)
        client = client_key(client)
        if (crowded := admission.enter(client)) is not None:
            raise Refusal(429, f"{crowded}; retry later", retry=True)
        inflight = engine.instruments.inflight
        inflight.set((), admission.current)
        try:
            if keep and encoding == JSON and self.slow_path.spent(client):
                raise self.slow_path.refusal()
            body = await read()
            if not keep:
                return IngestResult(0, 0, 0, "")
            spans = await asyncio.get_running_loop().run_in_executor(self._decoders, self._decode, body, encoding,
                                                                     client)
            return await self.batches.submit(spans)
        except WireError as exc:
            raise Refusal(exc.status, exc.message) from None
        except DecodeError as exc:
            engine.instruments.decode_errors.inc((encoding,))
            raise Refusal(400, str(exc), field=exc.field) from None
        except SlowPathSpent as exc:
            engine.instruments.slow_path_refusals.inc((encoding,))
            retry = exc.status == 429
            raise Refusal(exc.status, f"{exc}; retry later" if retry else str(exc), retry=retry) from None
        except Unavailable as exc:
            raise Refusal(503, f"{exc}; retry later", retry=True) from None
        except StateReset as exc:
            raise Refusal(400, f"{exc}; nothing of this request was kept") from None
        finally:
            admission.leave(client)
            inflight.set((), admission.current)


def ingest_router(receiver: Receiver, auth: BearerAuth) -> APIRouter:
    """`POST /v1/traces` and `POST /v1/metrics`, handing exports to the receiver."""
    config = receiver.engine.config
    retry = {"Retry-After": str(config.retry_after)}
    router = APIRouter()

    def refuse(encoding: str, status: int, message: str, headers: dict[str, str] | None = None,
               field: str | None = None) -> Response:
        return Response(error_body(encoding, status, message, field), status_code=status,
                        media_type=media_type(encoding), headers=headers)

    def screen(headers: Any) -> tuple[str, Response | None]:
        """The token and the content type of an export: (its encoding, a refusal or None)."""
        encoding = guess_encoding(headers.get("content-type"))
        if not auth.allows(headers.get("authorization")):
            return encoding, refuse(encoding, 401, "missing or wrong bearer token", CHALLENGE)
        try:
            return media_encoding(headers.get("content-type")), None
        except WireError as exc:
            return encoding, refuse(encoding, exc.status, exc.message)

    async def receive(request: Request, keep: bool = True) -> Response:
        """Screen the export, then hand it to the receiver (`keep` False: read and drop it)."""
        headers = request.headers
        encoding, refusal = screen(headers)
        if refusal is not None:
            return refusal
        try:
            declared_length_ok(headers.get("content-length"), headers.get("content-encoding"),
                               config.max_body_bytes)
            result = await receiver.export(
                lambda: read_body(request.stream(), headers.get("content-encoding"), config.max_body_bytes),
                encoding, client=request.client.host if request.client else "", keep=keep)
        except WireError as exc:
            return refuse(encoding, exc.status, exc.message)
        except ClientDisconnect:  # the client went away, or its body was too slow (nothing to answer)
            return Response(status_code=499)
        except Refusal as exc:
            return refuse(encoding, exc.status, exc.message, retry if exc.retry else None, exc.field)
        return Response(success_body(encoding, result.rejected, result.message), media_type=media_type(encoding))

    @router.post("/v1/traces", tags=["ingest"], openapi_extra=_OPENAPI_BODY,
                 summary="OTLP/HTTP trace export (protobuf or JSON, optionally gzip)")
    async def export_traces(request: Request) -> Response:
        return await receive(request)

    @router.post("/v1/metrics", tags=["ingest"], openapi_extra=_OPENAPI_BODY,
                 summary="OTLP/HTTP metric export: accepted and dropped (the monitor's metrics come from spans)")
    async def export_metrics(request: Request) -> Response:
        """An agent whose SDK exports metrics to the same endpoint as its spans gets a 200 instead of a
        404 on every interval; the body is admitted and read as a trace export's, then dropped."""
        return await receive(request, keep=False)

    return router
