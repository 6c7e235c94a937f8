"""Validation of one decoded span into a `MutationRecord`, using the wire contract's names.

A span is a mutation span when it carries `ctxwatch.mutation.kind`; any other span (an agent's
LLM call, a span that only inherits `ctxwatch.loop.id` from its resource) is ignored, so the
monitor can sit behind a collector that forwards everything. A mutation span with an attribute of
the wrong type, a negative, NaN or infinite figure, an unknown decision or an oversized string is
rejected with a message naming the span's position and the attribute (OTLP `partial_success`).
An integer outside int64 or a string that is not valid UTF-8 never gets here (`otlp_codec` rejects the span
while decoding it), so nothing stored can fail to be written to the state file, the API or /metrics later.
"""

from __future__ import annotations

import math
from typing import Any

from ctxwatch import semconv
from ctxwatch.report import DECISIONS

from .otlp_codec import RawSpan

RESOURCE_SERVICE_NAME = "service.name"
AGENT_NAME = semconv.GENAI_V1_41.agent_name
AGENT_VERSION = semconv.GENAI_V1_41.agent_version
MAX_ID_LENGTH = 256          # loop ids, agent and service names, agent versions
MAX_TOKEN_LENGTH = 64        # kinds, invariant ids, states
MAX_ERROR_TYPE_LENGTH = 128  # error.type: an exception class name
ERROR_TYPE = semconv.GENAI_V1_41.error_type
MAX_LIST_LENGTH = 64         # entries in ctxwatch.violations / ctxwatch.warnings

# The figures of one context (its characters, tokens, literals, orphans) are at most MAX_CONTEXT_FIGURE: about
# six times the largest context window there is (10M tokens, ~40M characters), so no real span comes near it,
# while one span sent without a token cannot add more to a fleet's counters than one real mutation could.
MAX_CONTEXT_FIGURE = 2**28
MAX_INT64 = 2**63 - 1  # OTLP's intValue: sequence numbers, episodes, passes, cycles
_INT_LIMITS: dict[str, int] = {
    **dict.fromkeys((semconv.PASS_NUMBER, semconv.PASS_CAP, semconv.EPISODE, semconv.SEQUENCE,
                     semconv.CONTRACTION_CYCLE, semconv.CONTRACTION_RUN), MAX_INT64),
    **dict.fromkeys((semconv.LITERALS_BEFORE, semconv.LITERALS_LOST, semconv.LITERALS_HIDDEN, semconv.ORPHANS_TOOL_USE,
                     semconv.ORPHANS_TOOL_RESULT, semconv.SIZE_AFTER, semconv.TOKENS_BEFORE, *semconv.CACHE_FIGURES),
                    MAX_CONTEXT_FIGURE),
}
_INT_KEYS = frozenset(_INT_LIMITS)
_STRING_LIMITS = {
    semconv.LOOP_ID: MAX_ID_LENGTH, semconv.SERVICE_NAME: MAX_ID_LENGTH, AGENT_NAME: MAX_ID_LENGTH,
    AGENT_VERSION: MAX_ID_LENGTH,
    semconv.MUTATION_KIND: MAX_TOKEN_LENGTH, semconv.DECISION: MAX_TOKEN_LENGTH,
    semconv.CONTRACTION_STATE: MAX_TOKEN_LENGTH, ERROR_TYPE: MAX_ERROR_TYPE_LENGTH,
    semconv.GUARD_INSTANCE: MAX_TOKEN_LENGTH,
}
_LIST_KEYS = frozenset({semconv.VIOLATIONS, semconv.WARNINGS})
_DOUBLE_KEYS = frozenset({semconv.HASH_DISTANCE})
SPAN_KEYS: frozenset[str] = frozenset({*_INT_KEYS, *_STRING_LIMITS, *_LIST_KEYS, *_DOUBLE_KEYS})
RESOURCE_KEYS: frozenset[str] = frozenset({semconv.LOOP_ID, RESOURCE_SERVICE_NAME})
_DECISIONS = frozenset(DECISIONS)


class Rejected(ValueError):
    """One span that cannot be used; the message names its position and the attribute."""


class MutationRecord:
    """The figures of one mutation span that the monitor keeps and counts."""

    __slots__ = ("loop_id", "service", "agent", "kind", "decision", "pass_number", "pass_cap", "d", "before",
                 "lost", "hidden", "orphans_tool_use", "orphans_tool_result", "violations", "warnings", "guard_state",
                 "episode", "end_ns", "sequence", "guard_cycle", "size_after", "error_type", "cache", "agent_version",
                 "tokens_before", "instance", "run")

    def __init__(self, attrs: dict[str, Any], end_ns: int) -> None:
        """`attrs` are the span's type-checked attributes; `validate` checks the rest and fills in
        the loop id and service from the resource when the span has none."""
        get = attrs.get
        self.loop_id: str = get(semconv.LOOP_ID) or ""
        self.service: str = get(semconv.SERVICE_NAME) or ""
        self.end_ns = end_ns
        self.agent: str = get(AGENT_NAME) or ""
        self.agent_version: str = get(AGENT_VERSION) or ""      # "": not sent (its label is bounded when counted)
        self.tokens_before: int | None = get(semconv.TOKENS_BEFORE)  # the agent's own count (Claude Code preTokens)
        self.kind: str = get(semconv.MUTATION_KIND) or ""
        self.decision: str = get(semconv.DECISION) or ""
        self.pass_number, self.pass_cap = get(semconv.PASS_NUMBER), get(semconv.PASS_CAP)
        self.before, self.lost = get(semconv.LITERALS_BEFORE) or 0, get(semconv.LITERALS_LOST) or 0
        self.hidden: int | None = get(semconv.LITERALS_HIDDEN)  # an opaque rewrite: its loss unknown
        self.orphans_tool_use = get(semconv.ORPHANS_TOOL_USE) or 0
        self.orphans_tool_result = get(semconv.ORPHANS_TOOL_RESULT) or 0
        d = get(semconv.HASH_DISTANCE)
        self.d = None if d is None else float(d)
        self.violations, self.warnings = get(semconv.VIOLATIONS) or (), get(semconv.WARNINGS) or ()
        self.guard_state: str | None = get(semconv.CONTRACTION_STATE)
        self.episode = get(semconv.EPISODE) or 0
        self.sequence: int | None = get(semconv.SEQUENCE)       # None: a guard that does not number its spans
        self.guard_cycle: int | None = get(semconv.CONTRACTION_CYCLE)
        self.run: int | None = get(semconv.CONTRACTION_RUN)     # None: a guard that sends no detector run
        self.instance: str | None = get(semconv.GUARD_INSTANCE) or None  # None: a guard that sends none
        self.size_after: int | None = get(semconv.SIZE_AFTER)  # None: a guard that does not send it
        self.error_type: str | None = get(ERROR_TYPE)           # the class the guard raised, on abort and halt
        # what the mutation cost the provider's prompt cache, in the order of semconv.CACHE_FIGURES (0: not sent)
        self.cache: tuple[int, ...] = tuple(get(name) or 0 for name in semconv.CACHE_FIGURES)

    @property
    def loss_rate(self) -> float | None:
        """r_t = lost / literals before, when there were literals; None when unknown (an opaque rewrite,
        whose span carries ctxwatch.literals.hidden instead of a lost count)."""
        return self.lost / self.before if self.before and self.hidden is None else None

    @property
    def detector_life(self) -> tuple[str | None, int, int]:
        """Which life of its guard's contraction detector the span belongs to: its guard instance's, and in it
        `semconv.detector_life` (the one rule the guard's telemetry counts `ctxwatch.contraction.cycle` by)."""
        return (self.instance, *semconv.detector_life(self.run, self.episode))

    @property
    def feeds_detector(self) -> bool:
        """An applied rewrite cycle the guard's own detector saw: it carries the cycle's hash distance,
        which the guard computes only when it runs the contraction check (decision patch, or halt when
        that check halts the loop). Appends and refused rewrites carry none."""
        return semconv.feeds_detector(self.kind, self.decision, self.d)


def _type_name(value: Any) -> str:
    return {str: "string", bool: "bool", int: "int", float: "double", bytes: "bytes", list: "array",
            dict: "kvlist"}.get(type(value), type(value).__name__)


def _problem(key: str, value: Any) -> str | None:
    """What is wrong with one attribute value (None when it is acceptable)."""
    kind = type(value)
    limit = _STRING_LIMITS.get(key)
    if limit is not None:
        if kind is not str:
            return f"must be a string, got {_type_name(value)}"
        return f"is {len(value)} characters long (at most {limit})" if len(value) > limit else None
    if key in _INT_KEYS:
        if kind is not int:
            return f"must be an int, got {_type_name(value)}"
        if value < 0:
            return f"must be >= 0, got {value}"
        limit = _INT_LIMITS[key]
        if value <= limit:
            return None
        beyond = " (more than any context window holds)" if limit == MAX_CONTEXT_FIGURE else ""
        return f"must be at most {limit}{beyond}, got {value}"
    if key in _LIST_KEYS:
        if kind is not list or any(type(v) is not str for v in value):
            return f"must be a string array, got {_type_name(value)}"
        if len(value) > MAX_LIST_LENGTH or any(len(v) > MAX_TOKEN_LENGTH for v in value):
            return f"has more than {MAX_LIST_LENGTH} entries or one longer than {MAX_TOKEN_LENGTH} characters"
        return None
    if kind is not float and kind is not int:
        return f"must be a double, got {_type_name(value)}"
    return None if math.isfinite(value) and 0.0 <= value <= 1.0 else f"must be in [0, 1], got {value!r}"


def _resource_string(span: RawSpan, key: str) -> str:
    value = span.resource.get(key)
    if value is None:
        return ""
    if type(value) is not str or len(value) > MAX_ID_LENGTH:
        raise Rejected(f"{span.where}: resource attribute {key} must be a string of at most {MAX_ID_LENGTH} "
                       f"characters, got {_type_name(value)}")
    return value


def validate(span: RawSpan) -> MutationRecord | None:
    """The span's record; None when it is not a mutation span (ignored); `Rejected` when invalid."""
    attrs, where = span.attributes, span.where
    if span.problem is not None:
        raise Rejected(f"{where}: {span.problem}")
    if attrs.get(semconv.MUTATION_KIND) is None:
        return None
    string_limit, int_limit = _STRING_LIMITS.get, _INT_LIMITS.get
    for key, value in attrs.items():
        kind = type(value)
        # fast path for the values a guard sends; anything else (None, errors, non-empty arrays) in full
        if kind is str:
            if len(value) <= string_limit(key, -1):
                continue
        elif kind is int:
            if 0 <= value <= int_limit(key, -1):
                continue
        elif kind is float:
            if 0.0 <= value <= 1.0 and key in _DOUBLE_KEYS:  # also refuses NaN
                continue
        elif kind is list and not value and key in _LIST_KEYS:
            continue
        if value is not None and (problem := _problem(key, value)) is not None:
            raise Rejected(f"{where}: attribute {key} {problem}")
    record = MutationRecord(attrs, span.end_time_ns)
    if not record.kind:
        raise Rejected(f"{where}: attribute {semconv.MUTATION_KIND} is empty")
    if record.decision not in _DECISIONS:
        sent = attrs.get(semconv.DECISION)
        shown = "nothing" if sent is None else repr(sent)
        raise Rejected(f"{where}: attribute {semconv.DECISION} must be one of {', '.join(DECISIONS)}, got {shown}")
    if record.sequence == 0:
        raise Rejected(f"{where}: attribute {semconv.SEQUENCE} must be >= 1, got 0")
    if record.lost > record.before:
        raise Rejected(f"{where}: {semconv.LITERALS_LOST} ({record.lost}) exceeds {semconv.LITERALS_BEFORE} "
                       f"({record.before})")
    if not record.loop_id:  # the resource's, by the one fallback rule (checked as a string first)
        resource = {semconv.LOOP_ID: _resource_string(span, semconv.LOOP_ID)}
        record.loop_id = semconv.resolve_loop_id(attrs, resource) or ""
        if not record.loop_id:
            raise Rejected(f"{where}: no {semconv.LOOP_ID} on the span or its resource")
    if not record.service:
        record.service = _resource_string(span, RESOURCE_SERVICE_NAME)
    return record
