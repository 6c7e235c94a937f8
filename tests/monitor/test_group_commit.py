"""Group commit on the monitor's state thread (issue 5, "Persistence": commit before answering).

Requests that queue while the state thread is busy are applied one by one and committed together;
none is answered before the commit of its batch returns, a request whose apply fails fails alone
(also when it reset the state part-way: the batch is applied again without it), and a failed commit
fails every request of its batch (the engine has then reloaded the last committed state, so those
requests are answered 503 and retried). Driven on a real single-thread
executor, as the engine runs it.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ctxwatch_monitor.batches import GroupCommit


class Reset(RuntimeError):
    """Stands for the engine's StateReset: the state was reloaded part-way through an apply."""


class StateThread:
    """A single-worker executor like the engine's, recording applies and commits in order."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1)
        self.events: list[tuple[str, Any]] = []
        self.release = threading.Event()
        self.fail_commit = False

    async def call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    def apply(self, name: str) -> str:
        if name == "first":
            self.release.wait(10)  # keeps the state thread busy while the others queue
        if name == "bad":
            raise ValueError("undecodable")
        if name == "reset":
            raise Reset("half applied; memory reloaded")
        self.events.append(("apply", name))
        return name.upper()

    def commit(self, results: list[str]) -> None:
        if self.fail_commit:
            raise RuntimeError("disk full")
        self.events.append(("commit", tuple(results)))


async def queue_behind_first(state: StateThread, batches: GroupCommit[str], names: tuple[str, ...]) -> Any:
    """Submit "first" (it holds the state thread), queue `names` behind it, then let it go."""
    first = asyncio.create_task(batches.submit("first"))
    await asyncio.sleep(0.05)
    queued = [asyncio.create_task(batches.submit(n)) for n in names]
    await asyncio.sleep(0.05)
    state.release.set()
    return first, queued


def run(scenario: Any) -> Any:
    state = StateThread()
    try:
        batches = GroupCommit(state.call, state.apply, state.commit, poison=(Reset,))
        return asyncio.run(scenario(state, batches)), state
    finally:
        state.release.set()
        state.executor.shutdown(wait=True)


def test_requests_queued_meanwhile_share_one_commit_and_are_answered_after_it() -> None:
    async def scenario(state: StateThread, batches: GroupCommit[str]) -> list[Any]:
        answered: list[tuple[str, int]] = []

        async def send(name: str) -> str:
            result = await batches.submit(name)
            answered.append((name, len(state.events)))  # how much was on record when answered
            return result

        first = asyncio.create_task(send("first"))
        await asyncio.sleep(0.05)
        others = [asyncio.create_task(send(n)) for n in ("a", "b", "c")]
        await asyncio.sleep(0.05)
        state.release.set()
        return [await first, *[await t for t in others], answered]

    (*results, answered), state = run(scenario)
    assert results == ["FIRST", "A", "B", "C"]
    assert state.events == [("apply", "first"), ("commit", ("FIRST",)),
                            ("apply", "a"), ("apply", "b"), ("apply", "c"), ("commit", ("A", "B", "C"))]
    # each request was answered only once its batch's commit was on record (events 2 and 6; the
    # next batch may already be applying when an answer goes out, hence at least)
    committed_at = {"first": 2, "a": 6, "b": 6, "c": 6}
    assert sorted(name for name, _ in answered) == sorted(committed_at)
    assert all(seen >= committed_at[name] for name, seen in answered), answered


def test_a_failing_apply_fails_alone_and_a_failing_commit_fails_its_whole_batch() -> None:
    async def scenario(state: StateThread, batches: GroupCommit[str]) -> list[Any]:
        first, queued = await queue_behind_first(state, batches, ("a", "bad", "b"))
        outcomes = [await first]
        outcomes += await asyncio.gather(*queued, return_exceptions=True)
        state.fail_commit = True
        outcomes += await asyncio.gather(batches.submit("c"), batches.submit("d"), return_exceptions=True)
        state.fail_commit = False
        outcomes.append(await batches.submit("e"))  # the next batch commits again
        return outcomes

    outcomes, state = run(scenario)
    assert outcomes[:2] == ["FIRST", "A"] and outcomes[3] == "B" and outcomes[-1] == "E"
    assert isinstance(outcomes[2], ValueError)
    assert [type(o) for o in outcomes[4:6]] == [RuntimeError, RuntimeError]
    assert ("commit", ("A", "B")) in state.events and ("commit", ("E",)) in state.events
    assert not any(event == "commit" and "C" in results for event, results in state.events)


@pytest.mark.parametrize("requests", [1, 5])
def test_every_request_gets_its_own_result(requests: int) -> None:
    async def scenario(state: StateThread, batches: GroupCommit[str]) -> list[str]:
        return list(await asyncio.gather(*(batches.submit(f"r{i}") for i in range(requests))))

    results, state = run(scenario)
    assert results == [f"R{i}" for i in range(requests)]
    committed = [r for event, batch in state.events if event == "commit" for r in batch]
    assert committed == results


def test_a_state_reset_fails_its_request_alone_and_the_batch_is_applied_again() -> None:
    """The reset took back what the batch had applied before it: those requests are applied again, so the
    innocent requests sharing the batch are committed and answered, and the one that failed part-way is
    the only one refused (issue 15: one hostile span must not fail the others)."""
    async def scenario(state: StateThread, batches: GroupCommit[str]) -> list[Any]:
        first, queued = await queue_behind_first(state, batches, ("a", "reset", "b"))
        return [await first, *await asyncio.gather(*queued, return_exceptions=True), await batches.submit("c")]

    outcomes, state = run(scenario)
    assert outcomes[:2] == ["FIRST", "A"] and outcomes[3:] == ["B", "C"]
    assert isinstance(outcomes[2], Reset)
    commits = [e for e in state.events if e[0] == "commit"]
    assert commits == [("commit", ("FIRST",)), ("commit", ("A", "B")), ("commit", ("C",))]
    applied = [name for event, name in state.events if event == "apply"]
    assert applied == ["first", "a", "a", "b", "c"]  # a again, after the reset
