"""The monitor with a fault, for test_reapplied_batch.py: applying a span of a loop whose id starts with
`fault-` fails part-way (it stands for a bug in the engine: no span can make it fail, validation rejects bad
ones), so the request is answered 400 and the requests sharing its group commit are applied again. Two routes
let the test line requests up in one batch: `POST /test/hold` keeps the state thread busy until `POST
/test/release`, and `GET /test/queued` says whether a batch is under way (`pumping`: handed to the state thread)
and how many requests wait behind it for the next one (`queued`). They live here, not in the service.

Run as `python tests/monitor/faulty_monitor.py <ctxwatch monitor options>`.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

from fastapi import FastAPI

from ctxwatch_monitor.app import create_app
from ctxwatch_monitor.config import MonitorConfig
from ctxwatch_monitor.records import MutationRecord
from ctxwatch_monitor.server import main

FAULT = "fault-"


def with_fault(config: MonitorConfig) -> FastAPI:
    app = create_app(config)
    engine, batches = app.state.engine, app.state.receiver.batches
    apply_one = engine._apply
    released = threading.Event()
    held: list[asyncio.Future[Any]] = []

    def faulty(record: MutationRecord, now: float) -> Any:
        if record.loop_id.startswith(FAULT):
            raise RuntimeError("a fault planted by the test")
        return apply_one(record, now)

    engine._apply = faulty

    @app.post("/test/hold", include_in_schema=False)
    async def hold() -> dict[str, str]:
        released.clear()
        held.append(asyncio.ensure_future(engine.call(released.wait, 60)))
        return {}

    @app.post("/test/release", include_in_schema=False)
    async def release() -> dict[str, str]:
        released.set()
        await asyncio.gather(*held)
        held.clear()
        return {}

    @app.get("/test/queued", include_in_schema=False)
    async def queued() -> dict[str, int]:
        return {"pumping": int(batches._pump is not None), "queued": len(batches._pending)}

    return app


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], app_factory=with_fault))
