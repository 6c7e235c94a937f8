"""Telemetry fails open: how an error inside telemetry or an exporter is absorbed and counted.

Every such error is logged at debug level, added to a process-wide count (readable with
`error_count`, even when the metrics pipeline itself is what fails), and — when an OTel counter
is at hand — to the ``ctxwatch.telemetry.errors`` counter. Nothing here ever raises.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .. import semconv
from .bounded import BoundedValues

logger = logging.getLogger("ctxwatch.telemetry")

_lock = threading.Lock()
_counts: dict[str, int] = {}
_error_types = BoundedValues(cap=32)


def record_failure(stage: str, error: BaseException | str, counter: Any = None) -> None:
    """Count and log one telemetry error at `stage` (start, end, export_traces or export_metrics: docs/telemetry.md)."""
    error_type = error if isinstance(error, str) else type(error).__name__
    with _lock:
        _counts[stage] = _counts.get(stage, 0) + 1
    try:
        logger.debug("ctxwatch telemetry error at %s: %s", stage, error_type,
                     exc_info=error if isinstance(error, BaseException) else None)
        if counter is not None:
            counter.add(1, {semconv.TELEMETRY_STAGE: stage,
                            semconv.GENAI_V1_41.error_type: _error_types.value(error_type)})
    except Exception:  # noqa: BLE001 - the error counter itself failed; the count above still holds
        pass


def error_count(stage: str | None = None) -> int:
    """Telemetry errors counted in this process so far (all stages, or one)."""
    with _lock:
        return sum(_counts.values()) if stage is None else _counts.get(stage, 0)
