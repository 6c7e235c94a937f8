"""The history Codex rebuilds after a compaction its rollout records without ``replacement_history``.

Codex CLI's local compaction (codex-rs/core/src/compact.rs, ``run_compact_task_inner``, up to the versions that
began to record ``replacement_history``) records ``{"type": "compacted", "payload": {"message": <summary>}}``
only, and replaces the history with ``build_compacted_history(initial_context, collect_user_messages(history),
summary)``; resuming such a rollout rebuilds it the same way (``reconstruct_history_from_rollout``). That history
is, in order:

- the initial context (``build_initial_context``: the developer / user-instructions / environment messages a
  session starts with). The rollout does not record it again, so it is read as the buffer's leading input
  messages up to its first message counted as the user's;
- the user's messages (``collect_user_messages``: ``user`` messages as ``parse_turn_item`` reads them, their
  text parts joined; not user instructions (one ``input_text`` starting ``# AGENTS.md instructions for `` or
  ``<user_instructions>``), skill instructions (``<skill``), session-prefix messages (a text part starting,
  after leading blanks and in any case, ``<environment_context>``; later versions also ``<turn_aborted>``), nor
  an earlier summary (``is_summary_message``: starting with the summary prefix and a newline)), newest first
  while they fit in ``COMPACT_USER_MESSAGE_MAX_TOKENS`` (20,000) tokens of 4 bytes (``approx_token_count``);
  the first one that does not fit is cut to what is left (``truncate_text``: its head and tail, half the
  budget's bytes each, around ``…N tokens truncated…``) and ends the choice; each one as a ``user`` message of
  one ``input_text``;
- the summary (the record's ``message``, which carries the summary prefix; ``(no summary available)`` when
  empty) as a ``user`` message.

Ghost snapshots Codex keeps after it are never sent to the model. A followed session files each message as it
was: the initial context as it stood, a user message as the message it was cut from (`_UserOf`), the summary
by the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..adapters import openai_responses
from ..model import Message, TextPart
from .filed import FiledMessage, Filing, Source

SUMMARY_PREFIX = (  # codex-rs/core/templates/compact/summary_prefix.md
    "Another language model started to solve this problem and produced a summary of its thinking process. You also "
    "have access to the state of the tools that were used by that language model. Use this to build on the work that "
    "has already been done and avoid duplicating work. Here is the summary produced by the other language model, use "
    "the information in this summary to  assist with your own analysis:")
USER_MESSAGE_MAX_TOKENS = 20_000  # COMPACT_USER_MESSAGE_MAX_TOKENS
_BYTES_PER_TOKEN = 4  # APPROX_BYTES_PER_TOKEN
_NO_SUMMARY = "(no summary available)"
_INSTRUCTIONS = ("# AGENTS.md instructions for ", "<user_instructions>", "<skill")
_SESSION_PREFIX = ("<environment_context>", "<turn_aborted>")
_INPUT_ROLES = frozenset({"user", "developer", "system"})


def user_text(message: Message) -> str | None:
    """The text of `message` when Codex counts it as one of the user's (``collect_user_messages``), else None."""
    if message.role != "user" or message.call_ids or message.result_ids:
        return None
    texts = [p.text for p in message.parts if type(p) is TextPart]
    if len(message.parts) == 1 and texts and texts[0].startswith(_INSTRUCTIONS):
        return None
    if any(t.lstrip().lower().startswith(_SESSION_PREFIX) for t in texts):
        return None
    text = "".join(texts)
    return None if text.startswith(SUMMARY_PREFIX + "\n") else text


def rebuilt(history: Sequence[Message], summary: Message | None, filing: Filing | None) -> tuple[Message, ...]:
    """The history Codex holds after a compaction recorded without ``replacement_history`` (see the module):
    `history` the one before it, `summary` the record's summary message (filed, in a followed session)."""
    initial: list[Message] = []
    for message in history:
        if message.role not in _INPUT_ROLES or not message.plain or user_text(message) is not None:
            break
        initial.append(message)
    kept: list[Message] = []
    remaining = USER_MESSAGE_MAX_TOKENS
    for message in reversed(history):
        if remaining == 0:
            break
        text = user_text(message)
        if text is None:
            continue
        tokens = _tokens(text)
        budget = None if tokens <= remaining else remaining
        remaining = remaining - tokens if budget is None else 0
        rebuilt_message = _user_message(text, budget)
        if filing is not None and isinstance(message, FiledMessage):
            rebuilt_message = FiledMessage.of(rebuilt_message, _UserOf(message.source, budget), filing)
        kept.append(rebuilt_message)
    kept.reverse()
    return (*initial, *kept, summary if summary is not None else Message("user", _NO_SUMMARY))


def _tokens(text: str) -> int:
    return -(-len(text.encode()) // _BYTES_PER_TOKEN)


def _user_message(text: str, budget: int | None) -> Message:
    """A user message of one ``input_text`` as Codex builds it: `text`, cut to `budget` tokens when given."""
    if budget is not None:
        text = _truncated(text, budget)
    return openai_responses.read({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
                                 None)


def _truncated(text: str, budget: int) -> str:
    """`text`'s head and tail in `budget` tokens' bytes (half each, on character boundaries) around the marker."""
    data = text.encode()
    left = budget * _BYTES_PER_TOKEN // 2
    right = budget * _BYTES_PER_TOKEN - left
    head = data[:left].decode(errors="ignore")
    tail = data[len(data) - right:].decode(errors="ignore") if right else ""
    removed = len(data) - len(head.encode()) - len(tail.encode())
    return f"{head}…{-(-removed // _BYTES_PER_TOKEN)} tokens truncated…{tail}"


@dataclass(frozen=True, slots=True)
class _UserOf:
    """A rebuilt user message's source (`sessions.filed.Source`): the message it was built from, cut to
    `budget` tokens when given."""

    source: Source
    budget: int | None

    @property
    def where(self) -> tuple[int, int, int]:
        return self.source.where

    def rebuild(self, filing: Filing) -> Message:
        text = user_text(self.source.rebuild(filing))
        return _user_message(text or "", self.budget)
