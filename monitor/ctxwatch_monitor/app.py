"""The application factory: wires config, state, routes, self-metrics and error handling together.

`create_app(config)` opens and loads the state file before anything is served (raising
`StateFileError` with a one-line message when it cannot: owned by another monitor, unreadable, a
corrupt row), sweeps expired loops and label values periodically, and serves: POST /v1/traces and
/v1/metrics, GET /metrics, /api/*, the live page at /, /healthz and /readyz, and the OpenAPI schema
at /openapi.json (no /docs or /redoc: they load their scripts from a CDN). Errors are answered as
JSON with a message; nothing a client sends produces a traceback in a response.

/metrics is rendered on a thread of its own (one render at a time), so a scrape never holds the
event loop (ingest, /healthz) nor the state thread. /readyz is 503 while the state is not loaded or
while the last write to the state file failed; it then retries a small write, so readiness comes
back by itself once the disk takes writes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ctxwatch import semconv

from . import __version__
from .api import api_router
from .auth import CHALLENGE, BearerAuth
from .config import MonitorConfig
from .engine import Engine
from .ingest import Receiver, ingest_router
from .instruments import Instruments
from .page import mount_page
from .persistence import Database

log = logging.getLogger("ctxwatch.monitor")

_HANDLERS = (("/v1/traces", "traces"), ("/metrics", "metrics"), ("/api/", "api"), ("/healthz", "health"),
             ("/readyz", "health"))


def _handler(path: str) -> str:
    """A bounded handler label for self-metrics."""
    for prefix, name in _HANDLERS:
        if path.startswith(prefix):
            return name
    return "page"


# the statuses the monitor answers (its own, and the framework's: 307 slash redirects, 405, 422, static files'
# 206/304); the code label of any other status is the one overflow value, so the label stays a closed set
_CODES = frozenset(str(code) for code in (200, 204, 206, 304, 307, 400, 401, 403, 404, 405, 408, 413, 415, 416, 422,
                                          429, 499, 500, 503))


def _code_label(status: int) -> str:
    """A bounded code label for self-metrics: the status if the monitor answers it, else `_OTHER`."""
    code = str(status)
    return code if code in _CODES else semconv.OVERFLOW


class RequestMetrics:
    """ASGI middleware counting every HTTP request by handler and status, and timing it."""

    def __init__(self, app: ASGIApp, instruments: Instruments) -> None:
        self.app, self.instruments = app, instruments

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            handler = _handler(scope.get("path", ""))
            self.instruments.requests.inc((handler, _code_label(status)))
            self.instruments.request_duration.observe((handler,), time.perf_counter() - started)


def create_app(config: MonitorConfig) -> FastAPI:
    """The monitor as an ASGI app (see the module docstring)."""
    instruments = Instruments(config.label_cap, config.series_budget, config.metric_series_budget)
    database = Database(config.state, config.sync) if config.persistent else None
    engine = Engine(config, instruments, database)
    try:
        engine.restore()  # here, not in the lifespan: a bad state file is a one-line error, not a traceback
    except BaseException:
        engine.shutdown()
        raise
    receiver = Receiver(engine)
    auth = BearerAuth(config.token)
    renderer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxwatch-metrics")

    async def sweeper() -> None:
        while True:
            await asyncio.sleep(config.sweep_interval)
            try:
                await engine.call(engine.sweep)
            except Exception:  # a failed sweep is retried at the next interval (counted as not ready)
                log.exception("ctxwatch monitor: TTL sweep failed")

    async def gap_expiry() -> None:
        """Give up, every fraction of `order_wait`, the gaps held spans have waited for long enough."""
        interval = max(0.05, min(1.0, config.order_wait / 2))
        while True:
            await asyncio.sleep(interval)
            if engine.waiting:
                try:
                    await engine.call(engine.expire_gaps)
                except Exception:  # retried at the next interval
                    log.exception("ctxwatch monitor: applying held spans failed")

    async def idle_check() -> None:
        """Every fraction of `idle_after`, mark the loops that stopped sending idle."""
        interval = max(0.05, min(5.0, config.idle_after / 4))
        while True:
            await asyncio.sleep(interval)
            try:
                await engine.call(engine.mark_idle)
            except Exception:  # retried at the next interval
                log.exception("ctxwatch monitor: marking idle loops failed")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        receiver.loop = asyncio.get_running_loop()  # from now on OTLP/gRPC exports are served too
        tasks = [asyncio.create_task(gap_expiry()), asyncio.create_task(idle_check())]
        if config.sweep_interval:  # loops past their TTL and label values past theirs
            tasks.append(asyncio.create_task(sweeper()))
        try:
            yield
        finally:
            receiver.loop = None
            for task in tasks:
                task.cancel()
            renderer.shutdown(wait=True)
            await asyncio.to_thread(receiver.shutdown)
            await asyncio.to_thread(engine.shutdown)

    app = FastAPI(title="ctxwatch monitor", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Receives ctxwatch mutation spans (OTLP/HTTP) and serves contraction alarms, "
                              "Prometheus metrics, a JSON API and a live page.")
    app.state.engine, app.state.receiver, app.state.auth = engine, receiver, auth

    app.add_middleware(RequestMetrics, instruments=instruments)

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        log.error("ctxwatch monitor: internal error %s: %s", type(exc).__name__, exc)
        return JSONResponse({"detail": "internal error"}, status_code=500)

    app.include_router(ingest_router(receiver, auth))
    app.include_router(api_router(engine, auth))
    mount_page(app)

    @app.get("/metrics", tags=["metrics"], summary="Prometheus text or OpenMetrics (by Accept)",
             response_class=Response, responses={200: {"content": {"text/plain": {}}}, 401: {}})
    async def metrics(request: Request) -> Response:
        if config.metrics_auth and not auth.allows(request.headers.get("authorization")):
            raise HTTPException(401, "missing or wrong bearer token", headers=CHALLENGE)
        render = instruments.metric_set.render
        body, content_type = await asyncio.get_running_loop().run_in_executor(
            renderer, render, request.headers.get("accept"))
        return Response(body, media_type=content_type)

    @app.get("/healthz", tags=["health"], summary="The process is up")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="State loaded and writable", responses={503: {}})
    async def readyz() -> JSONResponse:
        if engine.disk_error is not None and engine.ready:
            await engine.call(engine.check_disk)
        if engine.ready and engine.disk_error is None:
            return JSONResponse({"status": "ready", "loops": len(engine.store)})
        reason = ("the state is not loaded" if not engine.ready
                  else f"the last write to the state file failed: {engine.disk_error}")
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503)

    return app
