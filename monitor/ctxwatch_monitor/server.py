"""The `ctxwatch monitor` entry point: configuration, the listening socket, uvicorn with one worker.

`main(argv)` returns the exit code: 0 after a clean shutdown (SIGINT/SIGTERM: in-flight requests
are answered and the last commit is on disk first), 1 when the service could not start, 2 for bad
usage or an unusable config or state file (one line on stderr). The sockets are bound before
uvicorn starts, so `--port 0` works: the lines printed on stdout,
``ctxwatch monitor listening on http://HOST:PORT`` and then (unless gRPC is off)
``ctxwatch monitor OTLP/gRPC listening on HOST:PORT``, give the ports actually bound.

uvicorn runs with the connection limits of `connections` (header, body and keep-alive timeouts;
`max_connections`, past which idle connections are closed) instead of its own `limit_concurrency`;
the process's open-file limit is raised to its hard limit so those connections fit.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import sys
from collections.abc import Callable, Generator, Sequence

import uvicorn
from fastapi import FastAPI

from .app import create_app
from .config import ConfigError, MonitorConfig, load_config
from .connections import Limits, uvicorn_options
from .grpc_server import GrpcStartError, OtlpGrpcServer
from .persistence import StateFileError

# file descriptors kept beyond the connections: the state file, its WAL and lock, logs, the listener
_SPARE_FDS = 64


class _Server(uvicorn.Server):
    """uvicorn's server, exiting normally after the graceful shutdown a SIGINT/SIGTERM asked for
    (uvicorn re-raises the signal once shut down, which makes the exit status -15, not 0)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()


def _raise_fd_limit(connections: int) -> None:
    """Raise the soft open-file limit towards the hard one so `connections` sockets fit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + _SPARE_FDS
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _bind(config: MonitorConfig) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    try:
        return socket.create_server((config.host, config.port), family=family)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {config.host}:{config.port}: {exc.strerror}") from None


def main(argv: Sequence[str] | None = None, app_factory: Callable[[MonitorConfig], FastAPI] = create_app) -> int:
    """Run the monitor until interrupted (see the module docstring for exit codes). `app_factory` builds
    the app from the configuration (`create_app`; a benchmark may add routes of its own)."""
    try:
        config = load_config(argv)
        app = app_factory(config)
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
    _raise_fd_limit(config.max_connections)
    limits = Limits(config.max_connections, config.header_timeout, config.body_timeout, config.retry_after)
    server = _Server(uvicorn.Config(app, workers=1, log_level=config.log_level, access_log=False, lifespan="on",
                                    **uvicorn_options(limits, config.keepalive_timeout)))
    try:
        server.run(sockets=[sock])
    finally:
        if grpc_server is not None:
            grpc_server.stop()
    return 0 if server.started else 1
