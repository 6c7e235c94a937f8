"""The loop id (and the agent version) a guard reports when its caller names none.

One loop per process (docs/telemetry.md, "The loop id on the resource"): the id given to
`ctxwatch.otlp.install(loop_id=...)`, else ``ctxwatch.loop.id`` on the resource of the tracer
provider the guard's telemetry uses (an SDK provider), else in ``OTEL_RESOURCE_ATTRIBUTES`` (for a
provider the application installs later); only when none of them names one, a random id, new for
each guard. The guard stamps the id it settles on on every span, so it agrees with the resource.
The agent's version is read the same way from ``gen_ai.agent.version`` (`resource_agent_version`):
how an integration whose guards the framework makes (LangChain's instrumentor) or a deployment sets
it without code; none when no resource names it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from urllib.parse import unquote

from . import semconv

ENV_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"

_installed: str | None = None  # the loop id `ctxwatch.otlp.install(loop_id=...)` was given


def set_process_loop_id(loop_id: str | None) -> None:
    """The loop id of this process's guards that name none (`ctxwatch.otlp.install` sets it)."""
    global _installed
    _installed = loop_id or None


def resource_attribute(tracer_provider: object, name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The string attribute `name` of the process's resource: on `tracer_provider`'s resource, else in the
    environment's resource attributes (W3C-baggage style ``key=value,...``, values percent-encoded)."""
    attributes = getattr(getattr(tracer_provider, "resource", None), "attributes", None) or {}
    value = attributes.get(name)
    if isinstance(value, str) and value:
        return value
    for pair in (os.environ if environ is None else environ).get(ENV_RESOURCE_ATTRIBUTES, "").split(","):
        key, _, raw = pair.partition("=")
        if key.strip() == name and unquote(raw.strip()):
            return unquote(raw.strip())
    return None


def resource_loop_id(tracer_provider: object, environ: Mapping[str, str] | None = None) -> str | None:
    """``ctxwatch.loop.id`` of the process: installed, else on the resource (`resource_attribute`)."""
    return _installed or resource_attribute(tracer_provider, semconv.LOOP_ID, environ)


def resource_agent_version(tracer_provider: object, environ: Mapping[str, str] | None = None) -> str | None:
    """``gen_ai.agent.version`` of the process's resource (`resource_attribute`), if any."""
    return resource_attribute(tracer_provider, semconv.AGENT_VERSION, environ)


def default_loop_id(tracer_provider: object) -> str:
    """The process's loop id (`resource_loop_id`), or a random one."""
    return resource_loop_id(tracer_provider) or uuid.uuid4().hex
