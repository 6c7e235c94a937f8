"""LangChain v1 agents (and the LangGraph graph they run on): every change to the message list
the model consumes is checked by a `ContextGuard` before the model call.

One line::

    agent = create_agent(model, tools, middleware=guard_middleware(guard, SummarizationMiddleware(...)))

`guard_middleware` returns ``[entry, *middleware, ContextGuardMiddleware]``. The entry hook's
``before_model`` runs before every other one and notes the messages as they were; the guard's
runs after all of them, and its ``wrap_model_call`` is the innermost, so it sees exactly what the
model is about to consume: after summarization, ``trim_messages``, ``RemoveMessage`` updates and
request-level edits such as tool-use clearing (``ContextEditingMiddleware``).

Before each model call:

1. what the graph appended since the last call (the model's answer, tool results, new input) is
   observed — an append: no span; a system prompt that differs from the last call's (the application
   sets it per call: ``create_agent(system_prompt=...)``, a ``dynamic_prompt`` middleware) is the
   application's own edit, taken on at once (`ContextGuard.adopt(trusted=True)`: one ``system_patch``
   span whose prefix and policy findings are warnings; the pinned policy is what it sets);
2. if the request is not an extension of that, the difference is one context edit, checked by the
   guard, which names its kind (`ctxwatch.kinds.classify`: compact, prune, system_patch, rerank,
   rewrite; schema_change when only the tools changed) — one span;
3. the guard's decision is carried out (`_refusal`): on patch the request goes as the framework made
   it; otherwise the model gets the previous messages (``on_refusal="keep"``, and always on defer)
   or the typed error is raised (``on_refusal="raise"``, the default). When the refused edit was made
   to the agent state (a summarization), the state is put back too, so the next step starts from
   what the model saw;
4. the model's answer is observed (an append); its ``usage_metadata.input_token_details`` cache figures
   (``cache_read``, ``cache_creation``: what LangChain's chat models fill in from each provider's usage)
   are noted on the guard first, so they ride on that append's span (docs/telemetry.md, "What rewrites cost").

A healthy agent therefore gets one span per context edit and nothing else: its requests, state
and answers are what they would be without the guard.

Conversations: every LangGraph thread (``config["configurable"]["thread_id"]``) has a guard of its
own, so one thread's messages are never taken for an edit of another's. `guard` is a factory
``thread_id -> ContextGuard``, or one `ContextGuard`: it serves the first thread, and each further
thread gets `ContextGuard.sibling(thread_id)` (its settings, loop ``<loop id>/<thread id>``; one
warning says so); a call with no thread id is the given guard's own conversation. A run whose state holds
none of the messages its conversation had (no checkpointer: every invoke starts from its input alone) is a
new conversation, with a new guard made as the old one (`guard_for` gives it), not an edit. At most
`max_conversations` are kept, least recently used first out, never the given guard's own (`_conversations`).
A thread that comes back after it was let go gets a new guard, which starts from the thread's history with
the turns up to the model's last answer read (`_read_by_the_model`) and numbers its spans as a new run.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, RemoveMessage
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Command

from ..cache import langchain_cache
from ..config import check_on_refusal
from ..guard import ContextGuard
from ._conversations import Conversations, GuardSource
from ._refusal import raise_refusal, settle

__all__ = ["ContextGuardEntry", "ContextGuardMiddleware", "guard_middleware"]


def guard_middleware(guard: GuardSource, *middleware: AgentMiddleware, on_refusal: str = "raise",
                     max_conversations: int = 1024) -> list[AgentMiddleware]:
    """``[entry, *middleware, ContextGuardMiddleware]``: `middleware` guarded, in the order given."""
    closing = ContextGuardMiddleware(guard, on_refusal=on_refusal, max_conversations=max_conversations)
    return [closing.entry, *middleware, closing]


class _Conversation:
    """What the middleware knows of one conversation between two model calls."""

    __slots__ = ("guard", "lock", "before", "accounted", "tools")

    def __init__(self, guard: ContextGuard) -> None:
        self.guard = guard
        self.lock = threading.Lock()
        self.before: list[BaseMessage] | None = None   # the state before this step's before_model hooks
        # the state at the last call, plus the answer: for a guard that has seen the conversation (a factory's
        # guard kept for a thread the middleware let go and serves again), what it has seen
        self.accounted: list[BaseMessage] = list(guard.messages) if guard.context.messages else []
        self.tools: tuple[int, ...] | None = None       # identity of the last tool list offered


class _Conversations(Conversations[_Conversation]):
    def __init__(self, source: GuardSource, limit: int) -> None:
        super().__init__(source, _Conversation, limit, warn=(
            "ctxwatch: loop %s serves more than one LangGraph thread; each further thread gets a guard of its "
            "own (loop <loop id>/<thread id>). Pass a factory to name them: "
            "guard_middleware(lambda thread_id: ContextGuard(...), ...)"))

    def current(self) -> _Conversation:
        return self.get(_thread_id())

    def started(self, messages: Sequence[BaseMessage]) -> None:
        """A run starts with `messages` as its state. When they hold none of the messages the conversation has
        accounted for (no checkpointer: each invoke starts from its input alone), the run is a new
        conversation (`renew`), not an edit of the last one that drops all of it."""
        thread_id = _thread_id()
        known = {m.id for m in self.get(thread_id).accounted if m.id is not None and m.type != "system"}
        if known and not any(m.id in known for m in messages):
            self.renew(thread_id)


def _thread_id() -> str | None:
    try:
        config = get_config()
    except RuntimeError:  # called outside a graph run
        return None
    thread_id = (config.get("configurable") or {}).get("thread_id")
    return None if thread_id is None else str(thread_id)


class ContextGuardEntry(AgentMiddleware):
    """The first half of the pair: notes the messages before any other ``before_model`` hook edits them."""

    def __init__(self, conversations: _Conversations) -> None:
        super().__init__()
        self._conversations = conversations

    def before_agent(self, state: Any, runtime: Any) -> None:
        self._conversations.started(state["messages"])

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        self.before_agent(state, runtime)

    def before_model(self, state: Any, runtime: Any) -> None:
        self._conversations.current().before = list(state["messages"])

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.before_model(state, runtime)


class ContextGuardMiddleware(AgentMiddleware):
    """Guards the message list before every model call; see the module docstring.

    Place it last, after its `entry` first (`guard_middleware` does both). `on_refusal`: "raise"
    (default: the run stops with the record's typed error, e.g. `OrphanedToolPairError`, before a
    broken request reaches the provider) or "keep" (the model gets the previous messages and the
    refusal is only reported).
    """

    def __init__(self, guard: GuardSource, *, on_refusal: str = "raise", max_conversations: int = 1024) -> None:
        super().__init__()
        self.on_refusal = check_on_refusal(on_refusal)
        self._conversations = _Conversations(guard, max_conversations)
        self.entry = ContextGuardEntry(self._conversations)

    def guard_for(self, thread_id: str | None = None) -> ContextGuard:
        """The guard of a conversation (the single guard when one was given)."""
        return self._conversations.get(thread_id).guard

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        conv = self._conversations.current()
        with conv.lock:
            request, restore = self._before_call(conv, request)
        response = handler(request)
        with conv.lock:
            return self._after_call(conv, request, response, restore)

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        conv = self._conversations.current()
        with conv.lock:
            request, restore = self._before_call(conv, request)
        response = await handler(request)
        with conv.lock:
            return self._after_call(conv, request, response, restore)

    # --- before the call ------------------------------------------------------------------------
    def _before_call(self, conv: _Conversation, request: ModelRequest
                     ) -> tuple[ModelRequest, list[BaseMessage] | None]:
        guard = conv.guard
        system = [request.system_message] if request.system_message is not None else []
        state_now = list(request.state.get("messages", ()))
        before = conv.before if conv.before is not None else state_now
        conv.before = None
        tools_key = tuple(id(t) for t in request.tools)
        if not guard.messages:  # a new conversation, or one that comes back after it was let go (`_conversations`)
            baseline = system + before
            guard.observe(baseline, boundary=_read_by_the_model(baseline), tools=request.tools or None)
            conv.tools = tools_key
        else:
            baseline = guard.messages + _appended(before, conv.accounted)
            guard.observe(baseline, boundary=guard.context.boundary)
            baseline = self._with_system_prompt(guard, baseline, system)
        proposal = system + list(request.messages)
        tools_changed = tools_key != conv.tools
        conv.tools = tools_key
        extends = _extends(baseline, proposal)
        if extends and not tools_changed:
            guard.observe(proposal, boundary=guard.context.boundary)
            return request, None
        # the guard names the kind (`kinds.classify`; schema_change when only the tools changed)
        # the guard has just seen `baseline`, all there is before this edit: nothing appended since (current=)
        report, kept = settle(guard, proposal, tools=request.tools if tools_changed else None, current=baseline)
        if kept is None:
            return request, None
        raise_refusal(report, self.on_refusal)
        restore = None
        if not _same(state_now, before):  # the refused edit was made to the state: put it back too
            by_id = {m.id: m for m in before + state_now if m.id is not None}
            restore = [by_id.get(m.id, m) for m in kept if m.type != "system"]
        return _with_messages(request, kept), restore

    def _with_system_prompt(self, guard: ContextGuard, baseline: list[BaseMessage],
                            system: Sequence[BaseMessage]) -> list[BaseMessage]:
        """`baseline` with this call's system prompt. The system prompt is the application's configuration,
        set for each call (``create_agent(system_prompt=...)``, a ``dynamic_prompt`` middleware), not history
        the agent rewrites: a new one is taken on as the caller's own edit (`ContextGuard.adopt` with
        ``trusted=True``: one ``system_patch`` span, the prefix and policy changes only warned about, the
        policy pinned on it), so the model reads it now rather than at a session boundary."""
        had = baseline[:1] if baseline and baseline[0].type == "system" else []
        if _same(had, system):
            return baseline
        edited = [*system, *baseline[len(had):]]
        report = guard.adopt(edited, kind="system_patch", trusted=True)
        raise_refusal(report, self.on_refusal)
        return edited if report.decision == "patch" else baseline

    # --- after the call -------------------------------------------------------------------------
    def _after_call(self, conv: _Conversation, request: ModelRequest, response: Any,
                    restore: list[BaseMessage] | None) -> Any:
        inner = response.model_response if isinstance(response, ExtendedModelResponse) else response
        produced = [inner] if isinstance(inner, AIMessage) else list(inner.result)
        for message in produced:
            if isinstance(message, AIMessage):
                conv.guard.note_provider_cache(langchain_cache(message.usage_metadata))
        conv.guard.observe(conv.guard.messages + produced)
        if restore is None:
            conv.accounted = list(request.state.get("messages", ())) + produced
            return response
        conv.accounted = restore + produced
        model_response = inner if isinstance(inner, ModelResponse) else ModelResponse(result=produced)
        update = {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *restore, *produced]}
        command: Command[Any] = Command(update=update)
        return ExtendedModelResponse(model_response=model_response, command=command)


def _read_by_the_model(messages: Sequence[BaseMessage]) -> int:
    """How many leading `messages` the model has read: all up to its last answer (it answered from them), none
    when it has not answered yet. A guard made for a conversation that already has a history (one the
    middleware let go and serves again, a thread resumed from a checkpoint) starts from there, so an edit of
    what the model read is checked as such (record 000's prefix) rather than as one of unread turns."""
    return next((i + 1 for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AIMessage)), 0)


def _appended(state: Sequence[BaseMessage], accounted: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages of `state` the middleware has not accounted for (added since the last call)."""
    known = {m.id for m in accounted if m.id is not None}
    return [m for m in state if m.id is None or m.id not in known]


def _extends(base: Sequence[BaseMessage], longer: Sequence[BaseMessage]) -> bool:
    return len(longer) >= len(base) and all(a is b or a == b for a, b in zip(base, longer, strict=False))


def _same(a: Sequence[BaseMessage], b: Sequence[BaseMessage]) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


def _with_messages(request: ModelRequest, messages: Sequence[BaseMessage]) -> ModelRequest:
    rest = cast(list[AnyMessage], list(messages))
    if rest and rest[0].type == "system":
        return request.override(system_message=rest[0], messages=rest[1:])
    return request.override(system_message=None, messages=rest)
