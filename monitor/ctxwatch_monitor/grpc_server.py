"""OTLP/gRPC beside OTLP/HTTP: the collector services on their own port (4317 by default).

`TraceService/Export` takes the request's raw bytes and hands them to the same `ingest.Receiver`
as `POST /v1/traces` on the service's event loop: the same admission (one `max_inflight` for both
transports), the same decoding and per-span validation, the same group commit before the answer,
the same `partial_success`. Refusals map to the codes the OTLP specification gives them, each with
a google.rpc.Status in `grpc-status-details-bin`:

  400 -> INVALID_ARGUMENT (with google.rpc.BadRequest; never retried)
  401 -> UNAUTHENTICATED (a token is configured; send `authorization: Bearer <token>` metadata)
  413 -> RESOURCE_EXHAUSTED without RetryInfo (not retried; gRPC refuses a message past
         `max_body_bytes` itself, with the same code)
  429 -> RESOURCE_EXHAUSTED with RetryInfo (retried after `retry_after` seconds)
  503 -> UNAVAILABLE with RetryInfo (state not loaded or not writable; the service is stopping)

`MetricsService/Export` and `LogsService/Export` answer success and drop the data, so an SDK whose
metrics or logs exporter defaults to OTLP/gRPC gets no error on every interval. The port is bound
by `bind` before the HTTP server starts (a busy port is a one-line start-up error); handlers run on
a small thread pool and wait on the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from .auth import BearerAuth
from .ingest import Receiver, Refusal
from .otlp_codec import bad_request, success_body
from .wire import PROTOBUF

TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
DROPPED_EXPORTS = ("/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
                   "/opentelemetry.proto.collector.logs.v1.LogsService/Export")
_CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
          413: grpc.StatusCode.RESOURCE_EXHAUSTED, 415: grpc.StatusCode.INVALID_ARGUMENT,
          429: grpc.StatusCode.RESOURCE_EXHAUSTED, 503: grpc.StatusCode.UNAVAILABLE}
_SPARE_WORKERS = 4  # threads beyond the admission limit, so refusals are answered while exports wait


class GrpcStartError(RuntimeError):
    """The gRPC port cannot be bound; the message says which."""


def _status_details(code: grpc.StatusCode, refusal: Refusal, retry_after: int) -> bytes:
    status = status_pb2.Status(code=code.value[0], message=refusal.message)
    detail = None
    if refusal.status == 400:
        detail = bad_request(refusal.field or "request", refusal.message)
    elif refusal.retry:
        detail = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=retry_after))
    if detail is not None:
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    return status.SerializeToString()


def _client_address(peer: str) -> str:
    """The client's address in a gRPC peer string (`ipv4:127.0.0.1:5555`, `ipv6:[::1]:5555`), for the
    per-client admission share; the port is left out, as for HTTP."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return peer
    return rest.rsplit(":", 1)[0].strip("[]")


async def _given(body: bytes) -> bytes:
    return body


class OtlpGrpcServer:
    """The OTLP/gRPC collector services of one monitor (see the module docstring)."""

    def __init__(self, receiver: Receiver, auth: BearerAuth) -> None:
        config = receiver.engine.config
        self.receiver, self.auth, self.retry_after = receiver, auth, config.retry_after
        handlers = {TRACE_EXPORT: grpc.unary_unary_rpc_method_handler(self._export_traces)}
        handlers.update({name: grpc.unary_unary_rpc_method_handler(self._export_dropped) for name in DROPPED_EXPORTS})
        self.server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(config.max_inflight + _SPARE_WORKERS,
                                                  thread_name_prefix="ctxwatch-grpc"),
            handlers=[_ByName(handlers)],
            options=[("grpc.so_reuseport", 0),  # a second monitor on the port must fail, not share it
                     ("grpc.max_receive_message_length", config.max_body_bytes),
                     ("grpc.max_send_message_length", 1 << 20)])

    def bind(self, host: str, port: int) -> int:
        """Listen on host:port (0: a free port); returns the port bound."""
        shown = f"[{host}]" if ":" in host else host
        if port:  # tried first with a plain socket: gRPC's own refusal is a multi-line log on stderr
            try:
                socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET).close()
            except OSError as exc:
                raise GrpcStartError(f"cannot listen on {host}:{port} for OTLP/gRPC: {exc.strerror}") from None
        try:
            bound = self.server.add_insecure_port(f"{shown}:{port}")
        except RuntimeError as exc:
            raise GrpcStartError(f"cannot listen on {host}:{port} for OTLP/gRPC: {exc}") from None
        if not bound:
            raise GrpcStartError(f"cannot listen on {host}:{port} for OTLP/gRPC (address in use?)")
        return bound

    def start(self) -> None:
        self.server.start()

    def stop(self, grace: float = 5.0) -> None:
        self.server.stop(grace).wait(grace + 1)

    # --- handlers (on the gRPC thread pool) --------------------------------------------------------
    def _abort(self, context: grpc.ServicerContext, refusal: Refusal) -> NoReturn:
        code = _CODES.get(refusal.status, grpc.StatusCode.INTERNAL)
        context.set_trailing_metadata((("grpc-status-details-bin", _status_details(code, refusal, self.retry_after)),))
        context.abort(code, refusal.message)
        raise AssertionError("grpc's abort raises")  # pragma: no cover

    def _authenticate(self, context: grpc.ServicerContext) -> None:
        authorization = next((value for key, value in context.invocation_metadata() if key == "authorization"), None)
        if not self.auth.allows(authorization):
            self._abort(context, Refusal(401, "missing or wrong bearer token (authorization metadata)"))

    def _export_traces(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        self._authenticate(context)
        loop = self.receiver.loop
        if loop is None:
            self._abort(context, Refusal(503, "the monitor is not serving; retry later", retry=True))
        try:
            export = self.receiver.export(lambda: _given(body), PROTOBUF, client=_client_address(context.peer()))
            future = asyncio.run_coroutine_threadsafe(export, loop)
            result = future.result()
        except Refusal as refusal:
            self._abort(context, refusal)
        except (concurrent.futures.CancelledError, RuntimeError):  # the service is stopping
            self._abort(context, Refusal(503, "the monitor is stopping; retry later", retry=True))
        return success_body(PROTOBUF, result.rejected, result.message)

    def _export_dropped(self, body: bytes, context: grpc.ServicerContext) -> bytes:
        self._authenticate(context)
        return b""  # an empty Export*ServiceResponse: success, no partial_success


class _ByName(grpc.GenericRpcHandler):
    """Method handlers by full method name, the request and response left as bytes."""

    def __init__(self, handlers: dict[str, Any]) -> None:
        self.handlers = handlers

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        return self.handlers.get(handler_call_details.method)
