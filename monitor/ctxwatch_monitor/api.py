"""The JSON API: loops (filtered, paged), one loop's cycle history and alarm state, alarms, the fleet.

Every handler reads the state on the engine's thread, so a response is a consistent snapshot.
Response models are pydantic, so FastAPI's OpenAPI schema describes exactly what is served.
"""

from __future__ import annotations

import time
from itertools import islice
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, Field

from .auth import BearerAuth
from .engine import Engine
from .loop_state import SEVERITY, STATUSES
from .loops import ENTRY_SIZE, LoopState

MAX_PAGE = 1000
STATUS_FILTER = "Only loops with this on-call status."
ALARM_ORDER = {"active": 0, "stopped": 1, "resolved": 2}
Status = Literal[STATUSES]  # type: ignore[valid-type]  # the tuple's values, checked by FastAPI (422)
STATUS_QUERY = Query(None, description=STATUS_FILTER)


class Refusal(BaseModel):
    time: float
    kind: str
    decision: str
    invariants: list[str] = Field(description="ctxwatch.violations of the refused span.")
    error_type: str | None = Field(description="The class the guard raised (error.type).")
    pass_number: int | None
    pass_cap: int | None
    orphans_tool_use: int
    orphans_tool_result: int
    literals_before: int
    literals_lost: int
    sequence: int | None


class CacheCosts(BaseModel):
    invalidated_chars: int = Field(description="Consumed characters the applied rewrites invalidated "
                                               "(ctxwatch.cache.invalidated.chars).")
    invalidated_tokens: int = Field(description="The same in estimated tokens (ctxwatch.cache.invalidated.tokens).")
    read_tokens: int = Field(description="Tokens the provider served from its cache (ctxwatch.cache.read.tokens).")
    creation_tokens: int = Field(description="Tokens the provider wrote to its cache "
                                             "(ctxwatch.cache.creation.tokens).")


class LoopSummary(BaseModel):
    loop_id: str
    service: str
    agent: str
    state: str = Field(description="The monitor's contraction detector state for this loop.")
    cycles: int = Field(description="Applied rewrite cycles fed to the detector.")
    onset: int | None = Field(description="The detector's onset cycle of the current or last contraction.")
    flagged_cycle: int | None = Field(description="The cycle at which the loop was last flagged contracting.")
    alarm_time: float | None = Field(description="When it was flagged (span end time, unix seconds).")
    guard_state: str | None = Field(description="The contraction state the guard itself last reported.")
    episode: int = Field(description="The guard's episode (ContextGuard.new_episode) the detector follows; "
                                     "a new one starts the detector afresh.")
    source: str = Field(description="Whose state `state` is: monitor (its own detector, fed every cycle in the "
                                    "guard's order) or guard (a cycle is missing, so the loop shows the state "
                                    "the guard reports, ctxwatch.contraction.state, until the next episode).")
    source_reason: str | None = Field(description="Why the loop follows the guard's state (null for monitor).")
    sequence: int = Field(description="The last ctxwatch.sequence applied in the episode (0: none yet).")
    held: int = Field(description="Spans that arrived ahead of a missing one, waiting for it (order_wait).")
    far_ahead: int = Field(description="Spans numbered more than order_window past the loop's furthest, held aside "
                                       "until a second span near them corroborates them (one alone is never applied).")
    candidate_episode: int | None = Field(description="Another episode number seen for this loop, held aside "
                                                      "until a second span of it confirms it.")
    instance: str | None = Field(description="The guard instance (ctxwatch.guard.instance.id) whose spans the loop "
                                             "follows; null for guards that send none.")
    candidate_instance: str | None = Field(description="Another guard instance seen for this loop (a restarted "
                                                       "process), held aside until a second span of it confirms it, "
                                                       "or, when its one span opens its numbering, until it has "
                                                       "waited order_wait with none of the loop's own meanwhile.")
    unconfirmed_from: str | None = Field(description="The instance the loop followed before a lone span of "
                                                     "`instance` took it over; until `instance` sends again, a span "
                                                     "of it numbered past where it stopped gives the loop back to it.")
    status: str = Field(description="On-call status: healthy, refusing, contracting, blocked, halted or idle "
                                    "(docs/monitor.md, \"Loop status\").")
    before_idle: str | None = Field(description="The status the loop had when it went idle (null unless idle).")
    halted_time: float | None = Field(description="When the guard halted it (first halt since the last applied "
                                                  "rewrite or episode; unix seconds).")
    blocked_time: float | None = Field(description="When it became blocked (same rule).")
    blocked_reason: str | None = Field(description="Why it is blocked: the pass cap, or refusals in a row by the "
                                                   "same invariants.")
    last_refusal: Refusal | None = Field(description="The last refused or halted mutation (ids and counts only).")
    cache: CacheCosts = Field(description="What the loop's rewrites cost the provider's prompt cache, and what the "
                                          "providers report of it (span figures summed; docs/telemetry.md, \"What "
                                          "rewrites cost\").")
    first_seen: float
    last_seen: float


class Counts(BaseModel):
    by_invariant: dict[str, dict[str, int]] = Field(description="Spans naming each invariant among "
                                                                "ctxwatch.violations, by decision.")
    orphans_left: int = Field(description="Tool parts the applied rewrites left orphaned.")
    orphans_refused: int = Field(description="Tool parts the refused rewrites would have left orphaned.")


class CycleEntry(BaseModel):
    time: float
    kind: str
    decision: str
    d: float | None = Field(description="Hash distance d_t (absent when the guard did not compute it).")
    r: float | None = Field(description="Literal-loss rate r_t = lost / literals before.")
    literals_before: int
    literals_lost: int
    cycle: int | None = Field(description="Detector cycle, for the cycles fed to the detector.")
    state: str = Field(description="Detector state after this entry.")
    invariants: list[str] = Field(description="Invariant ids that refused or halted this entry.")


class LoopDetail(LoopSummary):
    counts: Counts
    history: list[CycleEntry]
    detector: dict[str, Any] = Field(description="The shared contraction detector's state (to_dict()).")


class LoopPage(BaseModel):
    total: int
    offset: int
    limit: int
    loops: list[LoopSummary]


class Alarm(LoopSummary):
    alarm: str = Field(description="active (alarming now), stopped (went idle in an alarm) or resolved "
                                   "(left the alarm), the last two for alarm_retention seconds.")


class Alarms(BaseModel):
    retention: float = Field(description="Seconds a stopped or resolved alarm stays listed (alarm_retention).")
    alarms: list[Alarm] = Field(description="Active alarms first, then stopped and resolved ones; within each "
                                            "by severity (halted, blocked, contracting, refusing), then most "
                                            "recently seen first.")


class FleetRow(BaseModel):
    service: str
    agent: str
    state: str
    loops: int


class FleetStatusRow(BaseModel):
    service: str
    agent: str
    status: str
    loops: int


class Fleet(BaseModel):
    loops_tracked: int
    rows: list[FleetRow] = Field(description="Tracked loops by (bounded) service, agent and state.")
    status_rows: list[FleetStatusRow] = Field(description="Tracked loops by (bounded) service, agent and on-call "
                                                          "status (ctxwatch_loops_by_status).")


def summary(loop: LoopState) -> dict[str, Any]:
    oncall = loop.oncall
    return {"loop_id": loop.loop_id, "service": loop.service, "agent": loop.agent, "state": loop.state,
            "cycles": loop.cycles, "onset": loop.onset, "flagged_cycle": loop.flagged,
            "alarm_time": loop.alarm_time, "guard_state": loop.guard_state, "episode": loop.episode,
            "source": loop.order.source, "source_reason": loop.order.reason, "sequence": loop.order.next - 1,
            "held": len(loop.order.pending), "far_ahead": len(loop.order.far_ahead or ()),
            "candidate_episode": loop.order.shown[0],
            "instance": loop.order.instance, "candidate_instance": loop.order.shown[1],
            "unconfirmed_from": None if loop.order.unconfirmed is None else loop.order.unconfirmed[0],
            "status": oncall.status, "before_idle": oncall.before_idle, "halted_time": oncall.halted_time,
            "blocked_time": oncall.blocked_time, "blocked_reason": oncall.blocked_reason,
            "last_refusal": oncall.last_refusal, "cache": oncall.cache_costs(), "first_seen": loop.first_seen,
            "last_seen": loop.last_seen}


def api_router(engine: Engine, auth: BearerAuth) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["api"], dependencies=[Depends(auth.dependency())])
    store = engine.store

    def page(state: str | None, status: str | None, agent: str | None, service: str | None, offset: int,
             limit: int) -> dict[str, Any]:
        loops = iter(store)
        if state or status or agent is not None or service is not None:
            matching = [loop for loop in loops if (state is None or loop.state == state)
                        and (status is None or loop.oncall.status == status)
                        and (agent is None or loop.agent == agent) and (service is None or loop.service == service)]
            total, loops = len(matching), iter(matching)
        else:
            total = len(store)
        return {"total": total, "offset": offset, "limit": limit,
                "loops": [summary(loop) for loop in islice(loops, offset, offset + limit)]}

    def detail(loop_id: str) -> dict[str, Any] | None:
        loop = store.get(loop_id)
        if loop is None:
            return None
        oncall = loop.oncall
        first = loop.entries - len(loop.history) // ENTRY_SIZE
        history = [{**c._asdict(), "invariants": oncall.invariants_of(first + i)}
                   for i, c in enumerate(loop.cycles_in_order())]
        counts = {"by_invariant": oncall.counts or {}, "orphans_left": oncall.orphans_left,
                  "orphans_refused": oncall.orphans_refused}
        return {**summary(loop), "counts": counts, "history": history,
                "detector": loop.detector.to_dict()}

    def fleet() -> dict[str, Any]:
        rows = [{"service": s, "agent": a, "state": st, "loops": int(n)}
                for (s, a, st), n in engine.instruments.loops.values.items() if n]
        by_status = [{"service": s, "agent": a, "status": st, "loops": int(n)}
                     for (s, a, st), n in engine.instruments.loop_status.values.items() if n]
        return {"loops_tracked": len(store), "rows": sorted(rows, key=lambda r: (r["agent"], r["service"], r["state"])),
                "status_rows": sorted(by_status, key=lambda r: (r["agent"], r["service"], r["status"]))}

    @router.get("/loops", response_model=LoopPage, summary="Tracked loops, most recently seen first")
    async def list_loops(state: str | None = Query(None, max_length=64),
                         agent: str | None = Query(None, max_length=256),
                         service: str | None = Query(None, max_length=256),
                         status: Status | None = STATUS_QUERY,
                         offset: int = Query(0, ge=0, le=10_000_000), limit: int = Query(100, ge=1, le=MAX_PAGE)
                         ) -> dict[str, Any]:
        return await engine.call(page, state, status, agent, service, offset, limit)

    @router.get("/loops/{loop_id:path}", response_model=LoopDetail, responses={404: {"description": "Unknown loop"}},
                summary="One loop: cycle history (d, r, decision, state) and alarm state")
    async def get_loop(loop_id: str) -> dict[str, Any]:
        found = await engine.call(detail, loop_id)
        if found is None:
            raise HTTPException(404, f"no loop {loop_id[:256]!r} is tracked")
        return found

    def alarm_list(status: str | None, agent: str | None, service: str | None) -> dict[str, Any]:
        retention = engine.config.alarm_retention
        board = [(alarm, loop) for alarm, loop in store.on_alarm_board(time.time(), retention)
                 if (status is None or loop.oncall.status == status)
                 and (agent is None or loop.agent == agent) and (service is None or loop.service == service)]
        board.sort(key=lambda item: (ALARM_ORDER[item[0]], SEVERITY[item[1].oncall.status], -item[1].last_seen))
        return {"retention": retention, "alarms": [{**summary(loop), "alarm": alarm} for alarm, loop in board]}

    @router.get("/alarms", response_model=Alarms,
                summary="Loops alarming now (contracting, blocked, halted), then recently stopped or resolved ones")
    async def alarms(status: Status | None = STATUS_QUERY,
                     agent: str | None = Query(None, max_length=256),
                     service: str | None = Query(None, max_length=256)) -> dict[str, Any]:
        return await engine.call(alarm_list, status, agent, service)

    @router.get("/fleet", response_model=Fleet, summary="Loop counts by service, agent and state")
    async def get_fleet() -> dict[str, Any]:
        return await engine.call(fleet)

    return router
