"""Per-loop state in memory: a compact cycle history, the detector, and the fleet aggregates.

Each `LoopState` has `__slots__` and keeps its history as one bytearray ring of fixed-size packed
entries, so a tracked loop costs well under 2 KB. The `LoopStore` keeps loops in least-recently-
seen order: past `max_loops` the least recently seen loop of the lowest on-call rank is evicted
(`OncallState.keep_rank`: loops not in an alarm first, then those that went idle in one, active alarms
last, so a flood of new loop ids cannot clear an alarm), and `sweep` forgets loops not seen within the
TTL; both are counted. The per-(service, agent, state) loop counts behind `ctxwatch_loops`
(and per on-call status behind `ctxwatch_loops_by_status`) are adjusted on every change, so /metrics never scans
the loops.
"""

from __future__ import annotations

import math
import struct
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, NamedTuple

from ctxwatch.contraction import STATES
from ctxwatch.report import DECISIONS, MUTATION_KINDS

from .instruments import Instruments
from .loop_state import ALARM_RANK, ALARMING, CALM_RANK, STOPPED_RANK, OncallState
from .ordering import LoopOrder

# 25 bytes: time (the span's end in ms since the epoch, 48 bits as uint32 + uint16: exact to the ms however old
# the span, as spans of a `replay --otlp` of a session weeks old are, up to the year 10889), d, r (float32),
# literals before and lost (uint16, saturating), detector cycle (0: not fed; uint32, saturating: a guard may
# report any int64 as its cycle), decision, kind, state
_ENTRY = struct.Struct("<IHffHHIBBB")
_MS_MAX = 2**48 - 1
ENTRY_SIZE = _ENTRY.size
# the entries of earlier state files: time as float32 s after the loop's first_seen (1 s resolution a few
# months away from it)
_ENTRY_FLOAT32_TIME = struct.Struct("<fffHHIBBB")
_U16 = 0xFFFF
_U32 = 0xFFFFFFFF
_KINDS = list(MUTATION_KINDS)
_KIND_CODES = {kind: i for i, kind in enumerate(MUTATION_KINDS)}
_DECISION_CODES = {decision: i for i, decision in enumerate(DECISIONS)}
_STATE_CODES = {state: i for i, state in enumerate(STATES)}
_OTHER_KIND = 255


class Cycle(NamedTuple):
    """One history entry: a non-append mutation attempt and the detector state after it."""

    time: float
    kind: str
    decision: str
    d: float | None
    r: float | None
    literals_before: int
    literals_lost: int
    cycle: int | None
    state: str


def _f32(value: float | None) -> float:
    return math.nan if value is None else value


def _ms(time: float) -> tuple[int, int]:
    """Unix seconds as the entry's 48-bit ms: (low 32 bits, high 16 bits), saturating."""
    ms = min(max(round(time * 1000), 0), _MS_MAX)
    return ms & _U32, ms >> 32


def _opt(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


class LoopState:
    """What the monitor knows about one loop."""

    __slots__ = ("loop_id", "service", "agent", "labels", "state", "onset", "flagged", "alarm_time", "cycles",
                 "first_seen", "last_seen", "detector", "history", "entries", "guard_state", "episode",
                 "episode_start", "order", "oncall")

    def __init__(self, loop_id: str, service: str, agent: str, labels: tuple[str, str], state: str,
                 detector: Any, now: float) -> None:
        self.loop_id, self.service, self.agent, self.labels = loop_id, service, agent, labels
        self.state = state
        self.onset: int | None = None        # the detector's onset cycle of the (last) contraction
        self.flagged: int | None = None      # the cycle at which the detector entered contracting
        self.alarm_time: float | None = None  # when it did (span end time, unix seconds)
        self.cycles = 0
        self.first_seen = self.last_seen = now
        self.detector = detector
        self.history = bytearray()
        self.entries = 0
        self.guard_state: str | None = None
        self.episode = 0                     # the guard's episode (ContextGuard.new_episode) the detector follows
        self.episode_start: float | None = None  # end time of its first span, once the episode has changed
        self.order = LoopOrder()             # where the loop is in its guard's span sequence
        self.oncall = OncallState()          # its status for on-call (loop_state)

    def record(self, capacity: int, time: float, kind: str, decision: str, d: float | None, r: float | None,
               before: int, lost: int, cycle: int) -> None:
        """Append one history entry, overwriting the oldest once `capacity` entries are kept."""
        packed = _ENTRY.pack(*_ms(time), _f32(d), _f32(r), min(before, _U16), min(lost, _U16),
                             min(cycle, _U32), _DECISION_CODES[decision], _KIND_CODES.get(kind, _OTHER_KIND),
                             _STATE_CODES[self.state])
        if self.entries < capacity:
            self.history += packed
        else:
            at = (self.entries % capacity) * _ENTRY.size
            self.history[at:at + _ENTRY.size] = packed
        self.entries += 1

    def cycles_in_order(self) -> list[Cycle]:
        """The kept history, oldest first."""
        count = len(self.history) // _ENTRY.size
        start = self.entries % count if count and self.entries > count else 0
        out = []
        for i in range(count):
            low, high, d, r, before, lost, cycle, decision, kind, state = _ENTRY.unpack_from(
                self.history, ((start + i) % count) * _ENTRY.size)
            kind_name = _KINDS[kind] if kind < len(_KINDS) else "other"
            out.append(Cycle((high << 32 | low) / 1000, kind_name, DECISIONS[decision], _opt(d),
                             _opt(r), before, lost, cycle or None, STATES[state]))
        return out


def history_from_float32_times(history: bytes, first_seen: float) -> bytes:
    """A history ring of an earlier state file (times as float32 offsets from the loop's first_seen) in today's
    entry format, entry for entry (ValueError when it is not a whole number of entries)."""
    if len(history) % _ENTRY_FLOAT32_TIME.size:
        raise ValueError(f"a history of {len(history)} bytes is not made of {_ENTRY_FLOAT32_TIME.size}-byte entries")
    return b"".join(_ENTRY.pack(*_ms(first_seen + offset), *rest)
                    for offset, *rest in _ENTRY_FLOAT32_TIME.iter_unpack(history))


class LoopStore:
    """All tracked loops, least recently seen first, with eviction and incremental aggregates."""

    def __init__(self, instruments: Instruments, max_loops: int, ttl: float) -> None:
        self.instruments = instruments
        self.max_loops, self.ttl = max_loops, ttl
        self.loops: OrderedDict[str, LoopState] = OrderedDict()
        # the loops by keep rank (CALM_RANK, STOPPED_RANK, ALARM_RANK), each least recently seen first
        self.ranks: tuple[OrderedDict[str, LoopState], ...] = tuple(
            OrderedDict() for _ in (CALM_RANK, STOPPED_RANK, ALARM_RANK))
        self.alarm_board: dict[str, LoopState] = {}  # loops that have been in an alarming status (loop_state)
        self.dirty: set[str] = set()
        self.removed: set[str] = set()

    def __len__(self) -> int:
        return len(self.loops)

    def get(self, loop_id: str) -> LoopState | None:
        return self.loops.get(loop_id)

    def __iter__(self) -> Iterator[LoopState]:
        """Most recently seen first."""
        return reversed(self.loops.values())

    @property
    def alarms(self) -> OrderedDict[str, LoopState]:
        """The loops whose alarm is active (refusing, contracting, blocked, halted), least recently seen first."""
        return self.ranks[ALARM_RANK]

    def _count(self, loop: LoopState, delta: int) -> None:
        self.instruments.loops.add((*loop.labels, loop.state), delta)
        self.instruments.loop_status.add((*loop.labels, loop.oncall.status), delta)

    def add(self, loop: LoopState) -> None:
        """Track a new or restored loop as the most recently seen one (`evict_past_cap` enforces the cap once
        its spans are applied, so that a new loop is ranked by the status they give it)."""
        self.loops[loop.loop_id] = loop
        if loop.oncall.alarm_end is not None or loop.oncall.status in ALARMING:
            self.alarm_board[loop.loop_id] = loop
        self._count(loop, +1)
        self.ranks[loop.oncall.keep_rank()][loop.loop_id] = loop
        self.removed.discard(loop.loop_id)
        self.instruments.loops_tracked.set((), len(self.loops))

    def evict_past_cap(self) -> None:
        """Evict loops until `max_loops` are tracked: the least recently seen of the lowest keep rank first
        (`OncallState.keep_rank`), so a loop whose alarm is active goes only when active alarms alone are
        more than `max_loops` (then the least recently seen of them)."""
        ranks = self.ranks
        while len(self.loops) > self.max_loops:
            group = next(group for group in ranks if group)
            self._evict(next(iter(group.values())), "cap")
        self.instruments.loops_tracked.set((), len(self.loops))

    def touch(self, loop: LoopState, now: float) -> None:
        """Mark `loop` seen now (the most recently seen)."""
        self.loops.move_to_end(loop.loop_id)
        self.ranks[loop.oncall.keep_rank()].move_to_end(loop.loop_id)
        loop.last_seen = now
        self.dirty.add(loop.loop_id)

    def relabel(self, loop: LoopState, service: str, agent: str) -> None:
        """Follow a change of the loop's service or agent name ("" keeps the one it has): called for a span
        applied in its turn only, so the loop carries the names of the last span of its guard's sequence,
        whatever order the spans came in, and a late or held one (a duplicate, a forgery) renames nothing."""
        if (service and service != loop.service) or (agent and agent != loop.agent):
            self._count(loop, -1)
            loop.service, loop.agent = service or loop.service, agent or loop.agent
            loop.labels = self.instruments.label_pair(loop.service, loop.agent)
            self._count(loop, +1)
            self.dirty.add(loop.loop_id)

    def set_state(self, loop: LoopState, state: str) -> None:
        if state != loop.state:
            self._count(loop, -1)
            loop.state = state
            self._count(loop, +1)

    def set_status(self, loop: LoopState, status: str, at: float) -> None:
        """Move the loop to another on-call status (`loop_state.STATUSES`), keeping the counts by status."""
        if status != loop.oncall.status:
            self.instruments.loop_status.add((*loop.labels, loop.oncall.status), -1)
            rank = loop.oncall.keep_rank()
            loop.oncall.moved_to(status, at)
            if loop.oncall.keep_rank() != rank:  # it joins its new rank as the most recently seen there
                del self.ranks[rank][loop.loop_id]
                self.ranks[loop.oncall.keep_rank()][loop.loop_id] = loop
            if status in ALARMING:
                self.alarm_board[loop.loop_id] = loop
            self.instruments.loop_status.add((*loop.labels, status), +1)
            self.dirty.add(loop.loop_id)

    def on_alarm_board(self, now: float, retention: float) -> list[tuple[str, LoopState]]:
        """The loops alarming now, or that stopped or resolved within `retention` seconds, with which
        (`OncallState.alarm`); the others leave the board."""
        board = []
        for loop_id, loop in list(self.alarm_board.items()):
            alarm = loop.oncall.alarm(now, retention)
            if alarm is None:
                del self.alarm_board[loop_id]
            else:
                board.append((alarm, loop))
        return board

    def _evict(self, loop: LoopState, reason: str) -> None:
        del self.loops[loop.loop_id]
        del self.ranks[loop.oncall.keep_rank()][loop.loop_id]
        self.alarm_board.pop(loop.loop_id, None)
        self._count(loop, -1)
        self.dirty.discard(loop.loop_id)
        self.removed.add(loop.loop_id)
        self.instruments.evictions.inc((reason,))

    def sweep(self, now: float) -> int:
        """Forget loops not seen within the TTL; returns how many."""
        if not self.ttl:
            return 0
        horizon, evicted = now - self.ttl, 0
        while self.loops:
            oldest = next(iter(self.loops.values()))
            if oldest.last_seen >= horizon:
                break
            self._evict(oldest, "ttl")
            evicted += 1
        self.instruments.loops_tracked.set((), len(self.loops))
        return evicted

    def clear(self) -> None:
        """Forget everything (before reloading from the database)."""
        for loop in list(self.loops.values()):
            self._count(loop, -1)
        self.loops.clear()
        for group in self.ranks:
            group.clear()
        self.alarm_board.clear()
        self.dirty.clear()
        self.removed.clear()
        self.instruments.loops_tracked.set((), 0)
