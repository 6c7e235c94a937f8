"""The monitor with one route more, for bench/bench_monitor.py's decode ceiling: `POST /bench/decode`
reads a trace export through the monitor's HTTP stack and decodes every span on the state thread (one
thread, no budget: the ceiling of decoding alone), then stores nothing. The route lives here, not in the service.

Run as `python bench/monitor_decode_route.py <ctxwatch monitor options>`.
"""

from __future__ import annotations

import sys

from fastapi import FastAPI, Request, Response

from ctxwatch_monitor.app import create_app
from ctxwatch_monitor.config import MonitorConfig
from ctxwatch_monitor.otlp_codec import decode, media_type, success_body
from ctxwatch_monitor.records import RESOURCE_KEYS, SPAN_KEYS
from ctxwatch_monitor.server import main
from ctxwatch_monitor.wire import media_encoding, read_body


def with_decode_route(config: MonitorConfig) -> FastAPI:
    app = create_app(config)
    engine = app.state.engine

    @app.post("/bench/decode", include_in_schema=False)
    async def decode_only(request: Request) -> Response:
        headers = request.headers
        encoding = media_encoding(headers.get("content-type"))
        body = await read_body(request.stream(), headers.get("content-encoding"), config.max_body_bytes)
        await engine.call(decode, body, encoding, SPAN_KEYS, RESOURCE_KEYS)
        return Response(success_body(encoding, 0, ""), media_type=media_type(encoding))

    return app


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], app_factory=with_decode_route))
