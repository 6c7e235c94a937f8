"""Telemetry of guard decisions: one OpenTelemetry span and the contract's metrics per mutation.

Uses the OpenTelemetry API only (the SDK and exporters come with ``ctxwatch[otlp]``); every name
is in `ctxwatch.semconv` and documented in docs/telemetry.md. Telemetry fails open: nothing here
raises into, or blocks, the agent.
"""

from .failures import error_count
from .mutation import MutationHandle, MutationTelemetry

__all__ = ["MutationHandle", "MutationTelemetry", "error_count"]
