"""Per-loop span numbering: `ctxwatch.sequence`, `ctxwatch.contraction.cycle` and `ctxwatch.guard.instance.id`.

For every report of a loop the telemetry layer takes the next number of the loop's current episode
(1, 2, ... for every span, appends included; a new episode number starts again at 1) and the guard's
detector cycles in the episode so far, counted with the rule the detector is fed by
(`semconv.feeds_detector`). A report is numbered whether or not its span is sampled, so a consumer
sees a gap where a span was sampled out or lost. Numbering is thread-safe and bounded: past
`capacity` loops the least recently reported one is forgotten.

Each loop's numbering has an instance id, chosen when the numbering starts: a random UUID (version 4,
as OpenTelemetry's `service.instance.id` convention recommends), so a restarted process, or a numbering
restarted after it was forgotten, is told apart from a duplicate of the spans before; a new episode
keeps it. A backfill (`renumber`, ``ctxwatch replay --otlp`` and ``ctxwatch watch``) numbers its session
from the top on every run, so its instance is `recorded_instance`, a UUID version 5 of the loop id:
a second run or a resumed watcher is the same instance, and its spans are the same spans again.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import NamedTuple

from .. import semconv

MAX_LOOPS = 65_536  # loops numbered at once per telemetry object (about 150 bytes each)
# the namespace OpenTelemetry's semantic conventions give for a version 5 `service.instance.id`
INSTANCE_NAMESPACE = uuid.UUID("4d63009a-8d0f-11ee-aad7-4c796ed8e320")


class Numbering(NamedTuple):
    """Where one span is in its loop's numbering."""

    sequence: int   # ctxwatch.sequence
    cycle: int      # ctxwatch.contraction.cycle: the detector cycles in the episode after the span
    instance: str   # ctxwatch.guard.instance.id


def recorded_instance(loop_id: str) -> str:
    """The instance id of a recorded session's numbering: the same on every run that reports it."""
    return str(uuid.uuid5(INSTANCE_NAMESPACE, loop_id))


class _Stream:
    """One loop's numbering in progress."""

    __slots__ = ("instance", "episode", "sequence", "cycles")

    def __init__(self, instance: str, episode: int) -> None:
        self.instance, self.episode, self.sequence, self.cycles = instance, episode, 0, 0


class LoopSequences:
    """The instance, episode, span number and detector cycle count of each loop reported through one
    telemetry object."""

    def __init__(self, capacity: int = MAX_LOOPS) -> None:
        self.capacity = capacity
        self._loops: OrderedDict[str, _Stream] = OrderedDict()
        self._lock = threading.Lock()

    def next(self, loop_id: str, episode: int, kind: str, decision: str, hash_distance: float | None) -> Numbering:
        """Number the loop's next span."""
        fed = semconv.feeds_detector(kind, decision, hash_distance)
        with self._lock:
            stream = self._loops.get(loop_id)
            if stream is None:
                stream = self._start(loop_id, str(uuid.uuid4()), episode)
            else:
                self._loops.move_to_end(loop_id)
                if stream.episode != episode:
                    stream.episode, stream.sequence, stream.cycles = episode, 0, 0
            stream.sequence += 1
            stream.cycles += fed
            return Numbering(stream.sequence, stream.cycles, stream.instance)

    def renumber(self, loop_id: str, instance: str, sequence: int = 0, cycles: int = 0) -> None:
        """Number the loop from the start again as `instance` (a reader about to report its session from the top),
        or on after `sequence` spans and `cycles` detector cycles (a reader resuming its session there)."""
        with self._lock:
            self._loops.pop(loop_id, None)
            stream = self._start(loop_id, instance, 0)
            stream.sequence, stream.cycles = sequence, cycles

    def _start(self, loop_id: str, instance: str, episode: int) -> _Stream:
        stream = self._loops[loop_id] = _Stream(instance, episode)
        if len(self._loops) > self.capacity:
            self._loops.popitem(last=False)
        return stream
