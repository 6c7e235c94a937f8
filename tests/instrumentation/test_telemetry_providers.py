"""Where the guard's metrics go when the application installs its SDK (issue 4, "never replaces
providers the application already set"): guards created before the SDK is installed (on the API's
proxy), after it (on the global provider) and with that provider passed explicitly all count on one
set of instruments, so every count reaches the application's reader. The OpenTelemetry API sets the
global provider once per process, so each scenario runs in a subprocess of its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCENARIO = textwrap.dedent("""
    import json, sys
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from ctxwatch.report import Report
    from ctxwatch.telemetry import MutationTelemetry

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    guards = {}
    for step in sys.argv[1].split(","):  # the order in which the application does things
        if step == "install":
            metrics.set_meter_provider(provider)
        elif step == "explicit":
            guards[step] = MutationTelemetry(meter_provider=provider, environ={})
        else:
            guards[step] = MutationTelemetry(environ={})  # the global provider, as it is then
    for agent, telemetry in guards.items():
        for _ in range(2):
            telemetry.start(loop_id="l", kind="append", agent=agent).end(Report(
                loop_id="l", kind="append", decision="patch", findings=[], messages_before=1,
                messages_after=2, pass_number=0, pass_cap=None, agent=agent))
    counts = {dict(p.attributes)["gen_ai.agent.name"]: p.value
              for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics
              for m in sm.metrics if m.name == "ctxwatch.mutations" for p in m.data.data_points}
    print(json.dumps(counts))
""")


@pytest.mark.parametrize("order", [
    "before,install,after,explicit",   # a guard made before the SDK was installed follows it
    "install,after,explicit",
    "install,explicit,after",
    "explicit,install,after",          # the provider passed explicitly, then made global
    "before,explicit,install,after",   # ... while a guard made before any SDK follows the global one
])
def test_every_guard_counts_on_the_installed_provider(order: str) -> None:
    out = subprocess.run([sys.executable, "-c", SCENARIO, order], capture_output=True, text=True, timeout=60,
                         check=True)
    assert json.loads(out.stdout) == {step: 2 for step in order.split(",") if step != "install"}
