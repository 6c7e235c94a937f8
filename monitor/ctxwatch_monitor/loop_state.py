"""The on-call status of a loop: what is happening to it, from the spans its guard already sends.

A loop's `status` is one of `STATUSES` (docs/monitor.md, "Loop status", has the transition table):

- `halted`: the guard halted a rewrite (`ctxwatch.decision` = halt; the contraction alarm's halt);
  cleared by a later applied rewrite or a new detector run (`ContextGuard.new_episode()`; a session
  boundary's new episode keeps the halt, as the guard does).
- `blocked`: the pass cap refused a rewrite (`pass_cap` among `ctxwatch.violations`), or
  `block_after` refusals in a row named the same invariants; cleared by a later applied rewrite or a
  new episode.
- `contracting`: the contraction detector's state for the loop.
- `refusing`: the guard refused one of the loop's rewrites (it retried and went on) and fewer than
  `refusing_for` rewrites were applied since: the guard is doing its job on a rewriter that is broken.
- `healthy`: none of the above.
- `idle`: no span for `idle_after` seconds (whatever the status was, kept as `before_idle`); the
  next span resumes the loop with the status the spans give.

Per loop it also keeps, with no content (ids, decisions, counts only): counts per invariant and
decision, orphans the applied rewrites left and the refused ones would have left, the last refusal,
when the loop was flagged, halted, blocked, the invariant ids of each history entry, and what its rewrites cost
the provider's prompt cache (`cache`: the span figures of `semconv.CACHE_FIGURES` summed). `OncallState`
is one small object per loop, persisted as JSON (`to_json` / `from_json`).
"""

from __future__ import annotations

import json
from typing import Any

from ctxwatch import semconv
from ctxwatch.report import INVARIANTS

from .records import MutationRecord

HEALTHY, REFUSING, CONTRACTING, BLOCKED, HALTED, IDLE = (
    "healthy", "refusing", "contracting", "blocked", "halted", "idle")
STATUSES: tuple[str, ...] = (HEALTHY, REFUSING, CONTRACTING, BLOCKED, HALTED, IDLE)
ALARMING = frozenset({REFUSING, CONTRACTING, BLOCKED, HALTED})
SEVERITY = {HALTED: 0, BLOCKED: 1, CONTRACTING: 2, REFUSING: 3, IDLE: 4, HEALTHY: 5}  # the alarm list's order
# how strongly a full loop store keeps a loop (`OncallState.keep_rank`): evicted first, a stopped alarm, an active one
CALM_RANK, STOPPED_RANK, ALARM_RANK = 0, 1, 2
# the decisions that refuse a rewrite for good; a deferral is queued, not refused (docs/telemetry.md, "Why defer
# is not an error"): it is counted, but moves no loop out of healthy (CtxwatchDeferredBacklog watches deferrals)
REFUSALS = frozenset({"abort", "halt"})
PASS_CAP = "pass_cap"
_INVARIANT_BITS = {name: 1 << i for i, name in enumerate(INVARIANTS)}
_OTHER_BIT = 1 << len(INVARIANTS)
_compact = json.JSONEncoder(separators=(",", ":")).encode
_INT64_MAX = 2**63 - 1
CACHE_FIELDS = ("invalidated_chars", "invalidated_tokens", "read_tokens", "creation_tokens")  # semconv.CACHE_FIGURES


def invariant_mask(invariants: tuple[str, ...] | list[str]) -> int:
    """The invariant ids as a bit mask (an unknown id is one 'other' bit): what a history entry keeps."""
    mask = 0
    for name in invariants:
        mask |= _INVARIANT_BITS.get(name, _OTHER_BIT)
    return mask


def mask_invariants(mask: int) -> list[str]:
    """The invariant ids of a mask, in the order of `INVARIANTS` (`_OTHER` for unknown ones)."""
    names = [name for name, bit in _INVARIANT_BITS.items() if mask & bit]
    return names + [semconv.OVERFLOW] if mask & _OTHER_BIT else names


class OncallState:
    """What an on-call engineer needs to know about one loop (see the module docstring)."""

    __slots__ = ("status", "before_idle", "counts", "orphans_left", "orphans_refused", "last_refusal",
                 "streak_mask", "streak", "applied_since_refusal", "halted_time", "blocked_time", "blocked_reason",
                 "alarm_end", "masks", "cache")

    def __init__(self) -> None:
        self.status = HEALTHY
        self.before_idle: str | None = None      # the status the loop had when it went idle
        self.counts: dict[str, dict[str, int]] | None = None  # invariant id -> decision -> spans naming it
        self.orphans_left = 0                    # tool parts the applied rewrites left orphaned
        self.orphans_refused = 0                 # ... and that the refused rewrites would have left
        self.last_refusal: dict[str, Any] | None = None
        self.streak_mask, self.streak = 0, 0     # refusals in a row naming the same invariants
        self.applied_since_refusal = 0           # rewrites applied since the last refusal
        self.halted_time: float | None = None
        self.blocked_time: float | None = None
        self.blocked_reason: str | None = None
        self.alarm_end: float | None = None      # when the loop last left an alarming status (resolved or idle)
        self.masks: dict[int, int] | None = None  # history entry number -> invariant mask (non-zero only)
        self.cache: list[int] | None = None      # the cache figures summed, in the order of CACHE_FIELDS
        # (both dicts made on first use: most loops never have a refusal, and a loop stays under 2 KB)

    # --- following the spans ------------------------------------------------------------------------
    def observe(self, record: MutationRecord, at: float, entry: int | None, history: int, block_after: int
                ) -> None:
        """Follow one span applied in the loop's order; `entry` is the number of the history entry it made
        (None for an append, which makes none)."""
        mask = invariant_mask(record.violations)
        if record.violations:
            counts = self.counts = self.counts or {}
            for name in record.violations:
                per_decision = counts.setdefault(semconv.bounded_invariant(name), {})
                per_decision[record.decision] = per_decision.get(record.decision, 0) + 1
        if any(record.cache):
            self.cache = [min(a + b, _INT64_MAX) for a, b in zip(self.cache or (0,) * len(CACHE_FIELDS), record.cache,
                                                                 strict=True)]
        orphans = record.orphans_tool_use + record.orphans_tool_result
        if entry is not None and mask:
            masks = self.masks = self.masks or {}
            masks[entry] = mask
            for old in [n for n in masks if n <= entry - history]:
                del masks[old]
        if record.decision in REFUSALS:
            self.orphans_refused += orphans
            self._refused(record, at, mask, block_after)
        elif record.decision == "patch" and record.kind != "append":
            self.orphans_left += orphans
            self.applied_since_refusal += 1
            self.streak_mask, self.streak = 0, 0
            self.halted_time = self.blocked_time = self.blocked_reason = None  # the guard applies rewrites again

    def _refused(self, record: MutationRecord, at: float, mask: int, block_after: int) -> None:
        self.last_refusal = {
            "time": at, "kind": record.kind, "decision": record.decision, "invariants": list(record.violations),
            "error_type": record.error_type, "pass_number": record.pass_number, "pass_cap": record.pass_cap,
            "orphans_tool_use": record.orphans_tool_use, "orphans_tool_result": record.orphans_tool_result,
            "literals_before": record.before, "literals_lost": record.lost, "sequence": record.sequence,
        }
        self.streak = self.streak + 1 if mask == self.streak_mask else 1
        self.applied_since_refusal = 0
        self.streak_mask = mask
        if record.decision == "halt":
            self.halted_time = self.halted_time or at
        elif self.blocked_time is None:
            if PASS_CAP in record.violations:
                self.blocked_time, self.blocked_reason = at, "the pass cap refused a rewrite"
            elif self.streak >= block_after and mask:
                self.blocked_time = at
                self.blocked_reason = (f"{self.streak} refusals in a row by "
                                       f"{', '.join(mask_invariants(mask))}")

    def new_episode(self) -> None:
        """The guard started a new episode: its pass count is afresh, so a block of the episode before no longer
        holds; a halt does (a session boundary is no fix: the guard's detector and halt go on)."""
        self.streak_mask, self.streak = 0, 0
        self.blocked_time = self.blocked_reason = None

    def new_detector(self) -> None:
        """The guard's detector started afresh (`ContextGuard.new_episode()` after a fix, or a new guard): its
        halt no longer holds."""
        self.halted_time = None

    def status_for(self, contraction_state: str, refusing_for: int) -> str:
        """The status the spans give (never idle): halted > blocked > contracting > refusing > healthy."""
        if self.halted_time is not None:
            return HALTED
        if self.blocked_time is not None:
            return BLOCKED
        if contraction_state == CONTRACTING:
            return CONTRACTING
        if self.last_refusal is not None and self.applied_since_refusal < refusing_for:
            return REFUSING
        return HEALTHY

    def moved_to(self, status: str, at: float) -> None:
        """Note a change of status (the caller adjusts the counts by status)."""
        if self.status in ALARMING and status not in ALARMING:
            self.alarm_end = at
        self.before_idle = self.status if status == IDLE else None
        self.status = status

    def keep_rank(self) -> int:
        """Which loops a full store evicts first (docs/monitor.md, "Eviction"): `ALARM_RANK` (kept longest) for
        an active alarm (a status in `ALARMING`, as `alarm` says), `STOPPED_RANK` for a loop that went idle in
        an alarm (nobody saw it resolve), `CALM_RANK` for the others."""
        if self.status in ALARMING:
            return ALARM_RANK
        return STOPPED_RANK if self.stopped else CALM_RANK

    @property
    def stopped(self) -> bool:
        """Whether the loop went idle in an alarm (nobody saw it resolve), not after it had resolved."""
        return self.status == IDLE and self.before_idle in ALARMING

    def alarm(self, now: float, retention: float) -> str | None:
        """Whether the loop belongs on the alarm list: 'active' (alarming now), 'stopped' (went idle in an
        alarm) or 'resolved' (left the alarm, idle since or not) within `retention` seconds; else None."""
        if self.status in ALARMING:
            return "active"
        if self.alarm_end is None or now - self.alarm_end > retention:
            return None
        return "stopped" if self.stopped else "resolved"

    def cache_costs(self) -> dict[str, int]:
        """The loop's cache figures summed, by name (`CACHE_FIELDS`; all 0 when none was reported)."""
        return dict(zip(CACHE_FIELDS, self.cache or (0,) * len(CACHE_FIELDS), strict=True))

    def invariants_of(self, entry: int) -> list[str]:
        return mask_invariants(self.masks.get(entry, 0)) if self.masks else []

    # --- reading and persistence ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "before_idle": self.before_idle, "counts": self.counts or {},
                "orphans_left": self.orphans_left, "orphans_refused": self.orphans_refused,
                "last_refusal": self.last_refusal, "streak_mask": self.streak_mask, "streak": self.streak,
                "applied_since_refusal": self.applied_since_refusal,
                "halted_time": self.halted_time, "blocked_time": self.blocked_time,
                "blocked_reason": self.blocked_reason, "alarm_end": self.alarm_end,
                "masks": {str(k): v for k, v in (self.masks or {}).items()}, "cache": self.cache}

    def to_json(self) -> str:
        return _compact(self.to_dict())

    @classmethod
    def from_json(cls, text: str | None) -> OncallState:
        """The state persisted by `to_json` (None: a row written before the status existed)."""
        state = cls()
        if text is None:
            return state
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("status") not in STATUSES:
            raise ValueError("column oncall: not an on-call state")
        for name in cls.__slots__:
            if name in data and name not in ("masks", "counts", "cache"):
                setattr(state, name, data[name])
        state.counts = data.get("counts") or None
        state.masks = {int(k): int(v) for k, v in data.get("masks", {}).items()} or None
        cache = data.get("cache")
        if cache is not None:
            if not (isinstance(cache, list) and len(cache) == len(CACHE_FIELDS)
                    and all(type(v) is int and 0 <= v <= _INT64_MAX for v in cache)):
                raise ValueError("column oncall: cache is not a list of 4 token counts")
            state.cache = cache
        return state
