"""OpenAI Agents SDK: a session wrapper whose edits of the stored history go through a `ContextGuard`.

One line::

    result = await Runner.run(agent, "hi", session=GuardedSession(SQLiteSession("user-42"), guard))

The session's items are OpenAI Responses input items (the guard reads them with its
``openai_responses`` adapter). What the wrapper does with each operation of the `Session` protocol:

- ``add_items``: an append; observed (an append span). The prompt-cache figures of the model responses
  since the last call (the run's ``usage.request_usage_entries``, OpenAI Responses'
  ``input_tokens_details.cached_tokens``) are noted on the guard first, so they ride on that span,
  each response once (docs/telemetry.md, "What rewrites cost"). The generation boundary is put after the last item
  the model produced (assistant messages, tool calls, reasoning), so input that was stored but not
  yet sent (what the runner rewinds after a failed call) is not part of the consumed prefix.
- ``pop_item``: checked as a ``prune`` (one span). Popping a tool output whose call stays is refused
  (the next request would be OpenAI's 400 for a call without its output).
- ``clear_session``: the end of a session: `ContextGuard.session_boundary`, then checked as a
  ``prune``.
- ``run_compaction`` (present when the wrapped session has it, e.g. ``OpenAIResponsesCompactionSession``):
  the history before and after is checked as a ``compact`` (one span when it changed anything). The
  provider's own compaction item (``/responses/compact``'s opaque ``compaction``) is applied as the
  provider made it: the literals behind it are unknown to the guard, not lost (docs/alarm.md, "Opaque
  compactions"). The SDK compacts after the turn, so a halt raised here reaches ``Runner.run`` once the
  turn's items are stored; its `ContractionRegimeError` says so and how to resume, since the SDK tries
  the compaction again after every later turn and each is refused until ``guard.new_episode()``.
- ``replace_items(items, kind="compact")``: the guarded way for your own code to rewrite the history.
- ``get_items``: passed through; a full read that differs from what the guard knows (another writer
  changed the store) is reported by `ContextGuard.observe`.

On a refusal the store keeps (or gets back) the guard's context; with ``on_refusal="raise"``
(default) the typed error follows, with ``"keep"`` it is only reported and a refused ``pop_item``
returns None, which the runner treats as nothing popped. Every other attribute (session settings,
the SDK's compaction hooks) is the wrapped session's.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agents.memory import SessionABC

from ..cache import openai_responses_cache
from ..config import check_on_refusal
from ..errors import ContractionRegimeError
from ..guard import ContextGuard
from ._format import bind_format
from ._refusal import raise_refusal, settle

__all__ = ["GuardedSession"]

_INPUT_ITEMS = frozenset({"item_reference", "mcp_approval_response"})
_HALTED_COMPACTION = (
    "  GuardedSession: the SDK's compaction after this turn was refused and the history kept as it was; the turn's "
    "items are stored in the session, but Runner.run raised instead of returning its result. Every later "
    "turn's compaction is refused the same way until guard.new_episode() is called (after fixing what the "
    "compaction drops); session.clear_session() starts a new session but keeps the halt (a new session is no fix).")


class GuardedSession(SessionABC):
    """A `Session` that checks every edit of `inner`'s history with `guard`; see the module docstring."""

    def __init__(self, inner: Any, guard: ContextGuard, *, on_refusal: str = "raise") -> None:
        self.inner = inner
        self.guard = bind_format(guard, "openai_responses", "GuardedSession")
        self.on_refusal = check_on_refusal(on_refusal)
        self.session_id = inner.session_id
        self._view: list[Any] | None = None  # the stored history as the guard knows it
        self._usage: tuple[Any, int] = (None, 0)  # the run's Usage and how many of its requests were noted
        self._lock = asyncio.Lock()

    @property
    def session_settings(self) -> Any:  # type: ignore[override]
        return getattr(self.inner, "session_settings", None)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (copying, unpickling)
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if name == "run_compaction":
            return self._guarded_compaction(attr)
        return attr

    # --- the Session protocol --------------------------------------------------------------------
    async def get_items(self, limit: int | None = None, wrapper: Any = None) -> list[Any]:
        items = await _call(self.inner.get_items, limit, wrapper=wrapper)
        if limit is None:
            async with self._lock:
                self._adopt(items)
        return items

    async def add_items(self, items: list[Any], wrapper: Any = None) -> None:
        async with self._lock:
            view = await self._known(wrapper)
            await _call(self.inner.add_items, items, wrapper=wrapper)
            self._view = view + list(items)
            self._note_usage(wrapper)
            self.guard.observe(self._view, boundary=generated_boundary(self._view))

    async def pop_item(self, wrapper: Any = None) -> Any:
        async with self._lock:
            view = await self._known(wrapper)
            if not view:
                return await _call(self.inner.pop_item, wrapper=wrapper)
            if await self._refused(view[:-1], "prune", view, wrapper, view):
                return None
            item = await _call(self.inner.pop_item, wrapper=wrapper)
            self._view = view[:-1]
            return item

    async def clear_session(self, wrapper: Any = None) -> None:
        async with self._lock:
            view = await self._known(wrapper)
            self.guard.session_boundary()  # applies a queued rewrite: the guard's context is no longer `view`
            if await self._refused([], "prune", view, wrapper, None):
                return
            await _call(self.inner.clear_session, wrapper=wrapper)
            self._view = []

    async def replace_items(self, items: Sequence[Any], *, kind: str = "compact", wrapper: Any = None) -> bool:
        """Replace the whole history by `items` if the guard accepts it; True when replaced."""
        async with self._lock:
            view = await self._known(wrapper)
            if await self._refused(list(items), kind, view, wrapper, view):
                return False
            await self._store(list(items), wrapper)
            return True

    # --- internals ---------------------------------------------------------------------------------
    def _note_usage(self, wrapper: Any) -> None:
        """Note the cache figures of the run's requests not noted yet (the SDK keeps one entry per request)."""
        usage = getattr(wrapper, "usage", None)
        entries = getattr(usage, "request_usage_entries", None)
        if not isinstance(entries, list):
            return
        known, noted = self._usage
        for entry in entries[noted if known is usage else 0:]:
            self.guard.note_provider_cache(openai_responses_cache(entry))
        self._usage = (usage, len(entries))

    def _guarded_compaction(self, run: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[None]]:
        async def run_compaction(args: Any = None, *, wrapper: Any = None) -> None:
            async with self._lock:
                before = await self._known(wrapper)
                await _call(run, args, wrapper=wrapper)
                after = list(await _call(self.inner.get_items, None, wrapper=wrapper))
                if after == before:
                    return
                try:
                    refused = await self._refused(after, "compact", after, wrapper, before)
                except ContractionRegimeError as halt:
                    raise ContractionRegimeError(f"{halt}\n{_HALTED_COMPACTION}", halt.report) from None
                if not refused:
                    self._view = after
        return run_compaction

    async def _refused(self, proposed: list[Any], kind: str, stored: list[Any], wrapper: Any,
                       known: list[Any] | None) -> bool:
        """Check `proposed`; on a refusal put the guard's context in the store (if `stored` differs
        from it) and raise or report. True when refused. `known`: the history the guard last saw, which
        is all the store held before the edit (given as ``current=``: nothing was appended since); None
        right after a session boundary, where the guard's context is its own (a queued rewrite applied)."""
        report, kept = settle(self.guard, proposed, kind=kind, current=known)
        if kept is None:
            return False
        if kept != stored:
            await self._store(kept, wrapper)
        else:
            self._view = list(kept)
        raise_refusal(report, self.on_refusal)
        return True

    async def _store(self, items: list[Any], wrapper: Any) -> None:
        await _call(self.inner.clear_session, wrapper=wrapper)
        if items:
            await _call(self.inner.add_items, items, wrapper=wrapper)
        self._view = items

    async def _known(self, wrapper: Any) -> list[Any]:
        if self._view is None:
            self._adopt(await _call(self.inner.get_items, None, wrapper=wrapper))
        return list(self._view or ())

    def _adopt(self, items: Sequence[Any]) -> None:
        """Make the full stored history the guard's view (an outside change is reported by observe)."""
        items = list(items)
        if items != (self._view or []):  # an empty first read is nothing to observe
            self.guard.observe(items, boundary=generated_boundary(items))
        self._view = items


def generated_boundary(items: Sequence[Any]) -> int:
    """One past the last item the model produced: what it has consumed when it generated its last turn."""
    for i in range(len(items) - 1, -1, -1):
        if _produced_by_model(items[i]):
            return i + 1
    return 0


def _produced_by_model(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if "role" in item:
        return item["role"] == "assistant"
    kind = item.get("type", "")
    return not (kind.endswith("_output") or kind in _INPUT_ITEMS)


async def _call(method: Callable[..., Any], *args: Any, wrapper: Any = None) -> Any:
    """Call a session method, passing the run context `wrapper` only to a method that takes one."""
    kwargs = {}
    if wrapper is not None and "wrapper" in inspect.signature(method).parameters:
        kwargs["wrapper"] = wrapper
    result = method(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result
