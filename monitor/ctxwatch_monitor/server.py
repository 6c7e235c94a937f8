"""The `ctxwatch monitor` entry point: configuration, the listening socket, uvicorn with one worker.

`main(argv)` returns the exit code: 0 after a clean shutdown (SIGINT/SIGTERM), 1 when the service
could not start, 2 for bad usage or an unusable config or state file (one line on stderr). The
sockets are bound before uvicorn starts, so `--port 0` works: the lines printed on stdout,
``ctxwatch monitor listening on http://HOST:PORT`` and then (unless gRPC is off)
``ctxwatch monitor OTLP/gRPC listening on HOST:PORT``, give the ports actually bound.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence

import uvicorn

from .app import create_app
from .config import ConfigError, MonitorConfig, load_config
from .grpc_server import GrpcStartError, OtlpGrpcServer
from .persistence import StateFileError

# Connections beyond this are answered 503 by uvicorn itself: a last bound on memory under a flood
# (admission control on /v1/traces answers 429 long before it).
MAX_CONNECTIONS = 1024


def _bind(config: MonitorConfig) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    try:
        return socket.create_server((config.host, config.port), family=family)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {config.host}:{config.port}: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the monitor until interrupted (see the module docstring for exit codes)."""
    try:
        config = load_config(argv)
        app = create_app(config)
        sock = _bind(config)
        grpc_server, grpc_port = None, config.grpc_listen_port
        if grpc_port is not None:
            grpc_server = OtlpGrpcServer(app.state.receiver, app.state.auth)
            grpc_port = grpc_server.bind(config.host, grpc_port)
    except (ConfigError, StateFileError, GrpcStartError, ValueError) as exc:
        print(f"ctxwatch monitor: {exc}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"ctxwatch monitor listening on http://{shown}:{port}", flush=True)
    if grpc_server is not None:
        print(f"ctxwatch monitor OTLP/gRPC listening on {shown}:{grpc_port}", flush=True)
        grpc_server.start()
    server = uvicorn.Server(uvicorn.Config(app, workers=1, log_level=config.log_level, access_log=False,
                                           limit_concurrency=MAX_CONNECTIONS, lifespan="on"))
    try:
        server.run(sockets=[sock])
    finally:
        if grpc_server is not None:
            grpc_server.stop()
    return 0 if server.started else 1
