"""Whether a provider would accept a context: the request-shape rules of each message format.

The guard never returns a context the provider would answer with a 400. Its own conversions (the
whole-pair compaction of a deferred rewrite) are checked here before they are offered; a
conversion that cannot be made valid is not made, and the rewrite waits in the queue instead.

- OpenAI Chat (and LangChain, and the context model): every ``tool`` message answers a call of the
  assistant message right before its run of tool messages.
- OpenAI Responses: every ``function_call_output`` comes after its ``function_call``.
- Anthropic: after the system prompt the first message is ``user``, and the ``tool_result`` blocks
  answering an assistant's ``tool_use`` blocks open the next user turn. Consecutive messages of one
  role are one turn, as the API combines them (a tool_result message and a user's text after it).

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
    turns = _anthropic_turns(messages)
    if turns and turns[0][1] != "user":
        problems.append(f"message {turns[0][0]}: the first message after the system prompt must be a user turn")
    previous: tuple[int, str, list[Message]] | None = None
    for i, role, run in turns:
        expected = ({c for m in previous[2] for c in m.call_ids}
                    if previous is not None and previous[1] == "assistant" else set())
        if role == "user":
            results = {r for m in run for r in m.result_ids}
            if results - expected:
                problems.append(f"message {i}: tool_result blocks for calls the assistant turn before did not make")
            if expected and _leading_results(run) != expected:
                problems.append(f"message {i}: the tool_result blocks for {sorted(expected)} must open this turn")
        elif expected:
            problems.append(f"message {i}: calls {sorted(expected)} are not answered by the next user turn")
        previous = (i, role, run)
    return problems


def _anthropic_turns(messages: Sequence[Message]) -> list[tuple[int, str, list[Message]]]:
    """The turns the Messages API reads: after the system prompt, each run of consecutive messages of one
    role is one turn ("Consecutive user or assistant turns in your request will be combined into a single
    turn", the API reference), as (index of its first message, role, its messages)."""
    turns: list[tuple[int, str, list[Message]]] = []
    for i, m in enumerate(messages):
        if m.role in SYSTEM_ROLES:
            continue
        if turns and turns[-1][1] == m.role:
            turns[-1][2].append(m)
        else:
            turns.append((i, m.role, [m]))
    return turns


def _leading_results(turn: Sequence[Message]) -> set[str]:
    """The call ids of the tool_result blocks before any other block of the turn."""
    out: set[str] = set()
    for part in (p for m in turn for p in m.parts):
        if not isinstance(part, ToolResult):
            break
        out.add(part.call_id)
    return out
