"""Connection limits: how long a connection may idle or dawdle, and what happens past `max_connections`.

uvicorn's own limits do not protect the health endpoints: it times out only keep-alive
connections, and only until their next byte (a connection that never sends, or sends its request
a byte at a time, stays open forever), and its `limit_concurrency` answers *every* request, /healthz
included, with a plain-text 503. `guarded_protocol(limits)` is uvicorn's h11 protocol with:

- a **header timeout**: a connection must send a complete request head within `header_timeout`
  seconds of opening, or of the first byte of its next request; else it is closed;
- a **body timeout**: a request's whole body must arrive within `body_timeout` seconds of its head;
  else it is answered 408 (when no answer has started) and closed, which frees its ingest slot;
- the **keep-alive timeout** (uvicorn's): an idle connection is closed after `keepalive_timeout`;
- **`max_connections`**: a new connection past the limit closes the connection that has been idle
  longest (open, no request under way), so idle sockets cannot crowd out a health probe. When no
  connection is idle, the new one is served in overload: /healthz and /readyz are answered as
  usual, anything else gets 503 with `Retry-After` (an OTLP `Status` on /v1/*, JSON elsewhere).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from typing import Any, NamedTuple

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .otlp_codec import error_body, media_type
from .wire import guess_encoding

HEALTH_PATHS = frozenset({"/healthz", "/readyz"})


class Limits(NamedTuple):
    max_connections: int
    header_timeout: float
    body_timeout: float
    retry_after: int


def overloaded(app: ASGIApp, retry_after: int) -> ASGIApp:
    """`app` for the health endpoints; 503 with Retry-After for anything else."""

    async def answer(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in HEALTH_PATHS:
            await app(scope, receive, send)
            return
        message = "the monitor has too many open connections; retry later"
        if scope["path"].startswith("/v1/"):
            headers = dict(scope["headers"])
            encoding = guess_encoding(headers.get(b"content-type", b"").decode("latin-1"))
            body, content_type = error_body(encoding, 503, message), media_type(encoding)
        else:
            body, content_type = json.dumps({"detail": message}).encode(), "application/json"
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", content_type.encode()), (b"retry-after", str(retry_after).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    return answer


def guarded_protocol(limits: Limits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the limits above (one class per server: it holds the idle list)."""
    idle: OrderedDict[GuardedProtocol, None] = OrderedDict()  # open connections without a request, oldest first

    class GuardedProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                if idle:
                    oldest, _ = idle.popitem(last=False)
                    oldest.transport.close()
                else:
                    self.app = overloaded(self.app, limits.retry_after)
            idle[self] = None
            self._head_timer = self.loop.call_later(limits.header_timeout, self._head_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            idle.pop(self, None)
            self._cancel_timers()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and not self._busy():  # the first byte of the next request
                self._head_timer = self.loop.call_later(limits.header_timeout, self._head_timeout)
            super().data_received(data)
            self._follow_request()

        def on_response_complete(self) -> None:
            self._cancel_timers()
            if not self.transport.is_closing():
                idle[self] = None
            super().on_response_complete()

        def _busy(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _follow_request(self) -> None:
            """After the bytes received: a head is complete (stop its timer), a body is under way (time it)."""
            if not self._busy():
                return
            idle.pop(self, None)
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            if self.cycle.more_body and self._body_timer is None:
                self._body_timer = self.loop.call_later(limits.body_timeout, self._body_timeout)
            elif not self.cycle.more_body and self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _cancel_timers(self) -> None:
            for timer in (self._head_timer, self._body_timer):
                if timer is not None:
                    timer.cancel()
            self._head_timer = self._body_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if not self._busy():
                self.transport.close()

        def _body_timeout(self) -> None:
            self._body_timer = None
            cycle = self.cycle
            if cycle is None or not cycle.more_body or self.transport.is_closing():
                return
            if not cycle.response_started and self.conn.our_state is h11.SEND_RESPONSE:
                cycle.response_started = True
                body = b'{"detail": "the request body did not arrive in time"}'
                headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
                           (b"content-length", str(len(body)).encode())]
                self.transport.write(self.conn.send(h11.Response(status_code=408, headers=headers)))
                self.transport.write(self.conn.send(h11.Data(data=body)))
                self.transport.write(self.conn.send(h11.EndOfMessage()))
            cycle.disconnected = True  # the application's receive() now reports a disconnect
            cycle.message_event.set()
            self.transport.close()

    return GuardedProtocol


def uvicorn_options(limits: Limits, keepalive_timeout: float) -> dict[str, Any]:
    """The uvicorn.Config options that apply these limits."""
    return {"http": guarded_protocol(limits), "timeout_keep_alive": keepalive_timeout, "limit_concurrency": None}
