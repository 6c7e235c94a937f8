"""`POST /v1/traces`: the OTLP/HTTP receiver, and the `Receiver` it shares with OTLP/gRPC.

Order of refusals: 401 (token), 415 (content type or encoding), 413 (declared length), then in the
`Receiver`: 503 (state not loaded or not writable), 429 (more than `max_inflight` requests
admitted, HTTP and gRPC together), then the body is read with the decompressed-size cap (413),
decoded (400, never retried), applied and committed (requests queued meanwhile share the
transaction: `batches`) before the answer. Spans that are individually invalid are reported in
`partial_success`. 429 and 503 carry `Retry-After`; `grpc_server` maps the same refusals to gRPC
codes. Admitted requests are bounded, so memory held by request bodies is at most
`max_inflight * max_body_bytes` however fast clients send.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request, Response

from .auth import CHALLENGE, BearerAuth
from .batches import GroupCommit
from .engine import Engine, IngestResult, StateReset, Unavailable
from .otlp import DecodeError, decode, error_body, media_type, success_body
from .records import RESOURCE_KEYS, SPAN_KEYS
from .wire import JSON, PROTOBUF, WireError, declared_length_ok, media_encoding, read_body

_OPENAPI_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"type": "object"}},
        },
    },
}


class Admission:
    """At most `limit` ingest requests admitted at once; the rest are refused with 429."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.current = 0

    def enter(self) -> bool:
        if self.current >= self.limit:
            return False
        self.current += 1
        return True

    def leave(self) -> None:
        self.current -= 1


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
        self.admission = Admission(engine.config.max_inflight)
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop serving it, once started
        # decoded on the state thread too: one hand-off per batch, no GIL ping-pong with the event loop
        self.batches = GroupCommit(engine.call, self._apply_body, engine.commit, poison=(StateReset,))

    def _apply_body(self, body: bytes, encoding: str) -> IngestResult:
        return self.engine.apply(decode(body, encoding, SPAN_KEYS, RESOURCE_KEYS))

    async def export(self, read: Callable[[], Awaitable[bytes]], encoding: str, *, store: bool = True
                     ) -> IngestResult:
        """Admit one export, read its body with `read`, decode, apply and commit it (`Refusal` if refused).
        With `store` False it is decoded only (the bench's decode ceiling)."""
        engine, admission = self.engine, self.admission
        if not engine.ready:
            raise Refusal(503, "the monitor's state is not available; retry later", retry=True)
        if not admission.enter():
            raise Refusal(429, f"more than {admission.limit} export requests in flight; retry later", retry=True)
        inflight = engine.instruments.inflight
        inflight.set((), admission.current)
        try:
            body = await read()
            if not store:
                await engine.call(decode, body, encoding, SPAN_KEYS, RESOURCE_KEYS)
                return IngestResult(0, 0, 0, "")
            return await self.batches.submit(body, encoding)
        except WireError as exc:
            raise Refusal(exc.status, exc.message) from None
        except DecodeError as exc:
            engine.instruments.decode_errors.inc((encoding,))
            raise Refusal(400, str(exc), field=exc.field) from None
        except Unavailable as exc:
            raise Refusal(503, f"{exc}; retry later", retry=True) from None
        except StateReset as exc:
            raise Refusal(400, f"{exc}; nothing of this request was kept") from None
        finally:
            admission.leave()
            inflight.set((), admission.current)


def _guess_encoding(content_type: str | None) -> str:
    """The encoding to answer an error in, even when the content type is not one we accept."""
    return JSON if "json" in (content_type or "").lower() else PROTOBUF


def ingest_router(receiver: Receiver, auth: BearerAuth, *, decode_only: bool = False) -> APIRouter:
    """The receiver; with `decode_only`, also `POST /bench/decode` (decode and read, store nothing)."""
    config = receiver.engine.config
    retry = {"Retry-After": str(config.retry_after)}
    router = APIRouter()

    def refuse(encoding: str, status: int, message: str, headers: dict[str, str] | None = None,
               field: str | None = None) -> Response:
        return Response(error_body(encoding, status, message, field), status_code=status,
                        media_type=media_type(encoding), headers=headers)

    def screen(headers: Any) -> tuple[str, Response | None]:
        """The token and the content type of an export: (its encoding, a refusal or None)."""
        encoding = _guess_encoding(headers.get("content-type"))
        if not auth.allows(headers.get("authorization")):
            return encoding, refuse(encoding, 401, "missing or wrong bearer token", CHALLENGE)
        try:
            return media_encoding(headers.get("content-type")), None
        except WireError as exc:
            return encoding, refuse(encoding, exc.status, exc.message)

    async def receive(request: Request, store: bool) -> Response:
        headers = request.headers
        encoding, refusal = screen(headers)
        if refusal is not None:
            return refusal
        try:
            declared_length_ok(headers.get("content-length"), headers.get("content-encoding"),
                               config.max_body_bytes)
            result = await receiver.export(
                lambda: read_body(request.stream(), headers.get("content-encoding"), config.max_body_bytes),
                encoding, store=store)
        except WireError as exc:
            return refuse(encoding, exc.status, exc.message)
        except Refusal as exc:
            return refuse(encoding, exc.status, exc.message, retry if exc.retry else None, exc.field)
        return Response(success_body(encoding, result.rejected, result.message), media_type=media_type(encoding))

    @router.post("/v1/traces", tags=["ingest"], openapi_extra=_OPENAPI_BODY,
                 summary="OTLP/HTTP trace export (protobuf or JSON, optionally gzip)")
    async def export_traces(request: Request) -> Response:
        return await receive(request, store=True)

    @router.post("/v1/metrics", tags=["ingest"], openapi_extra=_OPENAPI_BODY,
                 summary="OTLP/HTTP metric export: accepted and dropped (the monitor's metrics come from spans)")
    async def export_metrics(request: Request) -> Response:
        """An agent whose SDK exports metrics to the same endpoint as its spans gets a 200 instead of a
        404 on every interval; the body is read within the size cap and dropped."""
        encoding, refusal = screen(request.headers)
        if refusal is not None:
            return refusal
        try:
            await read_body(request.stream(), request.headers.get("content-encoding"), config.max_body_bytes)
        except WireError as exc:
            return refuse(encoding, exc.status, exc.message)
        return Response(success_body(encoding, 0, ""), media_type=media_type(encoding))

    if decode_only:
        @router.post("/bench/decode", tags=["bench"], openapi_extra=_OPENAPI_BODY, include_in_schema=False)
        async def decode_traces(request: Request) -> Response:
            return await receive(request, store=False)

    return router
