"""Whether a provider would accept a context: the request-shape rules of each message format.

The guard never returns a context the provider would answer with a 400. Its own conversions (the
whole-pair compaction of a deferred rewrite) are checked here before they are offered; a
conversion that cannot be made valid is not made, and the rewrite waits in the queue instead.

- OpenAI Chat (and LangChain, and the context model): every ``tool`` message answers a call of the
  assistant message right before its run of tool messages.
- OpenAI Responses: every ``function_call_output`` comes after its ``function_call``.
- Anthropic: after the system prompt the first message is ``user``, roles alternate, and the
  ``tool_result`` blocks answering an assistant's ``tool_use`` blocks open the next user turn.

A call still awaiting its result at the end of the context is allowed (the agent is running it).
"""

from __future__ import annotations

from collections.abc import Sequence

from .model import SYSTEM_ROLES, Message, ToolResult


def provider_problems(messages: Sequence[Message], format: str | None) -> list[str]:
    """One line per rule the context breaks, naming the message index; empty when it is valid."""
    if format == "anthropic":
        return _anthropic(messages)
    if format == "openai_responses":
        return _responses(messages)
    return _chat(messages)


def _chat(messages: Sequence[Message]) -> list[str]:
    problems: list[str] = []
    open_calls: set[str] = set()
    answering = False  # inside the run of tool messages after an assistant's calls
    for i, m in enumerate(messages):
        if m.role == "tool":
            stray = [r for r in m.result_ids if r not in open_calls]
            if not answering or stray:
                problems.append(f"message {i}: a tool message that does not answer the calls right before it")
            open_calls -= set(m.result_ids)
            continue
        if open_calls:
            problems.append(f"message {i}: calls {sorted(open_calls)} are not answered before it")
        open_calls = set(m.call_ids) if m.role == "assistant" else set()
        answering = bool(open_calls)
    return problems


def _responses(messages: Sequence[Message]) -> list[str]:
    problems: list[str] = []
    called: set[str] = set()
    for i, m in enumerate(messages):
        missing = [r for r in m.result_ids if r not in called]
        if missing:
            problems.append(f"message {i}: outputs for calls {missing} that were not made before it")
        called.update(m.call_ids)
    return problems


def _anthropic(messages: Sequence[Message]) -> list[str]:
    problems: list[str] = []
    turns = [(i, m) for i, m in enumerate(messages) if m.role not in SYSTEM_ROLES]
    if turns and turns[0][1].role != "user":
        problems.append(f"message {turns[0][0]}: the first message after the system prompt must be a user turn")
    previous: Message | None = None
    for i, m in turns:
        if previous is not None and m.role == previous.role:
            problems.append(f"message {i}: a second {m.role} turn in a row (roles must alternate)")
        expected = set(previous.call_ids) if previous is not None and previous.role == "assistant" else set()
        if m.role == "user":
            leading = _leading_results(m)
            if set(m.result_ids) - expected:
                problems.append(f"message {i}: tool_result blocks for calls the assistant turn before did not make")
            if expected and leading != expected:
                problems.append(f"message {i}: the tool_result blocks for {sorted(expected)} must open this turn")
        elif expected:
            problems.append(f"message {i}: calls {sorted(expected)} are not answered by the next user turn")
        previous = m
    return problems


def _leading_results(m: Message) -> set[str]:
    """The call ids of the tool_result blocks before any other block of `m`."""
    out: set[str] = set()
    for part in m.parts:
        if not isinstance(part, ToolResult):
            break
        out.add(part.call_id)
    return out
