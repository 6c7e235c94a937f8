"""Per-loop span numbering: `ctxwatch.sequence`, `ctxwatch.contraction.cycle` and `ctxwatch.guard.instance.id`.

For every report of a loop the telemetry layer takes the next number of the loop's current episode
(1, 2, ... for every span, appends included; a new episode number starts again at 1) and the guard's
detector cycles so far in the detector's life (`semconv.detector_life`: its run, which a session boundary's
new episode keeps and only `ContextGuard.new_episode` moves on), counted with the rule the detector is fed by
(`semconv.feeds_detector`). A report is numbered whether or not its span is sampled, so a consumer
sees a gap where a span was sampled out or lost. Numbering is thread-safe and bounded: past
`capacity` loops the least recently reported one is forgotten.

Each loop's numbering has an instance id, chosen when the numbering starts: a random UUID (version 4,
as OpenTelemetry's `service.instance.id` convention recommends), so a restarted process, a numbering
restarted after it was forgotten, or a new guard made for the loop in the same process (`restart`: a
conversation a wrapper let go and made again; its state, episodes and detector start afresh) is told
apart from a duplicate of the spans before; a new episode keeps it. A backfill (`renumber`, ``ctxwatch
replay --otlp`` and ``ctxwatch watch``) numbers its session from the top on every run, so its instance is
`recorded_instance`, a UUID version 5 of the loop id: a second run or a resumed watcher is the same
instance, and its spans are the same spans again.

A session continued in another file (its file rotated: moved aside, or copied and truncated, and the
agent writing on in a new one at the same path) is another numbering of the same loop: that file is
read from its own start, so its audit, and its numbering, start afresh. It is the session's
*generation* n (the first file is 0), and its instance a UUID version 5 of the loop id and n, so the
monitor takes it for a new run of the loop (as for a restarted guard) instead of duplicates of the
first file's spans. `Generation.of` is the one rule saying which generation a file is: one that opens
with the same record as the loop's file reported last is that file again (read again, rewritten whole,
or re-created with the same content), one that opens with another record is the next generation.
``ctxwatch watch`` keeps the generation of each followed path in its state; ``ctxwatch replay --otlp``
numbers the files of one loop in the order given (`RecordedFiles`).
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
    cycle: int      # ctxwatch.contraction.cycle: the detector cycles in its run after the span
    instance: str   # ctxwatch.guard.instance.id
    run: int        # ctxwatch.contraction.run


def recorded_instance(loop_id: str, generation: int = 0) -> str:
    """The instance id of a recorded session's numbering: the same on every run that reports it; `generation`
    n > 0 for the n-th file the session continued in (see the module docstring)."""
    return str(uuid.uuid5(INSTANCE_NAMESPACE, loop_id if generation == 0 else f"{loop_id}\ncontinued {generation}"))


class Generation(NamedTuple):
    """Which numbering of a loop a recorded file is: the session's `number`-th file, and how it opens (a digest
    of its first record; '' when that tells nothing, as for a document rewritten whole)."""

    number: int = 0
    opening: str = ""

    def of(self, opening: str) -> Generation:
        """The generation of the next file reported for the loop, opening with `opening`, this one the last: the
        same when it opens the same, or either opening is unknown (the same session read again, rewritten
        whole or re-created), else the next (the session continued in another file)."""
        if not opening or not self.opening or opening == self.opening:
            return Generation(self.number, opening or self.opening)
        return Generation(self.number + 1, opening)


class RecordedFiles:
    """The last file reported for each loop in one run, by `Generation` (``replay --otlp`` of a session's
    rotated files given in order: ``replay --otlp session.jsonl.1 session.jsonl``)."""

    def __init__(self) -> None:
        self._last: dict[str, Generation] = {}

    def generation(self, loop_id: str, opening: str) -> int:
        """The generation number of a file of `loop_id` opening with `opening`, reported after the others."""
        last = self._last[loop_id] = self._last.get(loop_id, Generation()).of(opening)
        return last.number


class _Stream:
    """One loop's numbering in progress."""

    __slots__ = ("instance", "episode", "run", "sequence", "cycles")

    def __init__(self, instance: str, episode: int, run: int = 0) -> None:
        self.instance, self.episode, self.run, self.sequence, self.cycles = instance, episode, run, 0, 0


class LoopSequences:
    """The instance, episode, span number and detector cycle count of each loop reported through one
    telemetry object."""

    def __init__(self, capacity: int = MAX_LOOPS) -> None:
        self.capacity = capacity
        self._loops: OrderedDict[str, _Stream] = OrderedDict()
        self._lock = threading.Lock()

    def next(self, loop_id: str, episode: int, kind: str, decision: str, hash_distance: float | None,
             run: int = 0) -> Numbering:
        """Number the loop's next span (`run`: the guard's detector run)."""
        fed = semconv.feeds_detector(kind, decision, hash_distance)
        with self._lock:
            stream = self._loops.get(loop_id)
            if stream is None:
                stream = self._start(loop_id, str(uuid.uuid4()), episode, run)
            else:
                self._loops.move_to_end(loop_id)
                if stream.episode != episode:
                    stream.episode, stream.sequence = episode, 0
                if stream.run != run:
                    stream.run, stream.cycles = run, 0
            stream.sequence += 1
            stream.cycles += fed
            return Numbering(stream.sequence, stream.cycles, stream.instance, stream.run)

    def restart(self, loop_id: str) -> None:
        """Number the loop's next span as a new run: a new guard made for the loop, whose episodes count from 0
        again (under the numbering before, its episode 0 would come after a later episode of the same instance,
        and a consumer that orders an instance's episodes would take its spans for late ones)."""
        with self._lock:
            self._loops.pop(loop_id, None)

    def renumber(self, loop_id: str, instance: str, sequence: int = 0, cycles: int = 0) -> None:
        """Number the loop from the start again as `instance` (a reader about to report its session from the top),
        or on after `sequence` spans and `cycles` detector cycles (a reader resuming its session there)."""
        with self._lock:
            self._loops.pop(loop_id, None)
            stream = self._start(loop_id, instance, 0)
            stream.sequence, stream.cycles = sequence, cycles

    def _start(self, loop_id: str, instance: str, episode: int, run: int = 0) -> _Stream:
        stream = self._loops[loop_id] = _Stream(instance, episode, run)
        if len(self._loops) > self.capacity:
            self._loops.popitem(last=False)
        return stream
