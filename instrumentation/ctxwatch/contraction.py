"""The contraction-regime detector (record 003, DESIGN.md "The contraction regime").

Fed once per applied rewrite cycle t with three figures, measured by `ctxwatch.cycles` (the one
measurement the guard, replay, the monitor's records and the calibration share) — the fingerprint
distance ``d_t`` between consecutive post-rewrite buffers, the number of downstream literals in
the pre-rewrite buffer ``|literals(P_t)|`` and how many of them are absent from Q_t, ``L_t`` — it
computes ``r_t = L_t / |literals(P_t)|`` and the *net distance* ``d'_t`` (`net_distance`: d_t with
the share taken out that the buffer shrinking into a part of itself explains, from the sizes of
Q_{t-1} and Q_t it is fed; d'_t = d_t when the buffer keeps its size, grows or collapses below
`shrink_min` of itself), and calls the cycle *evidence* of contraction when the regime's three
conditions hold:

- the loop is converging: consecutive buffers are alike, ``d'_t ≤ converge_max``; d is not jumping,
  ``d'_t ≤ max(d_{t-w} … d_{t-1}) + rise_max`` (w = `window`, d as measured; never on a first cycle); and there
  is a real trend towards the fixed point: the buffer's content contracting — the downstream
  literals it keeps, ``K_t = |literals(P_t)| − L_t``, at most ``contract_ratio × median(K_{t-w} … K_{t-1})``,
  or a *contracting step*: the rewrite's input is mostly its own previous output,
  ``K_{t-1} ≥ carried_min × |literals(P_t)|``, and both what it keeps and the buffer shrink in the step,
  ``K_t ≤ step_ratio × K_{t-1}`` and ``|Q_t| ≤ step_ratio × |Q_{t-1}|`` — either fall of K counting only
  beyond a count's chance spread, ``m − K_t ≥ contract_noise × √m`` for the halving (m the median) and
  ``m − K_t ≥ step_noise × √m`` for the step (m the smaller of K_{t-1} and the median) — or d
  falling, ``d_t ≤ fall_ratio × mean(d_{t-w} … d_{t-1})``, d as measured on both sides (the first cycle's
  d, P_1 against Q_1, left out)
- cumulative loss is growing:  ``L_t ≥ min_lost`` and ``|literals(P_t)| ≥ min_literals``
- distance below loss rate:    ``d'_t < r_t``

Every condition bounds a distance from above — d'_t for the first, the jump and d' < r, d_t as measured for
d's fall — so one number on the fingerprint's distance scale (d and d' are both angles between fingerprints)
says how far a cycle is from being evidence: its *margin* (`_margin`), the largest amount by which a
condition's distance exceeds its bound: ``max(d'_t − min(converge_max, jump bound, r_t), d_t − fall bound)``,
the second term only when the kept literals do not contract. Below 0 the cycle is evidence; a cycle that
loses nothing, a first cycle, or a second one whose kept literals do not contract is no evidence at any d
(margin None; the calibration prints a first cycle's ``d'_t − min(converge_max, r_t)``, saying how close it would
be). Why the trend: a naive sliding summarizer has a flat d near 0.5 below r and converges on
nothing. Why this trend (review D1): in a real tool loop |Q_t| moves by ±25% from cycle to cycle
(1-3 tool calls a step, results of any length), so neither the size (against the recent largest)
nor the net distance (which dips whenever the buffer shrinks) is a trend; what the buffer keeps of
the literals that matter is not moved by tool output (it holds no downstream literal), and halving
it is what a collapse onto a fixed point does. Why the step (out of sample): an absorbing
rewrite with a mild ratio keeps 60-80% a cycle and never halves K within two cycles, but it re-processes
its own output (K_{t-1} is 70-90% of its input's literals) and shrinks it, a contraction mapping; a
tool loop compacts a buffer mostly new since its last compaction (at most 60% carried), and a sliding
window, which does re-process its own output, keeps its size. Why the chance spread (review F2): tools
whose results do not echo their input ("ok", "[]") leave the tool inputs' SKUs as a loop's only
downstream literals, a fresh handful each cycle (4-21 kept) that halves, or falls from one high cycle,
by chance while d stays near 0.5 (boilerplate results) below r; a collapse onto a fixed point falls
by far more than √K. Why d as measured for its fall: where the buffer shrinks, the net distance is
flat at 0 for every d low enough, so d' ≤ net(bound) held whatever d did. Why the rest: a compaction that
replaces a history by a fresh summary (Claude Code's) has
d 0.83-0.97: consecutive buffers are not alike, whatever it loses, and repeating it changes
nothing about that (the old "within 25% of the recent peak" test let such a flat series count);
a loop converging on a fixed point has consecutive buffers ever more alike while literals keep
going. Compounding compression raises d for a cycle or two after the onset before it falls,
hence a bounded rise rather than a strict fall; and it halves the buffer each cycle, which alone
gives d up to 0.5 with nothing new in Q_t, hence the net distance (docs/alarm.md has the figures).

The state machine has hysteresis both ways: `enter_cycles` evidence cycles with no clear cycle
between them, within `window` cycles of the first, move it from ``healthy`` to ``contracting``
(the onset recorded is the first evidence cycle of that run, and the *level*, the median K of the window
before it, is kept). The run must *compound* (`confirm_noise`): a later evidence cycle counts only when d falls
or it keeps fewer downstream literals than the run's last counted cycle did, by a chance spread (√ of that count),
or at most one is left; a cycle keeping more than that by a spread ends the run (a *rebound*). Why (issue 14, held-out
quiet-tool loops): the kept literals are judged against the window's median, and a dip is judged twice — the cycle
after a dip re-processes the dipped buffer (few literals carried, a few fresh ones), so it keeps few again against
the same pre-dip median: one chance event made two evidence cycles. A loop collapsing onto a fixed point keeps fewer
again at each step (or is at nothing), and never gets its literals back; a tool loop whose fresh literals vary gets
them back within a cycle or two. `exit_cycles` consecutive *clear* cycles move it back, where a clear cycle loses
no literal or changes the buffer clearly more than it loses (``d'_t ≥ r_t + exit_margin``) or, in the
regime, keeps its literals back at their level, ``K_t ≥ max(recover_ratio × level, 1)`` (*recovered*: a
loop at a fixed point keeps ever fewer of the literals that matter; one keeping as many as before it entered
has left it, or never was at one — a lossy tool loop has d' < r on every cycle, so without this a false entry
is for good). A cycle that is neither evidence nor clear neither confirms nor refutes: it holds the entry run
where it is and breaks an exit run.

The detector is pure (figures in, verdict out) and its state is a small JSON-able dict, so the
guard runs it in-process and the monitor rebuilds the very same state from span attributes
(`ctxwatch.hash.distance`, `ctxwatch.literals.before`, `ctxwatch.literals.lost`,
`ctxwatch.size.after`: K_t is before − lost, nothing new on the wire) and persists it.
Defaults and the evidence for them: docs/alarm.md.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Literal

State = Literal["healthy", "contracting"]
STATES: tuple[str, ...] = ("healthy", "contracting")
_STATE_VERSION = 5


@dataclass(frozen=True)
class DetectorConfig:
    """Every threshold of the alarm (defaults calibrated in docs/alarm.md).

    enter_cycles: consecutive evidence cycles that enter ``contracting`` (the design's k).
    exit_cycles: consecutive clear cycles that return to ``healthy``.
    window: how many previous cycles the trend and jump bounds look at.
    converge_max: d'_t above this is no convergence (consecutive buffers are not alike).
    rise_max: d'_t more than this above the window's largest d' is a jump, not convergence (0: never above it).
    fall_ratio: d_t at most this share of the window's mean d (both as measured) is a real downward trend of d.
    contract_ratio: a cycle keeping at most this share of the downstream literals the window's cycles
        kept (their median) is the buffer's content itself contracting.
    carried_min: a cycle re-processes its own previous output when the downstream literals the previous
        cycle kept are at least this share of its input's (``K_{t-1} ≥ carried_min × |literals(P_t)|``).
    step_ratio: such a cycle keeping at most this share of K_{t-1}, its buffer at most this share of
        |Q_{t-1}|, is a contracting step (0 turns the step off).
    contract_noise: the halving of the kept literals counts only when they fell by at least this many times
        the square root of the median: a count's chance spread (review F2: tools whose results do not echo
        their input keep a handful of fresh literals a cycle, and that handful halves by chance). 0: any fall.
    step_noise: the same for a contracting step, against the smaller of K_{t-1} and the median (a step is
        a smaller fall than a halving, so its spread is smaller too; issue 14's slow absorbers).
    shrink_min: a buffer that shrinks to at least this share of the previous post-rewrite size in one
        cycle has the part of d such a pure contraction explains taken out (`net_distance`); one
        that shrinks more is a replacement, not a step towards a fixed point, and keeps its d.
    min_literals: fewest literals in P_t for r_t to count (smaller buffers are never evidence).
    min_lost: fewest literals lost in a cycle for the cumulative loss to count as growing.
    exit_margin: a cycle is clear when it loses nothing or ``d'_t >= r_t + exit_margin``.
    recover_ratio: in the regime a cycle is also clear when it keeps at least this share of the level its kept
        literals had before the entry run (the window's median then; at least one literal).
    confirm_noise: an entry run compounds: after its first evidence cycle, an evidence cycle counts towards entry
        only when d falls (its own, independent trend) or it keeps at least this many chance spreads fewer downstream
        literals than the run's last counted one did (``floor − K_t ≥ confirm_noise × √floor``) or at most one is
        left; a cycle keeping more than
        ``floor + confirm_noise × √floor`` ends the run (a rebound: a dip, not a fixed point). 0: any cycle
        keeping no more confirms, any keeping more ends it.
    """

    enter_cycles: int = 2
    exit_cycles: int = 2
    window: int = 4
    converge_max: float = 0.6
    rise_max: float = 0.1
    fall_ratio: float = 0.6
    contract_ratio: float = 0.5
    carried_min: float = 0.8
    contract_noise: float = 2.5
    step_ratio: float = 0.85
    step_noise: float = 1.5
    recover_ratio: float = 0.75
    confirm_noise: float = 1.0
    shrink_min: float = 0.4
    min_literals: int = 1
    min_lost: int = 1
    exit_margin: float = 0.05

    def __post_init__(self) -> None:
        for name in ("enter_cycles", "exit_cycles", "window", "min_literals", "min_lost"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DetectorConfig.{name} must be an integer >= 1, got {value!r}")
        for name, low, high in (("converge_max", 0.0, 1.0), ("rise_max", 0.0, 1.0),
                                ("fall_ratio", 0.0, 1.0), ("contract_ratio", 0.0, 1.0),
                                ("carried_min", 0.0, 1.0), ("step_ratio", 0.0, 1.0), ("contract_noise", 0.0, 10.0),
                                ("step_noise", 0.0, 10.0), ("recover_ratio", 0.0, 1.0), ("confirm_noise", 0.0, 10.0),
                                ("shrink_min", 0.0, 1.0), ("exit_margin", 0.0, 1.0)):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or not low <= value <= high:
                raise ValueError(f"DetectorConfig.{name} must be a number in [{low}, {high}], got {value!r}")


@dataclass(slots=True)
class CycleVerdict:
    """The detector's judgement of one cycle, with the figures and conditions behind it."""

    cycle: int
    state: State
    d: float
    r: float
    literals_before: int
    literals_lost: int
    shrinking: bool  # condition 1, d converging (the name is kept: replay's JSON reports it as "shrinking")
    losing: bool
    below: bool
    streak: int
    onset: int | None
    entered: bool = False
    left: bool = False
    # how far the cycle is from being evidence, in units of d (`_margin`): the largest amount by which a condition's
    # distance exceeds its bound; None when no d would make it evidence (nothing lost; a first cycle; a second one
    # whose kept literals did not contract: no trend yet)
    margin: float | None = None
    first: bool = False
    size_after: int | None = None
    contracted: bool = False  # the buffer's content contracting: its kept literals halving, or a contracting step
    d_net: float = 0.0  # d with a pure contraction's share taken out (`net_distance`): what the conditions judge
    recovered: bool = False  # in the regime, the kept literals back at the level they fell from (a clear cycle)

    @property
    def evidence(self) -> bool:
        """All three conditions of the contraction regime hold on this cycle."""
        return self.shrinking and self.losing and self.below

    def explain(self) -> str:
        """One line: the state, the figures and which conditions held."""
        checks = (("d converging", self.shrinking), ("literals lost", self.losing), ("d<r", self.below))
        conds = ", ".join(f"{name}={'yes' if held else 'no'}" for name, held in checks)
        change = " (entered)" if self.entered else " (left)" if self.left else ""
        onset = f", onset cycle {self.onset}" if self.onset is not None else ""
        net = f" (net {self.d_net:.3f})" if self.d_net != self.d else ""
        return (f"cycle {self.cycle}: {self.state}{change}{onset}; d={self.d:.3f}{net} r={self.r:.3f} "
                f"({self.literals_lost}/{self.literals_before} literals lost); {conds}; streak {self.streak}")


@dataclass(slots=True)
class _State:
    state: State = "healthy"
    cycle: int = 0
    streak: int = 0
    onset: int | None = None
    recent: tuple[float, ...] = ()  # d of the recent cycles as measured (the jump and trend bounds)
    lost_total: int = 0
    run_start: int | None = None  # first evidence cycle of the entry run under way
    sizes: tuple[int, ...] = ()  # the last post-rewrite size fed, if any (for the net distance)
    kept: tuple[int, ...] = ()  # downstream literals each recent cycle kept (literals before - lost)
    level: float | None = None  # median K before the entry run began (kept through the regime): recovery's level
    floor: int | None = None  # K of the entry run's last counted evidence cycle: what its next one must fall below


class ContractionDetector:
    """The per-loop state machine healthy <-> contracting. Feed it one cycle at a time."""

    __slots__ = ("config", "_s")

    def __init__(self, config: DetectorConfig | None = None) -> None:
        self.config = config or DetectorConfig()
        self._s = _State()

    @property
    def state(self) -> State:
        return self._s.state

    @property
    def cycle(self) -> int:
        """Number of cycles seen so far."""
        return self._s.cycle

    @property
    def onset(self) -> int | None:
        """First cycle of the evidence run that entered the current contracting episode."""
        return self._s.onset

    @property
    def lost_total(self) -> int:
        """Cumulative literal loss over every cycle seen."""
        return self._s.lost_total

    def update(self, d: float, literals_before: int, literals_lost: int,
               size_after: int | None = None) -> CycleVerdict:
        """Judge the next cycle and advance the state. `size_after` is the size of Q_t (the span's
        ``ctxwatch.size.after``); without it d is judged as measured (no net distance)."""
        self._s, verdict = self._step(d, literals_before, literals_lost, size_after)
        return verdict

    def preview(self, d: float, literals_before: int, literals_lost: int,
                size_after: int | None = None) -> CycleVerdict:
        """What `update` would return, without advancing the state (for a rewrite not yet applied)."""
        return self._step(d, literals_before, literals_lost, size_after)[1]

    def _step(self, d: float, literals_before: int, literals_lost: int,
              size_after: int | None) -> tuple[_State, CycleVerdict]:
        _check_figures(d, literals_before, literals_lost)
        if size_after is not None and (isinstance(size_after, bool) or not isinstance(size_after, int)
                                       or size_after < 0):
            raise ValueError(f"size_after must be an integer >= 0 or None, got {size_after!r}")
        cfg, s = self.config, self._s
        r = literals_lost / literals_before if literals_before else 0.0
        previous_size = s.sizes[-1] if s.sizes else None
        net = net_distance(d, size_after, previous_size, cfg.shrink_min)
        jump_bound = max(s.recent) + cfg.rise_max if s.recent else math.inf
        kept = literals_before - literals_lost
        contracted = _content_contracting(cfg, s, kept, literals_before, size_after, previous_size)
        # a trend: the literals the buffer keeps contracting, or d well below its recent mean (a flat d is no
        # trend), d as measured: a shrinking buffer's net distance dips with its size, whatever it holds. The
        # first cycle's d compares P_1 with Q_1, not two post-rewrite buffers, so it is no point of the trend.
        trend = s.recent[1:] if s.cycle == len(s.recent) else s.recent
        fall_bound = cfg.fall_ratio * sum(trend) / len(trend) if trend else None  # on d as measured
        # d falling is judged on d as measured: the net distance is flat at 0 wherever the buffer shrinks enough
        # for cos(pi d / 2) / sqrt(s) to reach 1, and there the bound's net value is 0 too, whatever d does
        falling = fall_bound is not None and d <= fall_bound
        shrinking = bool(s.recent) and net <= min(cfg.converge_max, jump_bound) and (contracted or falling)
        losing = literals_lost >= cfg.min_lost and literals_before >= cfg.min_literals
        below = net < r
        evidence = shrinking and losing and below
        margin = _margin(net, d, min(cfg.converge_max, jump_bound, r), None if contracted else fall_bound,
                         losing and bool(s.recent) and (contracted or fall_bound is not None))
        # a loop in the regime whose kept literals are back at the level they fell from has left the fixed point
        # (or never was at one): a lossy tool loop has d' < r on every cycle, so without this no cycle is clear
        recovered = s.state == "contracting" and s.level is not None and kept >= max(cfg.recover_ratio * s.level, 1)
        clear = literals_lost == 0 or net >= r + cfg.exit_margin or recovered
        cycle = s.cycle + 1
        state, streak, onset, run_start, level, floor = s.state, s.streak, s.onset, s.run_start, s.level, s.floor
        entered = left = False
        if state == "healthy":
            # an entry run lasts `window` cycles (lone dips never add up), and a rebound of the kept literals ends it
            if run_start is not None and (cycle - run_start >= cfg.window
                                          or (floor is not None and _rebounds(floor, kept, cfg.confirm_noise))):
                streak, run_start, level, floor = 0, None, None, None
            if evidence and (floor is None or falling or _compounds(floor, kept, cfg.confirm_noise)):
                if run_start is None:  # the level the kept literals had before the run: what recovery returns to
                    level = statistics.median(s.kept) if s.kept else None
                streak, run_start, floor = streak + 1, run_start or cycle, kept
            elif clear:
                streak, run_start, level, floor = 0, None, None, None
            if streak >= cfg.enter_cycles:
                state, entered, onset, streak, run_start, floor = "contracting", True, run_start, 0, None, None
        else:
            streak = streak + 1 if clear else 0
            if streak >= cfg.exit_cycles:
                state, left, streak, level = "healthy", True, 0, None
        sizes = s.sizes if size_after is None else (size_after,)
        new = _State(state, cycle, streak, onset, (*s.recent, d)[-cfg.window:], s.lost_total + literals_lost,
                     run_start, sizes, (*s.kept, kept)[-cfg.window:], level, floor)
        verdict = CycleVerdict(cycle, state, d, r, literals_before, literals_lost, shrinking, losing, below,
                               streak, onset, entered, left, margin, not s.recent, size_after, contracted,
                               net, recovered)
        return new, verdict

    # --- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The state as a small JSON-able dict (the configuration is not included)."""
        s = self._s
        return {"v": _STATE_VERSION, "state": s.state, "cycle": s.cycle, "streak": s.streak, "onset": s.onset,
                "recent": list(s.recent), "lost_total": s.lost_total, "run_start": s.run_start,
                "sizes": list(s.sizes), "kept": list(s.kept), "level": s.level, "floor": s.floor}

    @classmethod
    def from_dict(cls, data: dict[str, Any], config: DetectorConfig | None = None) -> ContractionDetector:
        """Rebuild a detector from `to_dict` output; a malformed dict raises ValueError naming the field."""
        if not isinstance(data, dict):
            raise ValueError(f"detector state must be a dict, got {type(data).__name__}")
        if data.get("v") not in (1, 2, 3, 4, _STATE_VERSION):
            raise ValueError(f"detector state field 'v': unsupported version {data.get('v')!r}")
        det = cls(config)
        state = data.get("state")
        if state not in STATES:
            raise ValueError(f"detector state field 'state': expected one of {STATES}, got {state!r}")
        ints = {}
        for name in ("cycle", "streak", "lost_total"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"detector state field {name!r}: expected an integer >= 0, got {value!r}")
            ints[name] = value
        onset, run_start = data.get("onset"), data.get("run_start")
        floor = data.get("floor")  # absent before version 5: a run under way then confirms on any evidence cycle
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, int) or floor < 0):
            raise ValueError(f"detector state field 'floor': expected null or an integer >= 0, got {floor!r}")
        for name, value in (("onset", onset), ("run_start", run_start)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"detector state field {name!r}: expected null or an integer >= 1, got {value!r}")
        if data["v"] == 1 and ints["streak"] and state == "healthy":  # version 1 kept only strict runs
            run_start = ints["cycle"] - ints["streak"] + 1
        recent = data.get("recent")
        if not isinstance(recent, list) or not all(_is_distance(x) for x in recent):
            raise ValueError(f"detector state field 'recent': expected a list of distances in [0, 1], "
                             f"got {recent!r}")
        sizes = data.get("sizes", [])  # absent from states persisted before sizes were fed
        counts = data.get("kept", [])  # absent before version 3: no trend of kept literals yet
        for name, values in (("sizes", sizes), ("kept", counts)):
            if not isinstance(values, list) or not all(not isinstance(x, bool) and isinstance(x, int) and x >= 0
                                                       for x in values):
                raise ValueError(f"detector state field {name!r}: expected a list of integers >= 0, got {values!r}")
        level = data.get("level")  # absent before version 4: a regime entered then has no level to recover to
        if level is not None and (isinstance(level, bool) or not isinstance(level, int | float)
                                  or not math.isfinite(level) or level < 0):
            raise ValueError(f"detector state field 'level': expected null or a number >= 0, got {level!r}")
        window = det.config.window
        # version 2 kept d' in `recent` (d where the buffer did not shrink): read as d, a little stricter
        det._s = _State(state, ints["cycle"], ints["streak"], onset, tuple(float(x) for x in recent[-window:]),
                        ints["lost_total"], run_start, tuple(sizes[-1:]), tuple(counts[-window:]), level,
                        floor if run_start is not None else None)
        return det

    def __repr__(self) -> str:
        return f"ContractionDetector(state={self.state!r}, cycle={self.cycle}, onset={self.onset})"


def net_distance(d: float, size_after: int | None, size_before: int | None, shrink_min: float) -> float:
    """d_t with the share a pure contraction explains taken out, on d's own scale.

    d is the angle between the fingerprints of Q_{t-1} and Q_t, ``cos(π·d/2)`` their cosine. If Q_t
    were a part of Q_{t-1} holding a share s = |Q_t| / |Q_{t-1}| of it, that cosine would be about
    ``√s`` (a fingerprint's squared norm grows with its features, and a part shares all of its own),
    so ``cos(π·d/2) / √s`` estimates how much of Q_t is drawn from Q_{t-1}: 1 for a part, ~0 for new
    text. The net distance is that estimate turned back into an angle. A buffer that keeps its size
    or grows (s ≥ 1), or whose sizes are unknown, keeps its d; so does one shrinking below
    `shrink_min` in one cycle (a replacement: the estimate cannot tell a part from new text there)."""
    if size_after is None or not size_before or not shrink_min * size_before <= size_after < size_before:
        return d
    drawn = math.cos(math.pi * d / 2) / math.sqrt(size_after / size_before)
    return 2 * math.acos(min(1.0, drawn)) / math.pi


def _content_contracting(cfg: DetectorConfig, s: _State, kept: int, literals_before: int,
                         size_after: int | None, previous_size: int | None) -> bool:
    """Condition 1's content trend: the downstream literals the buffer keeps at most `contract_ratio` of
    their recent median, or a contracting step — the rewrite re-processed mostly its own previous output
    (K_{t-1} at least `carried_min` of the downstream literals it was given) and shrank both what it keeps
    and the buffer to at most `step_ratio` of the previous cycle's."""
    if not s.kept:
        return False
    median = statistics.median(s.kept)
    if kept <= cfg.contract_ratio * median and _beyond_noise(median, kept, cfg.contract_noise):
        return True
    carried = s.kept[-1]
    return (literals_before > 0 and carried >= cfg.carried_min * literals_before
            and kept <= cfg.step_ratio * carried and _beyond_noise(min(carried, median), kept, cfg.step_noise)
            and size_after is not None and previous_size is not None and size_after <= cfg.step_ratio * previous_size)


def _margin(net: float, d: float, alike_bound: float, fall_bound: float | None, judged: bool) -> float | None:
    """How far a cycle is from being evidence, on the fingerprint's distance scale: the largest amount by which
    a condition's distance exceeds its bound — d'_t over ``min(converge_max, jump bound, r_t)`` (the conditions
    judged on the net distance) and, when the kept literals do not contract, d_t over the fall's bound (judged on
    d as measured). Below 0 the cycle is evidence (by that much); None when no d would make it so (`judged`)."""
    if not judged:
        return None
    return net - alike_bound if fall_bound is None else max(net - alike_bound, d - fall_bound)


def _compounds(floor: int, kept: int, spreads: float) -> bool:
    """Whether a later evidence cycle of an entry run confirms it: it keeps fewer downstream literals than the run's
    last counted cycle (`floor`) by `spreads` chance spreads, or at most one is left (a count that small cannot
    fall beyond its spread any more: the loop keeps next to nothing, a fixed point)."""
    return kept <= 1 or _beyond_noise(floor, kept, spreads)


def _rebounds(floor: int, kept: int, spreads: float) -> bool:
    """Whether a cycle of an entry run keeps more than `floor` by more than `spreads` chance spreads: the kept
    literals came back (a dip of a loop whose fresh literals vary, not a step towards a fixed point)."""
    return kept - floor > spreads * math.sqrt(floor)


def _beyond_noise(reference: float, kept: int, spreads: float) -> bool:
    """Whether the kept literals fell below `reference` by more than `spreads` times a count's own chance
    spread: ``reference − K_t ≥ spreads × √reference`` (a count of about m moves by ±√m from cycle to
    cycle by chance alone: a tool loop keeping a dozen fresh literals keeps 4 now and then)."""
    return reference - kept >= spreads * math.sqrt(reference)


def _is_distance(x: object) -> bool:
    return not isinstance(x, bool) and isinstance(x, int | float) and math.isfinite(x) and 0.0 <= x <= 1.0


def _check_figures(d: float, literals_before: int, literals_lost: int) -> None:
    if (type(d) is float and 0.0 <= d <= 1.0 and type(literals_before) is int and type(literals_lost) is int
            and 0 <= literals_lost <= literals_before):
        return  # the common case, decided without the checks below (which accept it too)
    if not _is_distance(d):
        raise ValueError(f"hash distance must be a finite number in [0, 1], got {d!r}")
    for name, value in (("literals_before", literals_before), ("literals_lost", literals_lost)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if literals_lost > literals_before:
        raise ValueError(f"literals_lost ({literals_lost}) exceeds literals_before ({literals_before})")

