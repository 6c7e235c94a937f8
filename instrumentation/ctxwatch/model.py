"""The context model: messages, their parts, and a context window with a generation boundary.

Every supported wire format (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages,
LangChain) is converted into these immutable objects by `ctxwatch.adapters`, so the invariant
checks are written once. A message renders to canonical bytes (stable across processes and
Python versions) and its digest is computed once and kept on the object: an unchanged message
is never hashed twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import xxhash

from .fastjson import encoded

ROLES: frozenset[str] = frozenset({"system", "developer", "user", "assistant", "tool"})
# The roles that instruct the model rather than converse with it (a leading system prompt, its edits).
SYSTEM_ROLES: frozenset[str] = frozenset({"system", "developer"})


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical_json(value: object) -> str:
    """JSON with sorted keys and fixed separators: the same value always gives the same text."""
    fast = encoded(value, sort_keys=True)
    return fast.decode("utf-8") if fast is not None else _CANONICAL.encode(value)


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text the model reads or wrote."""

    text: str

    def to_canonical(self) -> list:
        return ["text", self.text]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A request by the model to run a tool (`tool_use`, `function_call`, `tool_calls[]`).

    `arguments` is kept as the provider sent it (a JSON string).
    """

    id: str
    name: str
    arguments: str = "{}"

    def to_canonical(self) -> list:
        return ["tool_call", self.id, self.name, self.arguments]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The output of a tool call, linked to it by `call_id`."""

    call_id: str
    output: str | tuple[Part, ...] = ""
    is_error: bool = False

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "\n".join(part_text(p) for p in self.output)

    def to_canonical(self) -> list:
        out = self.output if isinstance(self.output, str) else [p.to_canonical() for p in self.output]
        return ["tool_result", self.call_id, out, self.is_error]


@dataclass(frozen=True, slots=True)
class OpaquePart:
    """Any other content (images, audio, reasoning, provider-specific blocks), kept verbatim.

    `data` is the canonical JSON text of the original block, so it round-trips byte for byte.
    """

    kind: str
    data: str

    def to_canonical(self) -> list:
        return ["opaque", self.kind, self.data]


Part = TextPart | ToolCall | ToolResult | OpaquePart
_PART_TYPES = (TextPart, ToolCall, ToolResult, OpaquePart)
_EXACT_PART_TYPES: frozenset[type] = frozenset(_PART_TYPES)
_TOOL_TRAFFIC: frozenset[type] = frozenset({ToolCall, ToolResult})


def part_text(part: Part) -> str:
    """The human-readable text of a part (what literal and fingerprint analysis read)."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolCall):
        return f"{part.name} {part.arguments}"
    if isinstance(part, ToolResult):
        return part.text()
    return ""


class Message:
    """One entry of the context window: a role and an ordered tuple of parts.

    Immutable by convention (attributes are set once in ``__init__``). `id` is an identifier
    outside the model's view (a LangChain message id, a Responses item id); it does not enter
    the digest, because the model never sees it. `extra` holds canonical JSON of any other
    fields the source format carried, so adapters can round-trip them. `annotations` holds canonical
    JSON of what the source carried that the model does not read (``cache_control`` breakpoints, null
    keys, the list form of a one-text-block content, an Anthropic request's own keys: the rule is in
    `ctxwatch.adapters._shape`), kept for the round trip and, like `id`, outside the digest: changing
    them is no edit of the message.
    """

    __slots__ = ("role", "parts", "id", "name", "extra", "annotations", "tool_calls", "call_ids", "result_ids", "plain",
                 "_canonical", "_digest", "_text")

    def __init__(self, role: str, parts: Iterable[Part] | str = (), *, id: str | None = None,
                 name: str | None = None, extra: str | None = None, annotations: str | None = None) -> None:
        if role not in ROLES:
            raise ValueError(f"unknown message role {role!r}; expected one of {', '.join(sorted(ROLES))}")
        self.role = role
        self.parts: tuple[Part, ...] = (TextPart(parts),) if isinstance(parts, str) else tuple(parts)
        kinds = set(map(type, self.parts))  # the exact types: what the views below select by
        if not kinds <= _EXACT_PART_TYPES:  # a subclass of a part type, or not a part at all
            for i, part in enumerate(self.parts):
                if not isinstance(part, _PART_TYPES):
                    raise TypeError(f"part {i} of a {role} message is a {type(part).__name__}; expected "
                                    "TextPart, ToolCall, ToolResult or OpaquePart")
        self.id = id
        self.name = name
        self.extra = extra
        self.annotations = annotations
        self._canonical: bytes | None = None
        self._digest: int | None = None
        self._text: str | None = None
        self.tool_calls: tuple[ToolCall, ...] = tuple(
            p for p in self.parts if type(p) is ToolCall) if ToolCall in kinds else ()
        self.call_ids: tuple[str, ...] = tuple(p.id for p in self.tool_calls)
        self.result_ids: tuple[str, ...] = tuple(
            p.call_id for p in self.parts if type(p) is ToolResult) if ToolResult in kinds else ()
        # carries something besides tool traffic (text, an image, reasoning...) or nothing at all
        self.plain: bool = not self.parts or not kinds <= _TOOL_TRAFFIC

    # --- identity -------------------------------------------------------------------------
    def canonical(self) -> bytes:
        """Canonical bytes of what the model sees of this message (stable rendering)."""
        if self._canonical is None:
            body = [self.role, self.name, [p.to_canonical() for p in self.parts], self.extra]
            fast = encoded(body, sort_keys=True)
            # kept for the message's life: copied to its length (orjson's bytes keep its spare buffer, 2x the heap)
            self._canonical = (memoryview(fast).tobytes() if fast is not None
                               else _CANONICAL.encode(body).encode("utf-8", "surrogatepass"))
        return self._canonical

    @property
    def digest(self) -> int:
        """128-bit xxh3 digest of the canonical rendering, computed once."""
        if self._digest is None:
            self._digest = xxhash.xxh3_128_intdigest(self.canonical())
        return self._digest

    @property
    def digest_hex(self) -> str:
        return f"{self.digest:032x}"

    # --- content views -------------------------------------------------------------------
    @property
    def text(self) -> str:
        """All readable text of the message, parts joined by newlines (computed once)."""
        if self._text is None:
            self._text = "\n".join(t for t in (part_text(p) for p in self.parts) if t)
        return self._text


    @property
    def size(self) -> int:
        """Size in characters of the readable text (the budget unit for pass-cap pressure)."""
        return len(self.text)

    # --- value semantics -----------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self is other or (self.digest == other.digest and self.canonical() == other.canonical())

    def __hash__(self) -> int:
        return self.digest & 0x7FFFFFFFFFFFFFFF

    def __repr__(self) -> str:
        preview = self.text[:40].replace("\n", " ")
        return f"Message({self.role!r}, {preview!r}{'…' if len(self.text) > 40 else ''}, parts={len(self.parts)})"


@dataclass(frozen=True, slots=True)
class Context:
    """An ordered, immutable context window and its generation boundary.

    `boundary` is the number of leading messages the model has already consumed: everything in
    ``messages[:boundary]`` was part of a prompt the model generated from.
    """

    messages: tuple[Message, ...]
    boundary: int = 0

    @classmethod
    def of(cls, messages: Sequence[Message], boundary: int | None = None) -> Context:
        msgs = tuple(messages)
        b = len(msgs) if boundary is None else boundary
        if not 0 <= b <= len(msgs):
            raise ValueError(f"boundary {b} is outside the context (0..{len(msgs)})")
        return cls(msgs, b)

    @property
    def digests(self) -> list[int]:
        return [m.digest for m in self.messages]

    def __len__(self) -> int:
        return len(self.messages)


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool definition as offered to the model. `version` is derived from the definition's
    canonical JSON unless given, so a changed schema is a new version of the same tool."""

    name: str
    definition: str = "{}"
    explicit_version: str | None = None

    @property
    def version(self) -> str:
        if self.explicit_version is not None:
            return self.explicit_version
        return f"{xxhash.xxh3_64_intdigest(self.definition.encode('utf-8')):016x}"[:12]
