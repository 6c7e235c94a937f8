"""The JSON API: loops (filtered, paged), one loop's cycle history and alarm state, alarms, the fleet.

Every handler reads the state on the engine's thread, so a response is a consistent snapshot.
Response models are pydantic, so FastAPI's OpenAPI schema describes exactly what is served.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, Field

from .auth import BearerAuth
from .engine import Engine
from .loops import LoopState

MAX_PAGE = 1000


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
    candidate_episode: int | None = Field(description="Another episode number seen for this loop, held aside "
                                                      "until a second span of it confirms it.")
    first_seen: float
    last_seen: float


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


class LoopDetail(LoopSummary):
    history: list[CycleEntry]
    detector: dict[str, Any] = Field(description="The shared contraction detector's state (to_dict()).")


class LoopPage(BaseModel):
    total: int
    offset: int
    limit: int
    loops: list[LoopSummary]


class Alarms(BaseModel):
    alarms: list[LoopSummary]


class FleetRow(BaseModel):
    service: str
    agent: str
    state: str
    loops: int


class Fleet(BaseModel):
    loops_tracked: int
    rows: list[FleetRow] = Field(description="Tracked loops by (bounded) service, agent and state.")


def summary(loop: LoopState) -> dict[str, Any]:
    return {"loop_id": loop.loop_id, "service": loop.service, "agent": loop.agent, "state": loop.state,
            "cycles": loop.cycles, "onset": loop.onset, "flagged_cycle": loop.flagged,
            "alarm_time": loop.alarm_time, "guard_state": loop.guard_state, "episode": loop.episode,
            "source": loop.order.source, "source_reason": loop.order.reason, "sequence": loop.order.next - 1,
            "held": len(loop.order.pending), "candidate_episode": loop.order.candidate,
            "first_seen": loop.first_seen, "last_seen": loop.last_seen}


def api_router(engine: Engine, auth: BearerAuth) -> APIRouter:
    router = APIRouter(prefix="/api", tags=["api"], dependencies=[Depends(auth.dependency())])
    store = engine.store

    def page(state: str | None, agent: str | None, service: str | None, offset: int, limit: int) -> dict[str, Any]:
        loops = iter(store.alarms.values()) if state == "contracting" else iter(store)
        if state or agent is not None or service is not None:
            matching = [loop for loop in loops if (state is None or loop.state == state)
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
        return {**summary(loop), "history": [c._asdict() for c in loop.cycles_in_order()],
                "detector": loop.detector.to_dict()}

    def fleet() -> dict[str, Any]:
        rows = [{"service": s, "agent": a, "state": st, "loops": int(n)}
                for (s, a, st), n in engine.instruments.loops.values.items() if n]
        return {"loops_tracked": len(store), "rows": sorted(rows, key=lambda r: (r["agent"], r["service"], r["state"]))}

    @router.get("/loops", response_model=LoopPage, summary="Tracked loops, most recently seen first")
    async def list_loops(state: str | None = Query(None, max_length=64),
                         agent: str | None = Query(None, max_length=256),
                         service: str | None = Query(None, max_length=256),
                         offset: int = Query(0, ge=0, le=10_000_000), limit: int = Query(100, ge=1, le=MAX_PAGE)
                         ) -> dict[str, Any]:
        return await engine.call(page, state, agent, service, offset, limit)

    @router.get("/loops/{loop_id:path}", response_model=LoopDetail, responses={404: {"description": "Unknown loop"}},
                summary="One loop: cycle history (d, r, decision, state) and alarm state")
    async def get_loop(loop_id: str) -> dict[str, Any]:
        found = await engine.call(detail, loop_id)
        if found is None:
            raise HTTPException(404, f"no loop {loop_id[:256]!r} is tracked")
        return found

    @router.get("/alarms", response_model=Alarms, summary="Loops currently in the contraction regime")
    async def alarms() -> dict[str, Any]:
        return await engine.call(lambda: {"alarms": [summary(loop) for loop in store.alarms.values()]})

    @router.get("/fleet", response_model=Fleet, summary="Loop counts by service, agent and state")
    async def get_fleet() -> dict[str, Any]:
        return await engine.call(fleet)

    return router
