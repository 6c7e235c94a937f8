"""The monitor's configuration: defaults, a TOML file, `CTXWATCH_MONITOR_*` variables and flags.

Precedence, highest first: command-line flags, environment variables, the config file, defaults.
The config file is TOML; its keys are the option names below (top level or under `[monitor]`),
and its `[contraction]` table is handed unchanged to the shared contraction detector's config.
Every unusable value is reported as a `ConfigError` naming the source (flag, variable or file)
and the option, never as a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ctxwatch import semconv

ENV_PREFIX = "CTXWATCH_MONITOR_"
MEMORY_STATE = ":memory:"
DEFAULT_GRPC_PORT = 4317
GRPC_OFF = -1


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class MonitorConfig:
    """Everything the service reads at start-up. See docs/monitor.md for each option."""

    host: str = "127.0.0.1"
    port: int = 4318
    grpc_port: int | None = None   # None: 4317, or a free port when `port` is 0; GRPC_OFF: no gRPC
    state: str = "ctxwatch-monitor.sqlite3"
    token: str | None = None
    metrics_auth: bool = False
    max_body_bytes: int = 16 * 1024 * 1024
    max_inflight: int = 16
    max_inflight_per_client: int = 8
    slow_path_rate: float = 32.0  # spans and resources a client may have read by a slow decoding path, a second
    slow_path_burst: int = 1024   # ... saved up at most (two SDK batches); 32 a second: <= 5% of a thread
    max_loops: int = 200_000
    loop_ttl: float = 86_400.0
    history: int = 32
    order_window: int = 64
    order_wait: float = 5.0
    lone_waits: int = 12
    idle_after: float = 300.0
    alarm_retention: float = 900.0
    block_after: int = 3
    refusing_for: int = 5
    label_cap: int = semconv.MAX_LABEL_VALUES
    label_ttl: float = 3_600.0
    series_budget: int = 19_500  # with the self-metrics on top, under the 20,000 where one target starts to hurt
    metric_series_budget: int = 5_000  # so that no one metric takes the whole budget
    max_connections: int = 4_096
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keepalive_timeout: float = 15.0
    sync: str = "full"
    retry_after: int = 1
    sweep_interval: float = 30.0
    log_level: str = "warning"
    contraction: Mapping[str, Any] = field(default_factory=dict)

    @property
    def persistent(self) -> bool:
        return self.state != MEMORY_STATE

    @property
    def grpc_listen_port(self) -> int | None:
        """The OTLP/gRPC port to bind (0: a free one), None when gRPC is off."""
        if self.grpc_port == GRPC_OFF:
            return None
        if self.grpc_port is None:
            return 0 if self.port == 0 else DEFAULT_GRPC_PORT
        return self.grpc_port


def _positive_int(text: Any) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _port(text: Any) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise ValueError("must be a TCP port (0-65535; 0 picks a free one)")
    return value


def _grpc_port(text: Any) -> int:
    if str(text).strip().lower() == "off":
        return GRPC_OFF
    return _port(text)


def _seconds(text: Any) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a finite number of seconds >= 0 (0 disables)")
    return value


def _rate(text: Any) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be a finite number >= 0 (0: no limit)")
    return value


def _positive_seconds(text: Any) -> float:
    value = _seconds(text)
    if value == 0:
        raise ValueError("must be more than 0 seconds")
    return value


def _bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(text: Any) -> str:
        value = str(text).strip().lower()
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value
    return parse


def _text(text: Any) -> str:
    if not isinstance(text, str) or not text:
        raise ValueError("must be a non-empty string")
    return text


# option -> (parser, help). The order is the order of `--help`.
_OPTIONS: dict[str, tuple[Callable[[Any], Any], str]] = {
    "host": (_text, "address to listen on (default 127.0.0.1)"),
    "port": (_port, "TCP port; 0 picks a free one and prints it (default 4318, OTLP/HTTP)"),
    "grpc_port": (_grpc_port, "OTLP/gRPC port; 0 picks a free one, off disables it (default 4317, or a free "
                              "one when --port is 0)"),
    "state": (_text, f"SQLite state file; {MEMORY_STATE} keeps state in memory only"),
    "token": (_text, "bearer token required on ingest and the API (default: none)"),
    "metrics_auth": (_bool, "also require the token on /metrics"),
    "max_body_bytes": (_positive_int, "largest request body, after decompression (bytes)"),
    "max_inflight": (_positive_int, "ingest requests (traces and metrics) admitted at once; more get 429"),
    "max_inflight_per_client": (_positive_int, "ingest requests admitted at once from one client "
                                                  "(its address; IPv6: its /64)"),
    "slow_path_rate": (_rate, "spans and resources per second one client may have read by a slow "
                              "decoding path (json_format, protobuf span by span); past it 429 (0: no limit)"),
    "slow_path_burst": (_positive_int, "slow reads one client may save up (the largest such request)"),
    "max_loops": (_positive_int, "loops tracked at most; the least recently seen are evicted"),
    "loop_ttl": (_seconds, "forget a loop not seen for this long (seconds, 0 = never)"),
    "history": (_positive_int, "cycles of history kept per loop"),
    "order_window": (_positive_int, "spans per loop held ahead of a missing one before its gap is given up"),
    "order_wait": (_seconds, "seconds a span waits for a missing one before its gap is given up"),
    "lone_waits": (_positive_int, "how many order_waits a lone span held ahead of a gap (none corroborates it) "
                                  "waits for it"),
    "idle_after": (_positive_seconds, "seconds without a span after which a loop's status is idle"),
    "alarm_retention": (_seconds, "seconds a resolved or stopped alarm stays on the alarm list"),
    "block_after": (_positive_int, "refusals in a row by the same invariants that make a loop blocked"),
    "refusing_for": (_positive_int, "applied rewrites after a refusal before a loop shows healthy again"),
    "label_cap": (_positive_int, "distinct values per metric label before the overflow value"),
    "label_ttl": (_seconds, "free a service/agent label value no span carried for this long (s, 0 = never)"),
    "series_budget": (_positive_int, "metric series with service/agent labels, in total"),
    "metric_series_budget": (_positive_int, "metric series with service/agent labels, per metric"),
    "max_connections": (_positive_int, "open connections; past it the longest-idle one is closed"),
    "header_timeout": (_positive_seconds, "seconds a connection has to send a request's headers"),
    "body_timeout": (_positive_seconds, "seconds a request has to send its whole body (then 408)"),
    "keepalive_timeout": (_positive_seconds, "seconds an idle keep-alive connection stays open"),
    "sync": (_choice("full", "normal"), "SQLite synchronous mode: full survives power loss, normal a crash"),
    "retry_after": (_positive_int, "seconds sent in Retry-After with 429/503"),
    "sweep_interval": (_seconds, "seconds between TTL sweeps"),
    "log_level": (_choice("critical", "error", "warning", "info", "debug"), "uvicorn log level"),
}


def build_parser() -> argparse.ArgumentParser:
    """The `ctxwatch monitor` argument parser (every default is None: unset flags defer to env/file)."""
    parser = argparse.ArgumentParser(
        prog="ctxwatch monitor",
        description="Receive ctxwatch mutation spans over OTLP/HTTP; serve alarms, metrics, an API and a live page.",
    )
    parser.add_argument("--config", metavar="FILE", help="TOML config file (also CTXWATCH_MONITOR_CONFIG)")
    parser.add_argument("--token-file", metavar="FILE", help="read the bearer token from this file")
    for name, (_, help_text) in _OPTIONS.items():
        flag = "--" + name.replace("_", "-")
        if name == "metrics_auth":
            parser.add_argument(flag, dest=name, action="store_const", const=True, default=None, help=help_text)
        else:
            parser.add_argument(flag, dest=name, default=None, help=help_text)
    return parser


def _parse(name: str, raw: Any, source: str) -> Any:
    parser, _ = _OPTIONS[name]
    try:
        return parser(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: option {name!r} = {raw!r}: {exc}") from None


def _read_token_file(path: str, source: str) -> str:
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read token file {path!r}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"{source}: token file {path!r} is empty")
    return token


def _from_file(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"config file {path!r}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path!r}: not valid TOML: {exc}") from None
    contraction = data.pop("contraction", {})
    section = data.pop("monitor", {})
    if not isinstance(section, dict) or not isinstance(contraction, dict):
        raise ConfigError(f"config file {path!r}: [monitor] and [contraction] must be tables")
    merged = {**data, **section}
    values: dict[str, Any] = {}
    for key, raw in merged.items():
        source = f"config file {path!r}"
        if key == "token_file":
            values["token"] = _read_token_file(str(raw), source)
            continue
        if key not in _OPTIONS:
            raise ConfigError(f"{source}: unknown option {key!r} (known: {', '.join(_OPTIONS)}, token_file)")
        values[key] = _parse(key, raw, source)
    return values, contraction


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in _OPTIONS:
        var = ENV_PREFIX + name.upper()
        if var in environ:
            values[name] = _parse(name, environ[var], f"environment variable {var}")
    token_file = environ.get(ENV_PREFIX + "TOKEN_FILE")
    if token_file and "token" not in values:
        values["token"] = _read_token_file(token_file, f"environment variable {ENV_PREFIX}TOKEN_FILE")
    return values


def load_config(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> MonitorConfig:
    """Parse flags, variables and the config file into a `MonitorConfig` (flags win, then env, then file)."""
    environ = os.environ if environ is None else environ
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    config_path = args.config or environ.get(ENV_PREFIX + "CONFIG")
    file_values, contraction = _from_file(config_path) if config_path else ({}, {})
    flag_values = {
        name: _parse(name, getattr(args, name), "flag --" + name.replace("_", "-"))
        for name in _OPTIONS if getattr(args, name) is not None
    }
    if args.token_file:
        flag_values["token"] = _read_token_file(args.token_file, "flag --token-file")
    merged = {**file_values, **_from_env(environ), **flag_values}
    return replace(MonitorConfig(contraction=contraction), **merged)

