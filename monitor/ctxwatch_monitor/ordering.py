"""A loop's spans in the guard's order: sequence numbers, a bounded reorder window, gaps and episodes.

Spans of one loop reach the monitor in any order: an SDK flushes its batches in parallel, a collector
has several senders, and head sampling leaves gaps. Every span of a current guard carries
`ctxwatch.sequence` (1, 2, ... for each span of the loop in its episode) and
`ctxwatch.contraction.cycle` (the guard's detector cycles after it), so the order is never guessed
from arrival or from end times, which come from clocks that step or lie.

Per loop, `LoopOrder` holds the next sequence number expected in the loop's episode and at most
`window` spans that arrived ahead of it. `Sequencer.offer` hands the engine each span once every
span before it has been applied; a span behind the next expected one (a duplicate, or one that came
after its gap was given up) is late: counted, not applied. A gap is given up when a span has waited
`wait` seconds for it (`expire`; a lone one, `lone_waits` times as long: see below) or the window is full: the
engine then applies what follows, and
when its detector no longer counts the cycles the guard counts, it adopts the guard's reported state
for the rest of the episode (`source` = guard, with the reason) instead of guessing the missing cycle.

Episodes: a span with another episode number than the loop's opens a candidate episode, buffered
aside while the loop's own episode goes on; the loop switches to it once two spans of it (two distinct
sequence numbers) have arrived, whatever their end times. Episodes of one guard instance are ordered (a
guard's `new_episode` counts up): a span of an episode before the loop's, of the instance the loop follows,
is late. A lower episode number without an instance id (the fresh guard of a restarted process of a version
that sends none counts from 0 again, but so do the spans of the episodes before, arriving late) needs,
besides, a span of it arriving `wait` seconds or more after the last span of the loop's own episode. One
forged span therefore cannot reset a loop's detector or clear its alarm, and it leaves no mark on the loop's
later spans. Spans of the episode the loop left are late.

The next episode: a guard starts one at every session boundary (docs/guard.md's loop: one per task, often of one
span), so the first span of the episode after the loop's, of the instance it follows, numbered 1, in the detector life
the loop follows (`_next_episode`: the same `ctxwatch.contraction.run`), is taken at once when nothing of the loop's
own run is held: an episode starting is expected, not a gap. The next episode's lone first span otherwise (something
of the loop's own run is held, or its detector run is new) is taken once it has waited `wait` seconds with none of
the loop's own spans arriving meanwhile (`LoopOrder.lone`); one numbered further ahead in episodes waits for a
second span of its episode (alone, it would make every genuine span of the episodes it skipped late). The detector
is not reset by an episode: the engine starts it afresh only when a span names another detector life
(`MutationRecord.detector_life`).

A loop's first episode: a new loop starts in episode 0. A first span of a later episode is held aside as a
candidate like any other (the loop is `opening`: it has applied nothing), so the spans of the episodes
before it, still on their way (a parallel flush, a collector's batch), are applied first, and the later
episode follows once two of its spans have come; a lone one is taken for the loop's run once it has waited
`wait` seconds (a monitor started in the middle of a guard's life), the gap before it given up at once.

Guard instances: a span's `ctxwatch.guard.instance.id` names the numbering it belongs to (a guard
process's, or a recorded session's; `ctxwatch.telemetry.sequence`). The loop follows one instance,
the one its first numbered span names. A span of another instance is a restart's candidate, held
aside like a new episode's and confirmed the same way (two spans of it, two distinct sequence numbers,
whatever their episode number or end times; no quiet time is needed, since the sequence numbers of two
instances are never compared); the loop then starts a new run of the detector in the new instance's
sequence space and episode, and every later span of the instance it left (up to `MAX_LEFT_INSTANCES`
of them) is late: a late span of the old process cannot clear its successor's state. One forged span
with a new instance id therefore changes nothing the loop shows, as one forged episode number does
not; two forged spans take the loop over, as two of a new episode do (docs/monitor.md, "Restarts").
Spans without an instance id behave as before instance ids existed (they are one instance).

A restart that sends one span and goes quiet: the lone span of another instance is taken for a restart
once it has waited `wait` seconds with no span of the loop's own run arriving in a later request (in one
request, spans of several processes come in whatever order a collector batched them), provided it opens
its numbering (sequence 1: what a restarted guard sends first; a straggler of an old run is numbered past
it). The loop then starts the new run as for a confirmed restart, but the instance it left stays
*unconfirmed* until the new instance sends a second span: until then a span of the instance left that goes
on past where it stopped gives the loop back to it (a new run following that guard's reported state, the
lone span held aside again as a candidate), while its spans behind that point stay late. So a lone span
shows a real restart within `wait` seconds, and a lone span that was no restart (a straggler of an
instance the loop never followed, or a forged one) holds a quiet loop only until its guard speaks again. A
duplicate of a span the loop applied is no sign of its guard's life (it holds no lone span back), and lone spans
of two instances or more are not taken (which one restarted is not known).

Candidate runs: spans of each (episode, instance) held aside are kept in their own run, the one a span came for
last leading (`LoopOrder.candidate*`), the others set aside (`LoopOrder.rivals`, at most `MAX_RIVALS`), so a span
of a third run makes no candidate lose the spans it sent, whatever order they come in.

What the engine counts: a span held aside (a candidate run's, or far ahead) is `ASIDE`, not `HELD`: it is no
sign of the loop's life and the fleet metrics count it only if and when its run is taken and it is applied.

Jumps: a span numbered more than `window` past the furthest span of the loop's run (applied or held)
is not held as the others are, to be applied once its gap is given up: it would become the loop's
position, and every genuine span after it late. Anyone who knows a loop id can number a span so (a
recorded session's instance is computable, `ctxwatch.telemetry.sequence.recorded_instance`). It is
held aside (`far_ahead`, at most `window` of them: past that the one numbered furthest goes) until a
second span within `window` of it corroborates it (what a sparse head sampler sends next); the two then
join the held spans and are ordered as they are, and one held aside that the run comes within `window`
of joins them too (a flush whose last batch arrives first). So one forged span numbered far ahead
changes nothing the loop shows, as one forged episode number or instance id does not.

A lone span ahead of a gap: one numbered within `window` is held, but a span held ahead of a gap gives the gap up
after `wait` only when it is corroborated by the same rule (another held span within `window` of it:
`Sequencer._corroborating`); a lone one waits `lone_waits` times as long (a setting; what a guard's last span after a
lost batch needs before it is applied: a bounded delay), and it is `ASIDE`, no sign of the loop's life, until then.
The loop's own spans arriving meanwhile are applied in their turn (each one that is restarts that wait). Once a lone
span was applied so (`LoopOrder.jump`), a span of the gap given up for it, arriving before any span after it, takes
the run back to where it stopped: the gap's spans are applied, the lone span's number is passed over when the run
reaches it (that span was applied), and the loop follows the state the guard reports from then on (the lone span fed
the detector out of turn). A span after the lone one confirms it (the guard went on past it). So one forged span ahead
of a gap, of the loop's own instance, makes at most the genuine span of its own number late (what a forged span
numbered next can do anyway), however long the genuine guard is quiet; with a genuine span of its own held ahead of a
gap (the guard's spans delayed or lost) it corroborates that one, and that gap is given up after `wait`, as the
guard's next span would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from json.encoder import encode_basestring
from typing import Any

from ctxwatch import semconv

from .records import AGENT_NAME, MutationRecord

MONITOR = "monitor"   # the loop's state is the monitor's own detector, fed every cycle in order
GUARD = "guard"       # a cycle is missing: the loop follows the state the guard reports
# `LoopOrder.gap` after a session boundary: the episode's last spans had no later span of it to show them missing.
# One span's count differing then (a forgery standing for the next episode's first span, perhaps) is not enough to
# follow the guard: it makes the gap COUNT_DIFFERED, and the next span's differing count turns the loop.
EPISODE_END = "spans at the end of the episode before may be missing"
COUNT_DIFFERED = "the guard's detector cycle count differed from the monitor's on two spans after an episode ended"
EPISODE_CONFIRMATIONS = 2  # spans of a new episode (or guard instance, or a jump) needed before the loop takes it
MAX_RIVALS = 4             # candidate runs (episode, instance) set aside besides the one a span came for last
MAX_LEFT_INSTANCES = 8     # guard instances a loop left whose late spans it still recognises
# what became of an offered span: applied in its turn, held ahead of a missing one of the loop's run, held aside (a
# candidate run's, or far ahead: not the loop's run yet, perhaps never), late
APPLIED, HELD, ASIDE, LATE = "applied", "held", "aside", "late"

# what a held span keeps: enough to apply it later (the fleet metrics count it when it is applied)
_STORED = (semconv.MUTATION_KIND, semconv.DECISION, semconv.HASH_DISTANCE, semconv.LITERALS_BEFORE,
           semconv.LITERALS_LOST, semconv.CONTRACTION_STATE, semconv.EPISODE, semconv.SEQUENCE,
           semconv.CONTRACTION_CYCLE, semconv.LOOP_ID, semconv.SERVICE_NAME, AGENT_NAME, semconv.CONTRACTION_RUN)


_encode = json.JSONEncoder(separators=(",", ":")).encode  # built once: json.dumps with options builds one per call


def _stored(record: MutationRecord) -> list[Any]:
    return [record.kind, record.decision, record.d, record.before, record.lost, record.guard_state, record.episode,
            record.sequence, record.guard_cycle, record.loop_id, record.service, record.agent, record.run,
            record.end_ns]


def _by_sequence(records: Iterable[MutationRecord]) -> dict[int, MutationRecord]:
    """Held spans by their sequence (only numbered spans are ever held)."""
    return {r.sequence: r for r in records if r.sequence is not None}


def _record(stored: list[Any]) -> MutationRecord:
    *values, end_ns = stored
    if len(values) == len(_STORED) - 1:  # stored before detector runs were kept: a guard that sent none
        values.append(None)
    return MutationRecord(dict(zip(_STORED, values, strict=True)), end_ns)


class LoopOrder:
    """Where a loop is in its guard's sequence, the spans held ahead of it, and whose state it shows."""

    __slots__ = ("next", "pending", "since", "candidate", "candidates", "candidate_seen", "previous", "source",
                 "reason", "gap", "seen", "instance", "candidate_instance", "left", "unconfirmed", "far_ahead",
                 "rivals", "jump", "life")

    def __init__(self) -> None:
        self.next = 1                                    # the sequence number expected next in the episode
        self.pending: dict[int, MutationRecord] = {}    # spans of the episode that arrived ahead of it
        self.since: float | None = None                  # when the oldest of them began waiting
        self.candidate: int | None = None                # another episode number seen, not yet confirmed
        self.candidates: dict[int, MutationRecord] = {}
        self.candidate_seen = 0.0                        # when a span of it last arrived
        self.previous: int | None = None                 # the episode the loop left last
        self.source = MONITOR
        self.reason: str | None = None                   # why the loop follows the guard's state
        self.gap: str | None = None                      # the last gap given up in the episode
        self.seen = 0.0                                  # when a span of the episode last arrived
        self.instance: str | None = None                 # the guard instance whose numbering the loop follows
        self.candidate_instance: str | None = None       # ... and the candidate episode's (another: a restart)
        self.left: tuple[str | None, ...] = ()           # the instances the loop left, the last one first
        self.far_ahead: dict[int, MutationRecord] | None = None  # spans of the run numbered past the window, alone
        # after a lone span took the loop over: the instance left, where its numbering stopped, and that lone span
        self.unconfirmed: tuple[str | None, int, MutationRecord] | None = None
        # the other candidate runs held aside, by (episode, instance): when a span of them last came, and their spans
        self.rivals: dict[tuple[int, str | None], tuple[float, dict[int, MutationRecord]]] | None = None
        # after a lone span was applied past a gap given up for it (`LONE_WAITS`): where the run stopped, that span
        self.jump: tuple[int, int] | None = None
        # the guard's detector life the loop's detector follows (`MutationRecord.detector_life`; None: no span yet)
        self.life: list[Any] | None = None

    def groups(self) -> list[tuple[tuple[int, str | None], float, dict[int, MutationRecord]]]:
        """Every candidate run held aside (the lead one and its rivals): its (episode, instance), when a span of it
        last came, its spans."""
        lead = [((self.candidate, self.candidate_instance), self.candidate_seen, self.candidates)] \
            if self.candidate is not None and self.candidates else []
        return lead + [(key, seen, spans) for key, (seen, spans) in (self.rivals or {}).items()]

    @property
    def shown(self) -> tuple[int | None, str | None]:
        """The candidate run the views name (episode, instance): the one with the most spans held, then the
        lowest (episode, instance), so that it does not depend on the order they came in."""
        groups = self.groups()
        if not groups:
            return None, None
        key, _, _ = min(groups, key=lambda g: (-len(g[2]), g[0][0], g[0][1] or ""))
        return key

    @property
    def opening(self) -> bool:
        """Whether the loop has applied nothing and holds nothing of its own run yet: its first numbered spans were
        of a later episode than any it has, so held aside (spans of the episodes before may still come)."""
        return (self.next == 1 and not self.pending and self.previous is None and not self.left
                and self.unconfirmed is None)

    @property
    def lone(self) -> MutationRecord | None:
        """The one span held aside that `Sequencer.expire` takes for the loop's run once it has waited: while the loop
        is `opening`, the one span of its own instance's lowest episode held aside; else the one span of another
        guard instance, when it opens its numbering (sequence 1: what a restarted guard sends first). None when
        more than one instance has sent such a lone span (which one restarted is not known)."""
        groups = self.groups()
        own = [next(iter(spans.values())) for (_, instance), _, spans in groups
               if instance == self.instance and len(spans) == 1 and (self.opening or next(iter(spans)) == 1)]
        if own:  # a later episode's first span (spans of earlier episodes are late): the guard's next task
            return min(own, key=lambda record: record.episode)
        lone = [next(iter(spans.values())) for (_, instance), _, spans in groups
                if instance != self.instance and len(spans) == 1 and next(iter(spans)) == 1]
        return lone[0] if len(lone) == 1 else None

    @property
    def waiting(self) -> bool:
        """Whether spans wait for something `Sequencer.expire` decides in time: a missing one (a gap it gives
        up), or a second span of a restart (a lone span it takes for one)."""
        return bool(self.pending) or self.lone is not None

    @property
    def sequenced(self) -> bool:
        """Whether the loop has had sequenced spans (then spans without a sequence are not applied)."""
        return (self.next > 1 or bool(self.pending or self.candidates or self.left or self.far_ahead or self.rivals)
                or self.previous is not None)

    def to_json(self) -> str:
        """The state as stored with the loop (the common case, nothing held, written without the encoder:
        it is written for every loop a commit touches)."""
        if not (self.pending or self.candidates or self.reason or self.gap or self.since is not None
                or self.candidate is not None or self.left or self.unconfirmed is not None or self.far_ahead
                or self.rivals or self.jump is not None):
            previous = "null" if self.previous is None else int(self.previous)
            instance = "null" if self.instance is None else encode_basestring(self.instance)
            life = "" if self.life is None else f',"life":{_encode(self.life)}'
            return (f'{{"next":{int(self.next)},"seen":{float(self.seen)!r},"previous":{previous},'
                    f'"source":"{self.source}","instance":{instance}{life}}}')
        return _encode({"next": self.next, "since": self.since, "candidate": self.candidate,
                        "previous": self.previous, "source": self.source, "reason": self.reason,
                        "gap": self.gap, "seen": self.seen, "candidate_seen": self.candidate_seen,
                        "instance": self.instance, "candidate_instance": self.candidate_instance,
                        "left": list(self.left),
                        "pending": [_stored(r) for r in self.pending.values()],
                        "candidates": [_stored(r) for r in self.candidates.values()],
                        "far_ahead": [_stored(r) for r in (self.far_ahead or {}).values()],
                        "rivals": [[episode, instance, seen, [_stored(r) for r in spans.values()]]
                                   for (episode, instance), (seen, spans) in (self.rivals or {}).items()],
                        "unconfirmed": None if self.unconfirmed is None else
                        [self.unconfirmed[0], self.unconfirmed[1], _stored(self.unconfirmed[2])],
                        "jump": None if self.jump is None else list(self.jump), "life": self.life})

    @classmethod
    def from_json(cls, text: str | None) -> LoopOrder:
        order = cls()
        if text:
            data = json.loads(text)
            order.next, order.seen = data["next"], data["seen"]
            order.previous, order.source = data["previous"], data["source"]
            order.since, order.candidate = data.get("since"), data.get("candidate")
            order.reason, order.gap = data.get("reason"), data.get("gap")
            order.candidate_seen = data.get("candidate_seen", 0.0)
            order.instance, order.candidate_instance = data.get("instance"), data.get("candidate_instance")
            order.left = tuple(data.get("left", ()))
            order.pending = _by_sequence(map(_record, data.get("pending", ())))
            order.candidates = _by_sequence(map(_record, data.get("candidates", ())))
            order.far_ahead = _by_sequence(map(_record, data.get("far_ahead", ()))) or None
            order.rivals = {(episode, instance): (seen, _by_sequence(map(_record, spans)))
                            for episode, instance, seen, spans in data.get("rivals", ())} or None
            if (unconfirmed := data.get("unconfirmed")) is not None:
                order.unconfirmed = (unconfirmed[0], unconfirmed[1], _record(unconfirmed[2]))
            if (jump := data.get("jump")) is not None:
                order.jump = (jump[0], jump[1])
            order.life = data.get("life")
        return order


Apply = Callable[[Any, MutationRecord, float], None]
NewEpisode = Callable[[Any, int, float], None]


class Sequencer:
    """Feeds a loop's sequenced spans to the engine in sequence order (see the module docstring).

    `apply(loop, record, now)` applies one span; `new_episode(loop, episode, now)` starts the loop's next
    episode; `lone_waits`: how many `wait`s a lone span held ahead of a gap waits for it. Loops are anything
    with `order` (a `LoopOrder`) and `episode` attributes."""

    def __init__(self, window: int, wait: float, apply: Apply, new_episode: NewEpisode, *, lone_waits: int) -> None:
        self.window, self.wait, self.lone_waits = window, wait, lone_waits
        self._apply, self._new_episode = apply, new_episode

    def offer(self, loop: Any, record: MutationRecord, now: float) -> str:
        """Take one span: APPLIED (with those it released), HELD (ahead of a missing one of the loop's run), ASIDE
        (a candidate run's, or far ahead) or LATE (counted by the caller, not applied)."""
        order: LoopOrder = loop.order
        outcome = self._offer(loop, order, record, now)
        if order.unconfirmed is not None and record.instance == order.instance and outcome != LATE:
            self._confirm(order)  # a second span of the instance a lone span brought in: a restart after all
        return outcome

    def _offer(self, loop: Any, order: LoopOrder, record: MutationRecord, now: float) -> str:
        sequence = record.sequence
        if sequence is None:
            raise ValueError("only a numbered span is sequenced (the engine applies the others directly)")
        if record.instance != order.instance:
            if order.sequenced:
                if order.unconfirmed is not None and record.instance == order.unconfirmed[0]:
                    if not 0 <= sequence - order.unconfirmed[1] <= self.window:
                        return LATE  # behind where it stopped, or a jump no span corroborates: no give-back
                    self._resume(loop, record, now)  # it goes on: the lone span was no restart
                elif record.instance in order.left:
                    return LATE
                else:
                    return ASIDE if self._candidate(loop, record, now) else LATE
            else:
                order.instance = record.instance  # the loop's first numbered span names the instance it follows
        if sequence == order.next and record.episode == loop.episode and not (order.pending or order.far_ahead):
            order.next, order.seen = sequence + 1, now
            self._apply(loop, record, now)
            if order.jump is not None:
                _passed(order)
            return APPLIED
        if record.episode != loop.episode:
            if record.episode == order.previous or (record.instance is not None and record.episode < loop.episode):
                return LATE  # the episode left, or one before it of the instance (its episodes are ordered)
            kept = self._candidate(loop, record, now)
            return APPLIED if record.episode == loop.episode else ASIDE if kept else LATE
        if sequence - max(order.next - 1, max(order.pending, default=0)) > self.window:  # no sign of life yet
            return ASIDE if self._far_ahead(loop, record, now) else LATE
        if order.jump is not None:
            if sequence == order.jump[1]:
                return LATE  # the lone span's number: that span was applied
            if order.jump[0] <= sequence < order.jump[1] == order.next - 1:
                self._back(loop, sequence)  # the run goes on from where it stopped: the lone span was taken too soon
        if sequence < order.next or sequence in order.pending:
            return LATE  # a duplicate is no sign of its guard's life (it holds no lone restart span back)
        order.seen = now
        held = sequence != order.next
        order.pending[sequence] = record
        if order.far_ahead:  # what was held aside far ahead and is within the window now is held as the others
            near = {s: r for s, r in order.far_ahead.items() if s <= sequence + self.window}
            order.pending.update({s: r for s, r in near.items() if s >= order.next})  # behind the run: late
            order.far_ahead = {s: r for s, r in order.far_ahead.items() if s not in near} or None
        if order.since is None:
            order.since = now
        self._drain(loop, now)
        while len(order.pending) > self.window:
            self._skip_gap(loop, now, "the reorder window is full")
        if not held:
            return APPLIED
        # a lone span ahead of a gap is no sign of the loop's life yet (a forgery, perhaps), as one far ahead is not
        return HELD if not order.pending or self._corroborated(order.pending) else ASIDE

    def expire(self, loop: Any, now: float) -> bool:
        """Give up the gap a held span has waited `wait` seconds for, and apply what follows it; take a lone
        span that has waited as long, with none of the loop's own in a later request, for the loop's run: the
        first span of a loop's later episode, or a restart's (see the module docstring). Returns whether anything
        was applied."""
        order: LoopOrder = loop.order
        applied = False
        while order.pending and order.since is not None:
            wait, alone = self._gap_wait(order.pending), not self._corroborated(order.pending)
            if now - order.since < wait:
                break
            stopped, before = order.next, order.jump
            self._skip_gap(loop, now, f"not received within {wait:g} s")
            if alone and not order.pending and order.jump is None:  # until the run goes on past it, a span of the
                if before is not None and stopped <= before[1]:      # gap takes it back (`_back`), never behind a
                    stopped = before[1] + 1                          # lone span applied before
                if stopped < order.next - 1:
                    order.jump = (stopped, order.next - 1)
            applied = True
        lone = order.lone
        if lone is not None and lone.instance == order.instance and not order.opening \
                and lone.episode != loop.episode + 1:
            lone = None  # one span numbered episodes ahead waits for a second of its episode: it skips none alone
        if not order.pending and lone is not None:
            _lead(order, (lone.episode, lone.instance), now)
            if now - order.candidate_seen >= self.wait and order.seen <= order.candidate_seen:
                restart = lone.instance != order.instance
                self._switch(loop, now, restart=restart, lone=restart)
                while order.pending:  # an opening span numbered past 1: the spans before it had as long to come
                    self._skip_gap(loop, now, f"not received within {self.wait:g} s")
                applied = True
        return applied

    def _drain(self, loop: Any, now: float) -> None:
        order: LoopOrder = loop.order
        pending, drained = order.pending, False
        while order.next in pending:
            record = pending.pop(order.next)
            order.next += 1
            drained = True
            self._apply(loop, record, now)
            if order.jump is not None:
                _passed(order)
        if not pending:
            order.since = None
        elif drained:  # a new gap: the spans behind it wait from now
            order.since = now

    def _skip_gap(self, loop: Any, now: float, why: str) -> None:
        order: LoopOrder = loop.order
        first = min(order.pending)
        order.gap = f"span(s) {_numbers(order.next, first - 1)} of episode {loop.episode} missing ({why})"
        order.next = first
        self._drain(loop, now)

    def _back(self, loop: Any, sequence: int) -> None:
        """Span `sequence` of the gap given up for a lone span (`LoopOrder.jump`) came: the loop's run goes back to
        where it stopped (the caller holds or applies the span as any), following the state the guard reports from
        now on (the lone span fed the detector out of turn), and passes over the lone span's number when it
        reaches it (`_passed`: that span was applied, and the first copy of a number to arrive is the one applied)."""
        order: LoopOrder = loop.order
        if order.jump is None:
            raise ValueError("no lone span taken to go back from")
        stopped, lone = order.jump
        order.next, order.source = stopped, GUARD  # spans held past the lone one stay held
        order.reason = (f"span {lone} was applied alone once span(s) {_numbers(stopped, lone - 1)} of episode "
                        f"{loop.episode} were given up, then span {sequence} came: the loop follows the state the "
                        f"guard reports")

    def _corroborating(self, spans: Iterable[int], sequence: int) -> list[int]:
        """The other spans of `spans` numbered within `window` of `sequence`: with `EPISODE_CONFIRMATIONS` - 1 of them
        or more, a span numbered past the loop's run is taken for its guard's (far ahead, or ahead of a gap)."""
        return [other for other in spans if other != sequence and abs(sequence - other) <= self.window]

    def _corroborated(self, pending: dict[int, MutationRecord]) -> bool:
        """Whether the first span held ahead of the loop's gap is corroborated (see `_corroborating`)."""
        return len(self._corroborating(pending, min(pending))) + 1 >= EPISODE_CONFIRMATIONS

    def _gap_wait(self, pending: dict[int, MutationRecord]) -> float:
        """How long the spans held ahead of the loop's gap wait for it: `wait`, or `lone_waits` times as long for a
        lone span (one forged span must not give up a gap of genuine spans; see the module docstring)."""
        return self.wait if self._corroborated(pending) else self.wait * self.lone_waits

    def _far_ahead(self, loop: Any, record: MutationRecord, now: float) -> bool:
        """Hold aside a span numbered more than `window` past the run's furthest; with one held aside within `window`
        of it, both join the held spans (see the module docstring). False when it is not kept (a duplicate, or
        the one numbered furthest of `window` + 1 held aside)."""
        order: LoopOrder = loop.order
        sequence, far = record.sequence, order.far_ahead or {}
        if sequence is None or sequence in far:
            return False
        near = self._corroborating(far, sequence)
        if len(near) + 1 < EPISODE_CONFIRMATIONS:
            far[sequence] = record
            if len(far) > self.window:  # bounded: the one numbered furthest goes (a forger's first)
                del far[max(far)]
            order.far_ahead = far
            return sequence in far
        order.pending[sequence] = record
        for other in near:
            order.pending[other] = far.pop(other)
        order.far_ahead = far or None
        if order.since is None:
            order.since = now
        while len(order.pending) > self.window:
            self._skip_gap(loop, now, "the reorder window is full")
        return True

    def _candidate(self, loop: Any, record: MutationRecord, now: float) -> bool:
        order: LoopOrder = loop.order
        if record.sequence is None:
            raise ValueError("only a numbered span is held as a candidate")
        _lead(order, (record.episode, record.instance), now)
        order.candidate_seen = now
        fresh = record.sequence not in order.candidates and len(order.candidates) < self.window
        if fresh:
            order.candidates[record.sequence] = record
        self._maybe_switch(loop, now)
        return fresh

    def _maybe_switch(self, loop: Any, now: float) -> None:
        """Switch the loop to its candidate episode once confirmed (see the module docstring)."""
        order: LoopOrder = loop.order
        if order.candidate is None or (len(order.candidates) < EPISODE_CONFIRMATIONS and not _next_episode(loop)):
            return
        restart = order.candidate_instance != order.instance
        if not restart and order.candidate < loop.episode and order.candidate_seen - order.seen < self.wait:
            return  # they came while the loop's own episode went on: they may be spans of an episode before
        self._switch(loop, now, restart)

    def _switch(self, loop: Any, now: float, restart: bool, lone: bool = False) -> None:
        """Start the loop's candidate episode (a new run of another instance when `restart`; brought in by a
        lone span, the instance left stays unconfirmed)."""
        order: LoopOrder = loop.order
        if order.candidate is None:
            raise ValueError("no candidate episode to switch to")
        while order.pending:  # what the episode left behind is applied before it ends
            self._skip_gap(loop, now, "another guard instance took the loop over" if restart else "its episode ended")
        held, left, old, opening = order.candidates, loop.episode, order.instance, order.opening
        self._new_episode(loop, order.candidate, now)
        if restart:  # every span of the instance left is late from now on: it cannot clear its successor's state
            if order.unconfirmed is not None:
                self._confirm(order)
            if lone:  # ... except, until the new instance sends again, where it goes on past where it stopped
                order.unconfirmed = (order.instance, order.next, next(iter(held.values())))
            else:
                order.left = (order.instance, *order.left)[:MAX_LEFT_INSTANCES]
            order.instance, order.previous = order.candidate_instance, None
        else:
            order.previous = None if opening else left  # an opening loop left no episode: it had none
        order.candidate, order.candidate_instance, order.candidates = None, None, {}
        # the candidate runs of the instance or episode the loop left are over: their spans are late from now on
        order.rivals = {key: value for key, value in (order.rivals or {}).items()
                        if not (key[1] == old if restart else key == (left, old))} or None
        order.next, order.pending, order.since, order.seen, order.far_ahead, order.jump = 1, held, now, now, None, None
        first = held[min(held)] if held else None
        if restart or first is None or list(first.detector_life) != order.life:  # the detector starts afresh
            order.source, order.reason, order.gap = MONITOR, None, None
        elif order.gap is None:  # a session boundary: the detector goes on, and cycles lost before it stay lost
            order.gap = EPISODE_END
        self._drain(loop, now)
        if not restart and order.rivals:  # the instance's episodes are ordered: those before this one are over
            order.rivals = {key: value for key, value in order.rivals.items()
                            if key[1] != order.instance or key[0] > loop.episode} or None
        if order.rivals and (following := (loop.episode + 1, order.instance)) in order.rivals:
            _lead(order, following, now)  # the next episode's spans came meanwhile: it starts now, if it may
            self._maybe_switch(loop, now)

    def _confirm(self, order: LoopOrder) -> None:
        """The restart a lone span brought in stands: the instance it left joins the instances left."""
        if order.unconfirmed is not None:
            order.left = (order.unconfirmed[0], *order.left)[:MAX_LEFT_INSTANCES]
            order.unconfirmed = None

    def _resume(self, loop: Any, record: MutationRecord, now: float) -> None:
        """The instance a lone span took the loop from goes on past where it stopped: the loop goes back to it,
        in a new run that follows that guard's reported state (the monitor's detector of its run was reset),
        and the lone span is held aside again as a candidate."""
        order: LoopOrder = loop.order
        if order.unconfirmed is None:
            raise ValueError("no unconfirmed restart to undo")
        instance, stopped, lone = order.unconfirmed
        brought = order.instance
        while order.pending:
            self._skip_gap(loop, now, f"guard instance {instance} went on")
        self._new_episode(loop, record.episode, now)
        order.unconfirmed, order.instance, order.previous = None, instance, None
        order.next, order.pending, order.since, order.seen = stopped, {}, None, now
        order.far_ahead, order.jump = None, None
        order.source, order.gap = GUARD, None
        order.reason = (f"a lone span of guard instance {brought} was taken for a restart, then instance {instance} "
                        f"went on: the loop follows the state that guard reports")
        _lead(order, (lone.episode, brought), now)
        order.candidates.update(_by_sequence((lone,)))
        order.candidate_seen = now


def _next_episode(loop: Any) -> bool:
    """Whether the loop's lead candidate run is its guard's next episode starting, in the detector life the loop
    follows (a session boundary: `MutationRecord.detector_life` unchanged): its first span, of the instance the
    loop follows, numbered 1 in the episode after the loop's, with nothing of the loop's own run held. That is
    expected, not a gap: it is taken at once, even alone (a loop of one span per task, docs/guard.md).
    An opening loop takes so its guard's first episode after the one it was made in (docs/guard.md's loop
    starts every task, the first one included, with a session boundary) when its detector has seen no cycle yet
    (`ctxwatch.contraction.cycle` 0 in run 0): no span before it could feed the detector."""
    order: LoopOrder = loop.order
    first = order.candidates.get(1)
    if first is None or len(order.candidates) != 1 or order.candidate != loop.episode + 1:
        return False
    if order.candidate_instance != order.instance or order.pending or order.far_ahead:
        return False
    if order.opening and order.life is None:
        return first.guard_cycle == 0 and first.run == 0
    return order.life == list(first.detector_life)


def _numbers(first: int, last: int) -> str:
    """Sequence numbers `first` to `last`, as the views name a gap."""
    return f"{first}" if first == last else f"{first}-{last}"


def _passed(order: LoopOrder) -> None:
    """The run moved: past the lone span it took (`LoopOrder.jump`), the guard went on after it and the jump stands;
    gone back and reaching the lone span's number, the run passes over it (that span was applied)."""
    if order.jump is None:
        return
    stopped, lone = order.jump
    if order.next == lone:
        order.next += 1
        order.jump = None
    elif order.next > lone + 1:
        order.jump = None


def _lead(order: LoopOrder, key: tuple[int, str | None], now: float) -> None:
    """Make the candidate run `key` (episode, instance) the lead one, the one `_maybe_switch` looks at, setting
    the lead one before aside among the rivals (at most `MAX_RIVALS`: past it the one with the fewest spans, then
    the lowest (episode, instance), goes), so that a span of a third run (a forgery, say) makes no candidate run
    lose its spans, whatever order they come in."""
    if (order.candidate, order.candidate_instance) == key:
        return
    rivals = order.rivals or {}
    if order.candidate is not None and order.candidates:
        rivals[(order.candidate, order.candidate_instance)] = (order.candidate_seen, order.candidates)
    seen, spans = rivals.pop(key, (now, {}))
    order.candidate, order.candidate_instance, order.candidates, order.candidate_seen = key[0], key[1], spans, seen
    while len(rivals) > MAX_RIVALS:
        del rivals[min(rivals, key=lambda k: (len(rivals[k][1]), k[0], k[1] or ""))]
    order.rivals = rivals or None
