"""What a rewrite costs the provider's prompt cache, and the provider's own cache figures.

A provider's prompt cache (Anthropic prompt caching, OpenAI's automatic prefix caching) serves the
longest prefix of a prompt it has seen before. A rewrite that changes the consumed prefix (what the
model has already read, before the generation boundary) breaks that prefix at the first message it
changes: everything consumed from there on is sent, and paid for, again. `invalidated` measures that
part of one applied change: the readable characters (`Message.size`, the unit of
``ctxwatch.size.*``) of the consumed messages from the first differing one up to the boundary, and
an estimate of their tokens by one documented rule, ``ceil(characters / 4)`` (`CHARS_PER_TOKEN`, the
providers' own rule of thumb for English text). No tokenizer is used: tiktoken, the one that counts
OpenAI's tokens, downloads its encoding files on first use, and the guard never reaches the network.

`ProviderCache` holds what a provider's response says it read from and wrote to its cache; the
readers take an SDK object or the plain JSON of its ``usage`` and never raise (a missing, negative or
non-integer figure is left out): Anthropic's ``cache_read_input_tokens`` /
``cache_creation_input_tokens``, OpenAI Chat Completions' ``prompt_tokens_details.cached_tokens`` /
``cache_write_tokens``, OpenAI Responses' ``input_tokens_details.cached_tokens`` / ``cache_write_tokens``
(the write count is in the openai SDK's types from 3.x; older responses carry reads only) and LangChain's standard
``usage_metadata.input_token_details`` (``cache_read`` / ``cache_creation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .diff import Change

CHARS_PER_TOKEN = 4
_INT64_MAX = 2**63 - 1


def estimate_tokens(chars: int) -> int:
    """Tokens estimated from readable characters: ``ceil(chars / CHARS_PER_TOKEN)``."""
    return -(-chars // CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Invalidation:
    """Consumed context an applied change makes the provider's cache miss: characters and estimated tokens."""

    chars: int = 0
    tokens: int = 0


NOTHING = Invalidation()


def invalidated(change: Change) -> Invalidation:
    """What applying `change` invalidates: the consumed messages from the first one it changes (or
    drops) up to the generation boundary. An append, or a change after the boundary, invalidates nothing."""
    start, boundary = change.prefix_len, change.before.boundary
    if start >= boundary:
        return NOTHING
    chars = sum(m.size for m in change.before.messages[start:boundary])
    return Invalidation(chars, estimate_tokens(chars))


@dataclass(frozen=True, slots=True)
class ProviderCache:
    """The prompt-cache tokens one provider response reports (None: the response does not say)."""

    read_tokens: int | None = None
    creation_tokens: int | None = None

    def __bool__(self) -> bool:
        return self.read_tokens is not None or self.creation_tokens is not None


def _field(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _tokens(value: Any) -> int | None:
    """A token count: a non-negative int within int64 (bools and anything else are not)."""
    if type(value) is int and 0 <= value <= _INT64_MAX:
        return value
    return None


def anthropic_cache(usage: Any) -> ProviderCache:
    """From an Anthropic Messages ``usage`` (also Claude Code's recorded ``message.usage``)."""
    return ProviderCache(_tokens(_field(usage, "cache_read_input_tokens")),
                         _tokens(_field(usage, "cache_creation_input_tokens")))


def openai_chat_cache(usage: Any) -> ProviderCache:
    """From an OpenAI Chat Completions ``usage``: ``prompt_tokens_details.cached_tokens`` / ``cache_write_tokens``."""
    return _openai_details(_field(usage, "prompt_tokens_details"))


def openai_responses_cache(usage: Any) -> ProviderCache:
    """From an OpenAI Responses ``usage`` (and the Agents SDK's per-request usage):
    ``input_tokens_details.cached_tokens`` / ``cache_write_tokens``."""
    return _openai_details(_field(usage, "input_tokens_details"))


def _openai_details(details: Any) -> ProviderCache:
    return ProviderCache(_tokens(_field(details, "cached_tokens")), _tokens(_field(details, "cache_write_tokens")))


def langchain_cache(usage_metadata: Any) -> ProviderCache:
    """From a LangChain ``AIMessage.usage_metadata``: ``input_token_details`` ``cache_read`` / ``cache_creation``."""
    details = _field(usage_metadata, "input_token_details")
    return ProviderCache(_tokens(_field(details, "cache_read")), _tokens(_field(details, "cache_creation")))


def added(a: ProviderCache | None, b: ProviderCache) -> ProviderCache:
    """Two responses' figures together (a figure neither reports stays None)."""
    if a is None:
        return b
    return ProviderCache(_sum(a.read_tokens, b.read_tokens), _sum(a.creation_tokens, b.creation_tokens))


def _sum(x: int | None, y: int | None) -> int | None:
    if x is None or y is None:
        return y if x is None else x
    return min(x + y, _INT64_MAX)
