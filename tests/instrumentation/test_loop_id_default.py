"""The loop id of a guard created without one (review defect D9): the resource's, as docs/telemetry.md
"The loop id on the resource" says — ``OTEL_RESOURCE_ATTRIBUTES=ctxwatch.loop.id=...`` or
``ctxwatch.otlp.install(loop_id=...)``, also when the application set its tracer provider first — and a
random one only when neither names one. Each case runs in its own interpreter (the global tracer provider
can be set once per process) with the real OpenTelemetry SDK and an in-memory exporter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mode = sys.argv[1]
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create())  # merges OTEL_RESOURCE_ATTRIBUTES
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the application's own setup, first
    if mode == "install":
        from ctxwatch import otlp
        otlp.install(loop_id="loop-installed", with_metrics=False)
    from ctxwatch import ContextGuard
    from ctxwatch.semconv import resolve_loop_id

    guards = [ContextGuard(agent="one-loop-per-process"), ContextGuard(agent="second")]
    if mode == "explicit":
        guards = [ContextGuard("loop-explicit"), ContextGuard("loop-explicit")]
    for guard in guards:
        guard.observe([{"role": "user", "content": "hi"}])
    print(json.dumps([{"guard": guard.loop_id,
                       "monitor": resolve_loop_id(dict(span.attributes), dict(span.resource.attributes))}
                      for guard, span in zip(guards, exporter.get_finished_spans())]))
""")


def run(mode: str, resource_attributes: str | None) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if resource_attributes is not None:
        env["OTEL_RESOURCE_ATTRIBUTES"] = resource_attributes
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("mode", "resource", "expected"), [
    ("resource", "team=ops,ctxwatch.loop.id=loop-42", "loop-42"),
    ("resource", "ctxwatch.loop.id=loop%2042", "loop 42"),  # values are percent-encoded
    ("install", None, "loop-installed"),  # the application's provider was set first: install adds no resource
    ("install", "ctxwatch.loop.id=loop-42", "loop-installed"),  # the id install() was given wins
    ("explicit", "ctxwatch.loop.id=loop-42", "loop-explicit"),  # the caller's own id wins over both
])
def test_a_guard_without_a_loop_id_reports_the_process_loop_id(mode, resource, expected):
    seen = run(mode, resource)
    assert seen == [{"guard": expected, "monitor": expected}] * 2


def test_without_a_loop_id_anywhere_each_guard_gets_its_own_random_id():
    first, second = run("resource", "team=ops")
    assert first["guard"] == first["monitor"] and second["guard"] == second["monitor"]
    assert first["guard"] != second["guard"] and len(first["guard"]) == 32
