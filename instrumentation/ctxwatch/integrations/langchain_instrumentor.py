"""OpenTelemetry auto-instrumentation for LangChain v1 agents: every agent built by
``langchain.agents.create_agent`` gets the guard middleware (`ctxwatch.integrations.langchain`).

Registered under the ``opentelemetry_instrumentor`` entry point, so ``opentelemetry-instrument``
loads it; or by hand, before the agents are built::

    LangChainInstrumentor().instrument(tracer_provider=provider, guard_options={"pass_cap": 12})

Options of `instrument`: ``tracer_provider`` / ``meter_provider`` (default: the global ones),
``guard_factory`` (``thread_id -> ContextGuard``; default: one guard per LangGraph thread, its
loop id the thread id, its agent name the ``name`` given to ``create_agent``), ``guard_options``
(keyword arguments for the default factory's `ContextGuard`), ``on_refusal`` ("raise" or "keep").
An agent whose middleware already holds a `ContextGuardMiddleware` is left as it is. Like every
instrumentor, it patches the function where it lives: a ``create_agent`` imported by name before
`instrument` ran is the original.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from ..config import check_on_refusal
from ..guard import ContextGuard
from ..telemetry import MutationTelemetry

_INSTRUMENTS = ("langchain >= 1.0",)


class LangChainInstrumentor(BaseInstrumentor):
    """Adds ctxwatch's guard middleware to every LangChain ``create_agent`` agent."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return _INSTRUMENTS

    def _instrument(self, **kwargs: Any) -> None:
        import langchain.agents as agents
        from langchain.agents import factory

        from .langchain import ContextGuardMiddleware, guard_middleware

        on_refusal = check_on_refusal(kwargs.get("on_refusal", "raise"))
        source = kwargs.get("guard_factory")
        telemetry = MutationTelemetry(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        options = dict(kwargs.get("guard_options") or {})
        original = factory.create_agent

        @functools.wraps(original)
        def create_agent(*args: Any, **kw: Any) -> Any:
            middleware = list(kw.get("middleware") or ())
            if not any(isinstance(m, ContextGuardMiddleware) for m in middleware):
                guards = source or _default_factory(kw.get("name"), telemetry, options)
                kw["middleware"] = guard_middleware(guards, *middleware, on_refusal=on_refusal)
            return original(*args, **kw)

        self._patched = [(module, module.create_agent) for module in (factory, agents)]
        for module, _ in self._patched:
            module.create_agent = create_agent  # type: ignore[attr-defined]

    def _uninstrument(self, **kwargs: Any) -> None:
        for module, original in getattr(self, "_patched", ()):
            module.create_agent = original
        self._patched = []


def _default_factory(agent: str | None, telemetry: MutationTelemetry,
                     options: dict[str, Any]) -> Callable[[str | None], ContextGuard]:
    def make(thread_id: str | None) -> ContextGuard:
        return ContextGuard(thread_id, **{"agent": agent, "telemetry": telemetry, **options})
    return make
