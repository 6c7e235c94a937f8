"""Group commit: ingest requests that arrive while the state thread is busy share one transaction.

`GroupCommit.submit(*args)` queues a request (on the event loop) and waits for its outcome. One pump
at a time hands everything queued so far to the state thread as a batch: each request is applied on
its own (`apply(*args)`; an exception is that request's outcome only), then `commit(results)`
persists the whole batch in one transaction, and only then are the requests answered. A failed
commit is every applied request's outcome, so no request is acknowledged before its data is on
disk. An exception of a `poison` type means `apply` failed part-way and reset the state to the last
commit: that request fails, and the requests the batch had applied before it are applied again (they
were rolled back with it), so an innocent request sharing the batch is neither failed nor lost, and
memory stays equal to what the commit writes. So `apply` may run more than once for a request: whatever
must happen once per request (decoding it, charging its client's slow-path budget) is done before `submit`.
Batches are bounded by the ingest admission limit,
and under light load a batch is one request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

R = TypeVar("R")
Outcome = tuple[Any, BaseException | None]


class GroupCommit(Generic[R]):
    """Batches `apply` calls on the state thread behind one `commit` each (see the module docstring)."""

    def __init__(self, call: Callable[..., Awaitable[Any]], apply: Callable[..., R],
                 commit: Callable[[list[R]], None], poison: tuple[type[BaseException], ...] = ()) -> None:
        self._call, self._apply, self._commit = call, apply, commit
        self._poison = poison
        self._pending: list[tuple[tuple[Any, ...], asyncio.Future[R]]] = []
        self._pump: asyncio.Task[None] | None = None

    async def submit(self, *args: Any) -> R:
        """Apply and commit one request; returns `apply`'s result once it is committed."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((args, future))
        if self._pump is None:
            self._pump = asyncio.create_task(self._run())
        return await future

    async def _run(self) -> None:
        batch: list[tuple[tuple[Any, ...], asyncio.Future[R]]] = []
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    outcomes = await self._call(self._apply_and_commit, [args for args, _ in batch])
                except Exception as exc:  # the state thread could not run the batch at all
                    outcomes = [(None, exc)] * len(batch)
                for (_, future), (result, error) in zip(batch, outcomes, strict=True):
                    if future.done():  # the request was cancelled (client gone)
                        continue
                    if error is None:
                        future.set_result(result)
                    else:
                        future.set_exception(error)
        finally:
            self._pump = None
            # not answered only when the pump itself was cancelled (shutdown): neither the batch under
            # way nor what queued behind it may wait forever
            leftover, self._pending = self._pending, []
            for _, future in [*batch, *leftover]:
                if not future.done():
                    future.cancel()

    def _apply_and_commit(self, jobs: list[tuple[Any, ...]]) -> list[Outcome]:
        """On the state thread: apply each job, then commit the batch (its failure fails every job)."""
        poisoned: dict[int, BaseException] = {}
        while True:
            outcomes = self._apply_all(jobs, poisoned)
            if outcomes is not None:
                break
        try:
            self._commit([result for result, error in outcomes if error is None])
        except Exception as exc:
            return [(None, error or exc) for _, error in outcomes]
        return outcomes

    def _apply_all(self, jobs: list[tuple[Any, ...]], poisoned: dict[int, BaseException]) -> list[Outcome] | None:
        """Apply every job not poisoned yet; None when one is (noted in `poisoned`): the state was reset to
        the last commit, so the batch must be applied again without it."""
        outcomes: list[Outcome] = []
        for i, args in enumerate(jobs):
            if i in poisoned:
                outcomes.append((None, poisoned[i]))
                continue
            try:
                outcomes.append((self._apply(*args), None))
            except self._poison as exc:
                poisoned[i] = exc
                return None
            except Exception as exc:
                outcomes.append((None, exc))
        return outcomes
