"""Anthropic SDK: server-side context editing and compaction recorded on a `ContextGuard` as mutations.

One line::

    messages = guarded_messages(client.beta.messages, guard)   # then messages.create(...) as usual

The wrapper serves one conversation, as its guard does. A service with many conversations takes
each one's wrapper from ``messages.conversation(key)`` (a guard of its own: ``guard.sibling(key)``,
or a factory ``key -> ContextGuard`` given instead of the guard). A recorder's first request may carry
a history the server edited before (a conversation let go after `max_conversations` others and served
again): it is read as the server reads it, its last compaction block in effect and the edits the server
reports on it taken as made before (`ContextRecorder._first_request`).

With ``context_management`` the API edits the context on the server: ``clear_tool_uses_*`` replaces
the oldest tool results (and optionally tool inputs) by a placeholder, ``clear_thinking_*`` drops
thinking blocks of the oldest turns — the response's ``context_management.applied_edits`` says how
many — and ``compact_*`` answers with a ``compaction`` block whose summary stands for everything
before it from then on. The client never sees the edited context, so the recorder rebuilds what
the model consumed: the client's messages from the last compaction block on (the block read as its
summary text), with the reported number of oldest tool uses cleared (``exclude_tools`` honoured)
and thinking dropped from the reported number of oldest turns. Each new server edit is checked by
the guard (``prune`` for clearing, ``compact`` for compaction): one span, with the pairs it orphans
and the protected literals it removed from the model's view. The server has already applied it, so
it cannot be refused: a refused edit is reported, and the guard's view keeps the content it refused
to lose.

The response's prompt-cache figures (``usage.cache_read_input_tokens`` / ``cache_creation_input_tokens``)
are noted on the guard, so they ride on the span of the answer's append (docs/telemetry.md, "What
rewrites cost"); the edit spans say how much consumed context each server edit invalidated.

Client-side edits are checked before the request leaves: a history that is not the previous one
plus new turns is checked by the guard, and an abort (an orphaned ``tool_use`` / ``tool_result``,
which the API would answer with a 400 invalid_request_error) raises the typed error with
``on_refusal="raise"`` (default); ``"keep"`` only reports it (the request goes as the client made it;
the guard keeps its own context). Any other edit goes out as the client made it, so the guard takes
it on there and then (`ContextGuard.adopt`): one span per client-side edit, decision patch,
observed — a compaction of consumed turns is reported (``prefix_identity``), not deferred, since the
wrapper does not change the request and the model reads the edit as made. Tool results appended
before the edit count as appended first. Streaming responses are not recorded by
the wrapper: pass the final message to `ContextRecorder.record` yourself.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..adapters.sdk_objects import dump
from ..cache import anthropic_cache
from ..config import check_on_refusal
from ..guard import ContextGuard
from ._conversations import Conversations, GuardSource
from ._format import bind_format
from ._refusal import raise_refusal

__all__ = ["ContextRecorder", "GuardedMessages", "guarded_messages"]

PLACEHOLDER = "[tool result cleared by the server]"


def guarded_messages(resource: Any, guard: GuardSource, *, on_refusal: str = "raise",
                     max_conversations: int = 1024) -> GuardedMessages:
    """Wrap ``client.messages`` or ``client.beta.messages`` (sync or async clients) for one conversation;
    ``.conversation(key)`` is the same wrapper for another (see `GuardedMessages.conversation`)."""
    conversations: Conversations[GuardedMessages] = Conversations(
        guard, lambda g: GuardedMessages(resource, ContextRecorder(g, on_refusal=on_refusal), conversations),
        max_conversations)
    return conversations.get(None)


class GuardedMessages:
    """``create`` checks the request and records the response; everything else is the wrapped resource's."""

    def __init__(self, resource: Any, recorder: ContextRecorder, conversations: Conversations[GuardedMessages]) -> None:
        self._resource = resource
        self.recorder = recorder
        self._conversations = conversations

    def conversation(self, key: str) -> GuardedMessages:
        """The wrapper of conversation `key`, with a guard of its own: the factory's guard for `key`, or
        the given guard's `ContextGuard.sibling(key)` (loop ``<loop id>/<key>``). The wrapper serves one
        conversation's history: a request of another conversation sent through it would be checked as
        an edit of this one."""
        return self._conversations.get(key)

    def __getattr__(self, name: str) -> Any:
        if name == "_resource":
            raise AttributeError(name)
        return getattr(self._resource, name)

    def create(self, **kwargs: Any) -> Any:
        self.recorder.before_request(kwargs)
        response = self._resource.create(**kwargs)
        if inspect.isawaitable(response):
            return self._finish(kwargs, response)
        return self._record(kwargs, response)

    async def _finish(self, kwargs: dict[str, Any], pending: Any) -> Any:
        return self._record(kwargs, await pending)

    def _record(self, kwargs: dict[str, Any], response: Any) -> Any:
        if kwargs.get("stream"):
            return response
        self.recorder.record(kwargs, response)
        return response


class ContextRecorder:
    """Tracks one conversation's client history and the server's edits of it; see the module docstring."""

    def __init__(self, guard: ContextGuard, *, on_refusal: str = "raise") -> None:
        self.on_refusal = check_on_refusal(on_refusal)
        self.guard = bind_format(guard, "anthropic", "the Anthropic recorder")
        self._history: list[dict[str, Any]] = []  # the last request's messages plus the answer
        self._seen: set[str] = set()               # server edits the guard was shown (cleared ids, 'thinking:N')
        self._adopted: set[str] = set()            # ... and accepted: the guard's view applies them
        self._compactions: set[str] = set()        # compaction blocks the guard accepted
        self._configs: dict[str, Mapping[str, Any]] = {}  # the request's context_management edits, by type
        self._unobserved = False  # the first request is not observed yet (`_first_request`)

    def before_request(self, request: Mapping[str, Any]) -> None:
        """Bring the guard up to this request: new turns are observed; a client-side edit is checked. The
        recorder's first request is observed with its answer (`record`)."""
        self._configs = {c.get("type"): c for c in (request.get("context_management") or {}).get("edits", ())}
        messages = plain(request.get("messages") or ())
        if not self._history:
            self._first_request(messages)
            return
        view = self._view(messages, request.get("system"), self._adopted)
        if messages[: len(self._history)] == self._history:
            self.guard.observe(view, boundary=self.guard.context.boundary)
        else:  # a client-side edit: sent as made unless refused
            raise_refusal(self.guard.adopt(view), self.on_refusal)
        self._history, self._unobserved = messages, False

    def _first_request(self, messages: list[dict[str, Any]]) -> None:
        """The recorder's first request may carry a history the server has edited before (a conversation the
        wrapper let go and serves again, one resumed from storage): the last compaction block in it is in
        effect (the server reads from it on), and the edits the server reports with the answer were made to
        turns the model never read unedited, so the guard starts from the context as the server edited it
        (`record`) instead of taking them for new edits of turns it saw."""
        found = _last_compaction(messages)
        if found is not None:
            self._compactions.add(_compaction_key(found[1]))
        self._history, self._unobserved = messages, True

    def record(self, request: Mapping[str, Any], response: Any) -> None:
        """Record the server's edits of this request and the answer (call after `before_request`)."""
        messages = plain(request.get("messages") or ())
        system = request.get("system")
        applied = self._server_edits(messages, _applied_edits(response))
        new = applied - self._seen
        self._seen |= new
        self._adopted |= new
        if self._unobserved:  # the first request, as the server edited it (`_first_request`)
            self._unobserved = False
            self.guard.observe(self._view(messages, system, self._adopted), boundary=0)
        elif new:  # the server already applied its edits and the model read the result: observed (evaluated,
            # reported, adopted), never refused or deferred
            self.guard.observe(self._view(messages, system, self._adopted), kind="prune")
        answer = {"role": "assistant", "content": plain_blocks(getattr(response, "content", ()) or ())}
        block = _last_compaction([answer])
        if block is not None:  # the server compacted, then the model answered from the summary
            self._compactions.add(_compaction_key(block[1]))
            self.guard.observe(self._view([answer], system, self._adopted, compaction=block), kind="compact")
        history = messages + [answer]
        self.guard.note_provider_cache(anthropic_cache(getattr(response, "usage", None)))
        self.guard.observe(self._view(history, system, self._adopted))
        self._history = history

    # --- rebuilding what the model consumed -------------------------------------------------------
    def _view(self, messages: list[dict[str, Any]], system: Any, applied: Iterable[str],
              compaction: tuple[int, dict[str, Any]] | None = None) -> Any:
        found = compaction or _last_compaction(messages)
        if found is not None and (compaction is not None or _compaction_key(found[1]) in self._compactions):
            messages = _from_compaction(messages, found)
        applied = set(applied)
        inputs = _clears_inputs(self._configs)
        out = []
        thinking_turns = sum(1 for a in applied if a.startswith("thinking:"))
        for m in messages:
            blocks = m.get("content")
            if not isinstance(blocks, list):
                out.append(m)
                continue
            drop_thinking = m.get("role") == "assistant" and thinking_turns > 0 and _has_thinking(blocks)
            if drop_thinking:
                thinking_turns -= 1
            edited = [_cleared(b, applied, inputs) for b in blocks
                      if not (drop_thinking and b.get("type") in ("thinking", "redacted_thinking"))]
            out.append({**m, "content": edited})
        return {"system": system, "messages": out} if system is not None else out

    def _server_edits(self, messages: list[dict[str, Any]], edits: Sequence[Any]) -> set[str]:
        """The edits of this request as keys: the tool_use ids cleared, and 'thinking:<n>' per turn."""
        out: set[str] = set()
        visible = messages
        found = _last_compaction(messages)
        if found is not None and _compaction_key(found[1]) in self._compactions:
            visible = _from_compaction(messages, found)
        for edit in edits:
            kind = getattr(edit, "type", "")
            if kind.startswith("clear_tool_uses"):
                excluded = set((self._configs.get(kind) or {}).get("exclude_tools") or ())
                uses = [b["id"] for m in visible if isinstance(m.get("content"), list) for b in m["content"]
                        if b.get("type") == "tool_use" and b.get("name") not in excluded]
                out.update(uses[: getattr(edit, "cleared_tool_uses", 0)])
            elif kind.startswith("clear_thinking"):
                out.update(f"thinking:{i}" for i in range(getattr(edit, "cleared_thinking_turns", 0)))
        return out


def plain(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """Messages as plain dicts (content blocks from the SDK's models dumped without unset fields)."""
    out = []
    for m in messages:
        m = _dump(m)
        content = m.get("content")
        if isinstance(content, (list, tuple)):
            m = {**m, "content": plain_blocks(content)}
        out.append(m)
    return out


def plain_blocks(blocks: Iterable[Any]) -> list[dict[str, Any]]:
    return [_dump(b) for b in blocks]


def _dump(value: Any) -> dict[str, Any]:
    return dict(dump(value))


def _applied_edits(response: Any) -> Sequence[Any]:
    management = getattr(response, "context_management", None)
    return list(getattr(management, "applied_edits", None) or ())


def _clears_inputs(configs: Mapping[str, Mapping[str, Any]]) -> bool | set[str]:
    for kind, config in configs.items():
        if kind and kind.startswith("clear_tool_uses"):
            value = config.get("clear_tool_inputs")
            return {v for v in value if isinstance(v, str)} if isinstance(value, (list, tuple)) else bool(value)
    return False


def _one_of(value: object, names: set[str]) -> bool:
    """`value` is one of `names` (a recorded block may hold any JSON value there)."""
    return isinstance(value, str) and value in names


def _cleared(block: dict[str, Any], applied: set[str], inputs: bool | set[str]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "tool_result" and _one_of(block.get("tool_use_id"), applied):
        return {**block, "content": PLACEHOLDER}
    if kind == "tool_use" and _one_of(block.get("id"), applied) and \
            (inputs is True or (isinstance(inputs, set) and _one_of(block.get("name"), inputs))):
        return {**block, "input": {}}
    if kind == "compaction":  # the model reads a compaction block as its summary
        return {"type": "text", "text": block.get("content") or ""}
    return block


def _has_thinking(blocks: Sequence[dict[str, Any]]) -> bool:
    return any(b.get("type") in ("thinking", "redacted_thinking") for b in blocks)


def _last_compaction(messages: Sequence[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content")
        if isinstance(content, list):
            for block in reversed(content):
                if block.get("type") == "compaction":
                    return i, block
    return None


def _from_compaction(messages: list[dict[str, Any]], found: tuple[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """What the server reads: the compaction block's message from the block on, and what follows."""
    at, block = found
    content = messages[at]["content"]
    start = next(j for j, b in enumerate(content) if b is block)
    return [{**messages[at], "content": content[start:]}] + messages[at + 1:]


def _compaction_key(block: dict[str, Any]) -> str:
    return str(block.get("encrypted_content") or block.get("signature") or block.get("content"))
