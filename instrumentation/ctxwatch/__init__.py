"""ctxwatch: runtime guards and live observability for agents that rewrite their own context.

The public API is re-exported here and nowhere else::

    from ctxwatch import ContextGuard
    guard = ContextGuard("loop-1", agent="support-bot", tools=tools, policy=lambda i, m: m.role == "system")
    guard.observe(messages)                         # what the model has consumed
    messages = guard.apply(compacted, kind="compact")  # the context to use, or a typed error

Importing ctxwatch imports no agent framework and no OpenTelemetry SDK.
"""

from .cache import ProviderCache
from .config import GuardConfig
from .contraction import ContractionDetector, CycleVerdict, DetectorConfig
from .directives import find_directives, out_of_band, strip_directives
from .errors import (
    ContextRewriteInvalidatesPlanError,
    ContractionRegimeError,
    InvalidContextError,
    NonIdempotentRewriteError,
    NonMonotonicRewriteError,
    OrphanedToolPairError,
    PassCapReachedError,
    PolicyMutationError,
)
from .fingerprint import Fingerprinter, distance
from .guard import ContextGuard
from .idempotence import IdempotenceResult, check_idempotence
from .invariants.plan import PlanStep
from .literals import LiteralRegistry
from .model import Context, Message, OpaquePart, TextPart, ToolCall, ToolResult, ToolSchema
from .provenance import verify_jsonl
from .report import DECISIONS, INVARIANTS, MUTATION_KINDS, Finding, Report
from .telemetry import MutationTelemetry
from .version import VERSION as __version__

__all__ = [
    "DECISIONS", "INVARIANTS", "MUTATION_KINDS", "__version__", "check_idempotence", "Context", "ContextGuard",
    "ContextRewriteInvalidatesPlanError", "ContractionDetector", "ContractionRegimeError", "CycleVerdict",
    "DetectorConfig", "distance", "find_directives", "Finding", "Fingerprinter", "IdempotenceResult",
    "InvalidContextError", "LiteralRegistry", "Message", "MutationTelemetry", "NonIdempotentRewriteError",
    "NonMonotonicRewriteError", "OpaquePart", "OrphanedToolPairError", "out_of_band", "PassCapReachedError",
    "PlanStep", "GuardConfig", "ProviderCache",
    "PolicyMutationError", "Report", "strip_directives", "TextPart", "ToolCall", "ToolResult", "ToolSchema",
    "verify_jsonl",
]
