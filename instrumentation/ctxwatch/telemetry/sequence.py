"""Per-loop span numbering: `ctxwatch.sequence` and `ctxwatch.contraction.cycle` for each mutation span.

For every report of a loop the telemetry layer takes the next number of the loop's current episode
(1, 2, ... for every span, appends included; a new episode number starts again at 1) and the guard's
detector cycles in the episode so far, counted with the rule the detector is fed by
(`semconv.feeds_detector`). A report is numbered whether or not its span is sampled, so a consumer
sees a gap where a span was sampled out or lost. Numbering is thread-safe and bounded: past
`capacity` loops the least recently reported one is forgotten (its numbering restarts, which a
consumer takes as a new stream for that loop).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .. import semconv

MAX_LOOPS = 65_536  # loops numbered at once per telemetry object (about 100 bytes each)


class LoopSequences:
    """The episode, span number and detector cycle count of each loop reported through one telemetry."""

    def __init__(self, capacity: int = MAX_LOOPS) -> None:
        self.capacity = capacity
        self._loops: OrderedDict[str, list[int]] = OrderedDict()
        self._lock = threading.Lock()

    def next(self, loop_id: str, episode: int, kind: str, decision: str, hash_distance: float | None
             ) -> tuple[int, int]:
        """Number the loop's next span: (its sequence, the detector cycles in the episode after it)."""
        fed = semconv.feeds_detector(kind, decision, hash_distance)
        with self._lock:
            entry = self._loops.get(loop_id)
            if entry is None or entry[0] != episode:
                entry = self._loops[loop_id] = [episode, 0, 0]
                if len(self._loops) > self.capacity:
                    self._loops.popitem(last=False)
            else:
                self._loops.move_to_end(loop_id)
            entry[1] += 1
            entry[2] += fed
            return entry[1], entry[2]

    def forget(self, loop_id: str) -> None:
        """Number the loop from the start again (a reader about to report its session from the top)."""
        with self._lock:
            self._loops.pop(loop_id, None)
