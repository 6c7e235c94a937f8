"""The monitor's state owner: applies decoded spans to loops, runs the shared detector, persists.

All state lives on one thread (a single-worker executor), so spans, sweeps, queries and /metrics
renders never race. `apply` validates one request's spans, counts the accepted ones and applies each
to its loop in the guard's sequence order (`ordering`: spans that arrive ahead of a missing one wait
in a bounded window), feeding the rewrite cycles to the loop's `ctxwatch.contraction.ContractionDetector`
(the same alarm logic the guard runs in-process). When a cycle is missing the loop adopts the state
the guard reports instead. Spans of guards that send no `ctxwatch.sequence` are applied in the order
received. The fleet metrics count each span when it is applied (a span held ahead of a missing one once its
turn comes, one held aside once its run is taken), so they count what the loops show. `commit` then writes
everything applied since the last commit in one transaction, before any of those requests is answered (the
receiver groups the requests queued meanwhile behind one commit, see `batches`). If the commit fails, memory
is reloaded from the database (the last acknowledged state) and `Unavailable` is raised, so the clients retry
and nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, TypeVar

from ctxwatch.contraction import STATES, ContractionDetector, DetectorConfig

from .config import MonitorConfig
from .instruments import LABEL_STATE_KEYS, Instruments
from .loop_state import CONTRACTING, IDLE, OncallState
from .loops import LoopState, LoopStore
from .ordering import APPLIED, COUNT_DIFFERED, EPISODE_END, GUARD, HELD, LATE, MONITOR, LoopOrder, Sequencer
from .otlp_codec import RawSpan
from .persistence import Database
from .records import MutationRecord, Rejected, validate

log = logging.getLogger("ctxwatch.monitor")
MAX_REPORTED_REJECTIONS = 3
T = TypeVar("T")
# built once: json.dumps with options builds an encoder per call
_compact_json = json.JSONEncoder(separators=(",", ":")).encode


class Unavailable(RuntimeError):
    """The state cannot be written right now (answered with 503 and Retry-After)."""


class StateReset(RuntimeError):
    """Applying a request failed part-way; memory was reloaded from the last commit, so what the batch had
    applied before it must be applied again (`batches`). The request is answered 400: sent again, it
    would fail again."""


class IngestResult(NamedTuple):
    accepted: int
    rejected: int
    ignored: int
    message: str


def detector_config(settings: dict[str, Any]) -> DetectorConfig:
    """The detector configuration from the config file's [contraction] table (ValueError if unusable)."""
    try:
        return DetectorConfig(**settings)
    except TypeError as exc:
        raise ValueError(f"[contraction]: {exc}") from None


class Engine:
    """Loops, metrics and the state file, driven from one thread (see the module docstring)."""

    def __init__(self, config: MonitorConfig, instruments: Instruments, database: Database | None) -> None:
        self.config = config
        self.instruments = instruments
        self.database = database
        self.detector_config = detector_config(dict(config.contraction))
        self.store = LoopStore(instruments, config.max_loops, config.loop_ttl)
        self.sequencer = Sequencer(config.order_window, config.order_wait, self._apply_in_order, self._new_episode,
                                   lone_waits=config.lone_waits)
        self.waiting: set[str] = set()  # loops holding spans that wait for their turn (`LoopOrder.waiting`)
        # the spans applied since the fleet metrics last counted, each with its bounded (service, agent)
        self._taken: list[tuple[MutationRecord, tuple[str, str]]] = []
        self.ready = False
        self.disk_error: str | None = None  # why the last write to the state file failed, until one succeeds
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxwatch-state")

    # --- running on the state thread ---------------------------------------------------------------
    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` on the state thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True)
        if self.database is not None:
            self.database.close()

    # --- restore -----------------------------------------------------------------------------------
    def restore(self) -> None:
        """Load loops, histories, detector states and persisted series from the state file."""
        self.store.clear()
        persisted = [f for f in self.instruments.metric_set.families.values() if f.persist]
        for family in persisted:
            family.clear()
        self.instruments.metric_set.forget_dirty()
        self.instruments.forget_labels()
        if self.database is not None:
            self.instruments.restore_labels({name: self.database.meta(name) for name in LABEL_STATE_KEYS})
            families = self.instruments.metric_set.families
            for name, key, value in self.database.load_series():
                if name in families and families[name].persist:
                    families[name].restore(key, value)
            self.waiting.clear()
            for row in self.database.load_loops():
                loop = self.database.checked(row, self._loop_from_row)
                self.store.add(loop)
                if loop.order.waiting:
                    self.waiting.add(loop.loop_id)
            self.store.evict_past_cap()
            self.store.dirty.clear()
            self.store.removed.clear()
        self.ready = True

    def _loop_from_row(self, row: dict[str, Any]) -> LoopState:
        detector = ContractionDetector.from_dict(json.loads(row["detector"]), self.detector_config)
        labels = self.instruments.label_pair(row["service"], row["agent"])
        loop = LoopState(row["loop_id"], row["service"], row["agent"], labels, row["state"], detector,
                         row["first_seen"])
        loop.last_seen, loop.cycles, loop.guard_state = row["last_seen"], row["cycles"], row["guard_state"]
        loop.onset, loop.flagged, loop.alarm_time = row["onset"], row["flagged"], row["alarm_time"]
        loop.history, loop.entries = bytearray(row["history"]), row["entries"]
        loop.episode, loop.episode_start = row["episode"], row["episode_start"]
        loop.order = LoopOrder.from_json(row["ordering"])
        loop.oncall = OncallState.from_json(row["oncall"])
        return loop

    # --- ingest --------------------------------------------------------------------------------------
    def apply(self, spans: list[RawSpan]) -> IngestResult:
        """Validate and apply one request's spans in memory (on the state thread); `commit` persists them."""
        if not self.ready:
            raise Unavailable("the monitor's state is not loaded")
        records: list[MutationRecord] = []
        rejections: list[str] = []
        for span in spans:
            try:
                record = validate(span)
            except Rejected as exc:
                rejections.append(str(exc))
                continue
            if record is not None:
                records.append(record)
        now = time.time()
        self._taken = []
        try:
            for record in records:
                self._apply(record, now)
            self._count_taken()
            self.store.evict_past_cap()  # past the spans: a new loop is ranked by the status they gave it
        except Exception as exc:  # a half-applied request must not reach the database
            log.exception("ctxwatch monitor: applying a request failed; reloading the last committed state")
            self._reload_after_failure()
            raise StateReset(f"applying the request failed ({type(exc).__name__}); state reloaded") from exc
        ignored = len(spans) - len(records) - len(rejections)
        message = ""
        if rejections:
            shown = "; ".join(rejections[:MAX_REPORTED_REJECTIONS])
            more = len(rejections) - MAX_REPORTED_REJECTIONS
            message = f"{len(rejections)} span(s) rejected: {shown}" + (f"; and {more} more" if more > 0 else "")
        return IngestResult(len(records), len(rejections), ignored, message)

    def commit(self, results: list[IngestResult]) -> None:
        """Persist everything applied since the last commit in one transaction, then count the requests'
        spans (on the state thread; `Unavailable` when the state file cannot be written)."""
        self._persist()
        instruments = self.instruments
        instruments.spans_accepted.inc((), sum(r.accepted for r in results))
        instruments.spans_rejected.inc((), sum(r.rejected for r in results))
        instruments.spans_ignored.inc((), sum(r.ignored for r in results))

    def _apply(self, record: MutationRecord, now: float) -> None:
        """Apply one record to its loop, or hold it (`ordering`). A late span is counted in `late_spans` only: the
        fleet metrics count what the loops apply (`_taken`), so a duplicate, e.g. a second ``replay --otlp`` of a
        session, is not counted twice, and a span held aside (a forgery numbered far ahead, say) only if and when
        its run is taken. A late span, or one held aside, changes nothing of its loop: not its names, not when it
        was last seen, not its idle status."""
        store = self.store
        loop = store.get(record.loop_id)
        if loop is None:
            detector = ContractionDetector(self.detector_config)
            loop = LoopState(record.loop_id, record.service, record.agent,
                             self.instruments.label_pair(record.service, record.agent), detector.state, detector, now)
            store.add(loop)
            store.dirty.add(loop.loop_id)
        if record.sequence is None:
            if loop.order.sequenced:
                self.instruments.late_spans.inc(("unsequenced",))  # counted, not a cycle: the loop's guard numbers them
                return
            self._apply_unsequenced(loop, record, now)
            return
        outcome = self.sequencer.offer(loop, record, now)
        store.dirty.add(loop.loop_id)
        if loop.order.waiting:
            self.waiting.add(loop.loop_id)
        else:
            self.waiting.discard(loop.loop_id)
        if outcome == LATE:
            self.instruments.late_spans.inc(("late",))
        elif outcome != APPLIED:
            self.instruments.held_spans.inc(())
        if outcome == HELD:  # ahead of a missing span of its run: a sign of the loop's life
            store.touch(loop, now)
            if loop.oncall.status == IDLE:  # it sends again: resumed with the status its spans gave
                store.set_status(loop, loop.oncall.status_for(loop.state, self.config.refusing_for), now)

    def _count_taken(self) -> None:
        """Count the spans applied since the last call in the fleet metrics."""
        if self._taken:
            self.instruments.observe(self._taken)
            self._taken = []

    def _apply_unsequenced(self, loop: LoopState, record: MutationRecord, now: float) -> None:
        """A span of a guard that does not number its spans: applied in arrival order; another episode
        number starts a new episode unless the span ended before the current one began."""
        at = _span_time(record, now)
        if record.episode != loop.episode:
            if loop.episode_start is not None and at < loop.episode_start:
                self._take(loop, record, now)  # a late span of the episode before: counted, not a cycle
                return
            self._new_episode(loop, record.episode, at)
        self._apply_in_order(loop, record, now)

    def _take(self, loop: LoopState, record: MutationRecord, now: float) -> None:
        """The loop takes one span: seen now, counted in the fleet metrics under the span's own (service, agent)
        (the loop's where it names none) and its own agent version."""
        self.store.touch(loop, now)
        self._taken.append((record, self.instruments.label_pair(record.service or loop.service,
                                                                record.agent or loop.agent)))

    def _apply_in_order(self, loop: LoopState, record: MutationRecord, now: float) -> None:
        """Apply one span of the loop's episode, in its turn: its own detector follows the cycle, or, once a
        cycle is missing, the loop follows the state the guard reports. (The caller marks the loop dirty.)"""
        at = _span_time(record, now)
        self.store.relabel(loop, record.service, record.agent)
        self._take(loop, record, now)
        if record.guard_state is not None:
            loop.guard_state = record.guard_state
        order, fed, guard_cycle = loop.order, record.feeds_detector, record.guard_cycle
        life = list(record.detector_life)
        if order.life != life:
            if order.life is not None:
                self._new_detector(loop, at)
            order.life = life
        cycle = 0
        if order.source == MONITOR:
            if fed:
                verdict = loop.detector.update(record.d, record.before, record.lost, record.size_after)
                cycle = loop.cycles = verdict.cycle
                loop.onset = verdict.onset
                if verdict.state != loop.state:
                    self._set_state(loop, verdict.state, cycle, at)
            if guard_cycle is not None:
                self._compare_cycles(loop, record, guard_cycle)
        if order.source == GUARD and guard_cycle is not None:
            loop.cycles = guard_cycle
            if fed:
                cycle = guard_cycle
            guard_state = record.guard_state
            if guard_state is not None and guard_state in STATES and guard_state != loop.state:
                self._set_state(loop, guard_state, guard_cycle, at)
        entry = None
        if record.kind != "append":
            entry = loop.entries
            loop.record(self.config.history, at, record.kind, record.decision, record.d, record.loss_rate,
                        record.before, record.lost, cycle)
        loop.oncall.observe(record, at, entry, self.config.history, self.config.block_after)
        self.store.set_status(loop, loop.oncall.status_for(loop.state, self.config.refusing_for), at)

    @staticmethod
    def _compare_cycles(loop: LoopState, record: MutationRecord, guard_cycle: int) -> None:
        """Compare the guard's detector cycles (`ctxwatch.contraction.cycle`) with the monitor's, on a loop whose
        state is the monitor's own. The loop follows the guard's reported state from here on only when spans are
        known to be missing: a gap given up in its run that no span's count has vouched for since (a count that
        agrees says the gap held no cycle), or a guard that numbers no spans (no gap can be seen). Otherwise the
        monitor applied every span of the run, as the guard sent them: a count that differs is no span of that
        guard's (a forgery standing for one), and one span must not change whose state every viewer of the loop
        sees (docs/monitor.md, "Missing cycles")."""
        order = loop.order
        if guard_cycle == loop.detector.cycle:
            order.gap = None
        elif order.gap == EPISODE_END:
            order.gap = COUNT_DIFFERED  # one span's count alone does not turn the loop (see ordering.EPISODE_END)
        elif order.gap is not None or record.sequence is None:
            order.source = GUARD
            order.reason = order.gap or (f"the guard counts {guard_cycle} detector cycles in its detector run, "
                                         f"the monitor {loop.detector.cycle}: spans are missing")

    def _set_state(self, loop: LoopState, state: str, cycle: int, at: float) -> None:
        """Move the loop to another state, noting the alarm when it enters the contraction regime."""
        if state == CONTRACTING:
            loop.flagged, loop.alarm_time = cycle, at
            self.instruments.onsets.inc(loop.labels)
        self.store.set_state(loop, state)

    def _new_episode(self, loop: LoopState, episode: int, at: float) -> None:
        """The loop's spans carry another episode number or guard instance: the guard started a new episode (a
        session boundary, or `ContextGuard.new_episode`) or a new guard took the loop over (a restarted process:
        another `ctxwatch.guard.instance.id`, counting from 0 again). The pass count started afresh, so a block
        no longer holds; the detector goes on unless the first span applied from it names another detector life
        (`MutationRecord.detector_life`, `_new_detector`: the same rule the guard's telemetry counts by)."""
        loop.episode, loop.episode_start = episode, at
        loop.oncall.new_episode()
        self.store.set_status(loop, loop.oncall.status_for(loop.state, self.config.refusing_for), at)

    def _new_detector(self, loop: LoopState, at: float) -> None:
        """The guard's detector started afresh (`new_episode()` after a fix, or a new guard): so does the loop's,
        and its halt and alarm are over; the loop's history is kept."""
        loop.detector = ContractionDetector(self.detector_config)
        loop.cycles, loop.onset, loop.flagged, loop.alarm_time = 0, None, None, None
        self.store.set_state(loop, loop.detector.state)
        loop.oncall.new_detector()

    def expire_gaps(self) -> int:
        """Give up the gaps held spans have waited for long enough (`order_wait`), take the lone spans of
        restarts that waited as long for one; persist what that applied. Returns how many loops still wait."""
        now = time.time()
        changed = False
        for loop_id in list(self.waiting):
            loop = self.store.get(loop_id)
            if loop is not None and self.sequencer.expire(loop, now):
                changed = True
                self.store.dirty.add(loop_id)
            if loop is None or not loop.order.waiting:
                self.waiting.discard(loop_id)
        if changed:
            self._count_taken()
            self._persist()
        return len(self.waiting)

    def mark_idle(self) -> int:
        """Loops with no span for `idle_after` seconds become idle (persisted); returns how many did."""
        now = time.time()
        horizon, marked = now - self.config.idle_after, 0
        for loop in self.store.loops.values():  # least recently seen first
            if loop.last_seen >= horizon:
                break
            if loop.oncall.status != IDLE:
                self.store.set_status(loop, IDLE, now)
                marked += 1
        if marked:
            self._persist()
        return marked

    def sweep(self) -> int:
        """Forget loops past the TTL and label values past the label TTL; persist (with the labels'
        last-seen times)."""
        now = time.time()
        evicted = self.store.sweep(now)
        self.instruments.sweep_labels(now, self.config.label_ttl)
        self._persist(labels=True)
        return evicted

    def check_disk(self) -> None:
        """After a failed write: try a small write; clears `disk_error` when the state file takes it."""
        if self.disk_error is not None and self.database is not None:
            try:
                self.database.probe()
            except sqlite3.Error as exc:
                self.disk_error = str(exc)
            else:
                self.disk_error = None

    # --- persistence -----------------------------------------------------------------------------------
    def _persist(self, labels: bool = False) -> None:
        store = self.store
        series, dropped = self.instruments.metric_set.take_dirty()
        dirty = [store.loops[i] for i in store.dirty]
        removed = list(store.removed)
        store.dirty.clear()
        store.removed.clear()
        meta = self.instruments.take_label_state(force=labels)
        if self.database is None:
            return
        rows = [_row(loop) for loop in dirty]
        started = time.perf_counter()
        try:
            self.database.write(rows, removed, series, meta, dropped)
        except sqlite3.Error as exc:
            log.error("ctxwatch monitor: writing the state file failed (%s); reloading the last committed state", exc)
            self.disk_error = str(exc)
            self._reload_after_failure()
            raise Unavailable(f"the state file could not be written: {exc}") from None
        self.disk_error = None
        self.instruments.db_write_duration.observe((), time.perf_counter() - started)

    def _reload_after_failure(self) -> None:
        self.ready = False
        try:
            self.restore()
        except sqlite3.Error as exc:
            log.error("ctxwatch monitor: reloading the state file failed (%s); not ready", exc)


def _row(loop: LoopState) -> tuple[Any, ...]:
    return (loop.loop_id, loop.service, loop.agent, loop.state, loop.onset, loop.flagged, loop.alarm_time,
            loop.cycles, loop.first_seen, loop.last_seen, loop.guard_state,
            _compact_json(loop.detector.to_dict()), bytes(loop.history), loop.entries, loop.episode,
            loop.episode_start, loop.order.to_json(), loop.oncall.to_json())


def _span_time(record: MutationRecord, now: float) -> float:
    """When the span ended (unix seconds), never later than now: a clock ahead cannot date a cycle in
    the future. Order never depends on it."""
    return min(record.end_ns / 1e9, now) if record.end_ns else now
