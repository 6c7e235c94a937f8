"""Every telemetry name ctxwatch emits: the span name, span attributes, metric instruments, units.

This module is the wire contract (DESIGN.md, "Wire contract"); docs/telemetry.md documents it and
the monitor reads it. It holds names and small pure helpers only — no OpenTelemetry import.

GenAI semantic conventions: the reused `gen_ai.*` and `error.type` names follow semantic-conventions
v1.41.0 (the last release carrying the GenAI conventions in the main repository) by default. With
``OTEL_SEMCONV_STABILITY_OPT_IN`` containing ``gen_ai_latest_experimental`` the names come from the
GenAI repository (open-telemetry/semantic-conventions-genai). No name we reuse differs between the
two today, so the switch changes the schema URL only; `GenAINames` is where a future rename lands.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from .report import COMPACTION_KINDS as _COMPACTION_KINDS
from .report import INVARIANTS, MUTATION_KINDS

INSTRUMENTATION_NAME = "ctxwatch"

# --- schema URLs and environment variables -----------------------------------------------------
SCHEMA_URL_V1_41 = "https://opentelemetry.io/schemas/1.41.0"
# The schema URL the GenAI repository's model/manifest.yaml publishes (it has no tagged schema yet).
SCHEMA_URL_GENAI_LATEST = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"

ENV_STABILITY_OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"
GENAI_LATEST_EXPERIMENTAL = "gen_ai_latest_experimental"
ENV_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Values of ENV_CAPTURE_CONTENT that turn span content capture on (case-insensitive): the boolean
# form of the v1.41.0-era instrumentations and the span modes of the latest ones.
CAPTURE_CONTENT_ON = frozenset({"true", "span_only", "span_and_event"})

# --- span --------------------------------------------------------------------------------------
SPAN_NAME_PREFIX = "ctxwatch"


def span_name(kind: str) -> str:
    """The span name for a mutation kind: ``ctxwatch {kind}`` (kind already bounded)."""
    return f"{SPAN_NAME_PREFIX} {kind}"


# ctxwatch attributes (span). Given by the caller when the attempt starts: loop id, kind, pass number
# and cap, service, agent, conversation. (The span itself is started once the decision is known, with
# these and the report's attributes together, so samplers see all of them.)
LOOP_ID = "ctxwatch.loop.id"
MUTATION_KIND = "ctxwatch.mutation.kind"
PASS_NUMBER = "ctxwatch.pass.number"
PASS_CAP = "ctxwatch.pass.cap"
SERVICE_NAME = "ctxwatch.service.name"
# From the guard's report.
DECISION = "ctxwatch.decision"
HASH_DISTANCE = "ctxwatch.hash.distance"
LITERALS_BEFORE = "ctxwatch.literals.before"
LITERALS_LOST = "ctxwatch.literals.lost"
LITERALS_HIDDEN = "ctxwatch.literals.hidden"   # instead of LITERALS_LOST on an opaque rewrite (loss unknown)
ORPHANS_TOOL_USE = "ctxwatch.orphans.tool_use"
ORPHANS_TOOL_RESULT = "ctxwatch.orphans.tool_result"
VIOLATIONS = "ctxwatch.violations"
WARNINGS = "ctxwatch.warnings"
CONTRACTION_STATE = "ctxwatch.contraction.state"
EPISODE = "ctxwatch.episode"
# From the telemetry layer, per loop and episode: what lets a consumer order a loop's spans whatever
# their arrival order, notice a gap (a span sampled out or lost) and know the guard's detector state.
SEQUENCE = "ctxwatch.sequence"                 # 1, 2, ... for every span of the loop in the episode
CONTRACTION_CYCLE = "ctxwatch.contraction.cycle"  # the guard's detector cycles in its run, after this one
CONTRACTION_RUN = "ctxwatch.contraction.run"   # the guard's detector run: how many times new_episode() reset it
GUARD_INSTANCE = "ctxwatch.guard.instance.id"  # whose numbering: a UUID per guard process and loop
MESSAGES_BEFORE = "ctxwatch.messages.before"
MESSAGES_AFTER = "ctxwatch.messages.after"
SIZE_BEFORE = "ctxwatch.size.before"
SIZE_AFTER = "ctxwatch.size.after"
# The agent's own count of the tokens in its context before the mutation, as its session file records it
# (Claude Code's compactMetadata.preTokens / microcompactMetadata.preTokens): a figure, never content.
TOKENS_BEFORE = "ctxwatch.tokens.before"
RESIDUAL_PRESSURE = "ctxwatch.pass.residual_pressure"
DEFERRAL_ID = "ctxwatch.deferral.id"
DEFERRAL_RESOLUTION = "ctxwatch.deferral.resolution"
OBSERVED = "ctxwatch.mutation.observed"
# What a mutation costs the provider's prompt cache (ctxwatch.cache): consumed context the change the agent
# now uses invalidates, and the provider's own figures of the response observed before the span.
CACHE_INVALIDATED_CHARS = "ctxwatch.cache.invalidated.chars"
CACHE_INVALIDATED_TOKENS = "ctxwatch.cache.invalidated.tokens"
CACHE_READ_TOKENS = "ctxwatch.cache.read.tokens"
CACHE_CREATION_TOKENS = "ctxwatch.cache.creation.tokens"
CACHE_FIGURES: tuple[str, ...] = (CACHE_INVALIDATED_CHARS, CACHE_INVALIDATED_TOKENS, CACHE_READ_TOKENS,
                                  CACHE_CREATION_TOKENS)
SHADOW = "ctxwatch.mutation.shadow"
# Opt-in content (only with content capture on).
LOST_LITERAL_VALUES = "ctxwatch.literals.lost_values"
FINDING_EVENT = "ctxwatch.guard.finding"
FINDING_INVARIANT = "ctxwatch.invariant"
FINDING_ACTION = "ctxwatch.finding.action"
FINDING_MESSAGE = "ctxwatch.finding.message"
MAX_CAPTURED_LITERALS = 64

# Metric-only attributes.
INVARIANT = FINDING_INVARIANT
ORPHAN_SIDE = "ctxwatch.orphan.side"
TELEMETRY_STAGE = "ctxwatch.telemetry.stage"
ORPHAN_SIDES: tuple[str, ...] = ("tool_use", "tool_result")

# Mutation kinds whose applied (patch) decision marks the conversation as compacted (`report`'s set).
COMPACTION_KINDS = _COMPACTION_KINDS

# --- bounded values ----------------------------------------------------------------------------
OVERFLOW = "_OTHER"          # the value past a cap, and for any value outside a closed set
MAX_LABEL_VALUES = 100       # distinct agent / service names at once before overflow (guard and monitor)
MAX_LABEL_LENGTH = 128       # a longer agent / service name is recorded as OVERFLOW on metrics
# Agent versions (the `agent_version` label): releases come often (Claude Code: several a week), so fewer
# values at once, freed when no span carried them for a while (the monitor's label_ttl), and only version-like
# strings: anything else (control characters, spaces, quotes, longer than MAX_VERSION_LENGTH) is OVERFLOW.
MAX_VERSION_VALUES = 20
MAX_VERSION_LENGTH = 32
_VERSION_CHARACTERS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.+-_")


def bounded_kind(kind: str) -> str:
    """`kind` if it is a known mutation kind, else `OVERFLOW`."""
    return kind if kind in _KINDS else OVERFLOW


def is_version_label(value: str) -> bool:
    """Whether `value` may be an `agent_version` label value: 1 to `MAX_VERSION_LENGTH` characters of
    ``[0-9A-Za-z.+_-]`` (semantic versions, ``0.104.0-alpha.1``, ``2.1.39``); else it is recorded as OVERFLOW."""
    return 0 < len(value) <= MAX_VERSION_LENGTH and _VERSION_CHARACTERS.issuperset(value)


def bounded_invariant(invariant: str) -> str:
    """`invariant` if it is a known invariant id, else `OVERFLOW`."""
    return invariant if invariant in _INVARIANT_SET else OVERFLOW


_KINDS = frozenset(MUTATION_KINDS)
_INVARIANT_SET = frozenset(INVARIANTS)


def is_applied_rewrite(kind: str, decision: str) -> bool:
    """Whether a mutation is an applied rewrite, what the `ctxwatch.rewrite.*` histograms describe.

    An applied rewrite is any mutation but an appended turn that took effect: decision patch, observed
    changes included. Refused proposals (defer, abort, halt) did not change the context: their figures
    are on their spans, and leaving them out keeps an agent that retries a refused rewrite from weighting
    the distributions with its retries. Guard telemetry and the monitor both decide with this one rule."""
    return decision == "patch" and kind != "append"


def feeds_detector(kind: str, decision: str, hash_distance: float | None) -> bool:
    """Whether a mutation was a cycle of the contraction detector: it carries the cycle's hash distance,
    which the guard computes only when it runs the contraction check (an applied rewrite, or the halt that
    check decides). Appends, refused rewrites, elisions (`deferral.elides_only`: they write nothing of their
    own) and opaque rewrites (`ctxwatch.cycles`: their loss is unknown, the span carries
    ``ctxwatch.literals.hidden`` instead) carry none. The guard's telemetry counts the detector's
    cycles with this rule (``ctxwatch.contraction.cycle``) and the monitor feeds its detector with it."""
    return hash_distance is not None and kind != "append" and decision in ("patch", "halt")


def detector_life(run: int | None, episode: int) -> tuple[int, int]:
    """Which life of a loop's contraction detector a span belongs to: its detector run
    (``ctxwatch.contraction.run``). The detector lives for the loop (the guard's life): a session boundary
    starts a new episode but keeps the detector, and only ``ContextGuard.new_episode()`` (the rewrite policy
    fixed after a halt) starts a new run. A guard that sends no run (one made before runs existed) started
    its detector afresh with every episode, so its episode is the life. The guard's telemetry counts
    ``ctxwatch.contraction.cycle`` per life and the monitor starts its detector afresh when it changes."""
    return (run, 0) if run is not None else (-1, episode)


# --- GenAI names -------------------------------------------------------------------------------
@dataclass(frozen=True)
class GenAINames:
    """The standard attribute names reused from one version of the GenAI conventions."""

    version: str
    schema_url: str
    agent_name: str = "gen_ai.agent.name"
    conversation_id: str = "gen_ai.conversation.id"
    agent_version: str = "gen_ai.agent.version"
    # Not in v1.41.0 (added by the GenAI repository); there is no older name it could clash with,
    # so it is emitted in both modes, and only as `true`.
    conversation_compacted: str = "gen_ai.conversation.compacted"
    error_type: str = "error.type"


GENAI_V1_41 = GenAINames(version="1.41.0", schema_url=SCHEMA_URL_V1_41)
GENAI_LATEST = GenAINames(version="latest_experimental", schema_url=SCHEMA_URL_GENAI_LATEST)


def genai_names(environ: Mapping[str, str] = os.environ) -> GenAINames:
    """The GenAI names selected by ``OTEL_SEMCONV_STABILITY_OPT_IN`` (v1.41.0 unless opted in)."""
    opted = {v.strip().lower() for v in environ.get(ENV_STABILITY_OPT_IN, "").split(",")}
    return GENAI_LATEST if GENAI_LATEST_EXPERIMENTAL in opted else GENAI_V1_41


def capture_content_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content on spans."""
    return environ.get(ENV_CAPTURE_CONTENT, "").strip().lower() in CAPTURE_CONTENT_ON


def resolve_loop_id(span_attributes: Mapping[str, object],
                    resource_attributes: Mapping[str, object] | None = None) -> str | None:
    """The loop a span belongs to: the span's ``ctxwatch.loop.id``, else the resource's, else None."""
    for attrs in (span_attributes, resource_attributes or {}):
        value = attrs.get(LOOP_ID)
        if isinstance(value, str) and value:
            return value
    return None


# --- the attribute registry (what docs/telemetry.md documents, what tests check) ----------------
@dataclass(frozen=True)
class AttributeSpec:
    """One span attribute: name, OTel type, and when it is set."""

    name: str
    type: str   # string | int | double | boolean | string[]
    when: str


_G = GENAI_V1_41
AGENT_VERSION = _G.agent_version  # also read from the resource when a guard is given no version (`loop_ids`)
SPAN_ATTRIBUTES: tuple[AttributeSpec, ...] = (
    AttributeSpec(LOOP_ID, "string", "caller; omitted when the caller gives no loop id (resource fallback)"),
    AttributeSpec(MUTATION_KIND, "string", "caller"),
    AttributeSpec(PASS_NUMBER, "int", "caller"),
    AttributeSpec(PASS_CAP, "int", "caller, when a cap is configured"),
    AttributeSpec(SERVICE_NAME, "string", "caller, when the caller names a service"),
    AttributeSpec(_G.agent_name, "string", "caller, when the caller names the agent"),
    AttributeSpec(_G.conversation_id, "string", "caller, when the caller gives a real conversation id"),
    AttributeSpec(_G.agent_version, "string", "caller, when the caller knows the agent's version (ContextGuard "
                  "agent_version; ctxwatch watch and replay --otlp: the session file's)"),
    AttributeSpec(DECISION, "string", "report"),
    AttributeSpec(HASH_DISTANCE, "double", "report, when the guard computed it"),
    *(AttributeSpec(name, "int", "report") for name in (
        LITERALS_BEFORE, LITERALS_LOST, ORPHANS_TOOL_USE, ORPHANS_TOOL_RESULT,
        MESSAGES_BEFORE, MESSAGES_AFTER, SIZE_BEFORE, SIZE_AFTER)),
    AttributeSpec(LITERALS_HIDDEN, "int", "report, on an opaque rewrite (a provider compaction the guard cannot "
                  "read), instead of ctxwatch.literals.lost"),
    AttributeSpec(TOKENS_BEFORE, "int", "report, when the agent recorded its context's token count before the "
                  "mutation (Claude Code's preTokens, ctxwatch watch and replay --otlp)"),
    AttributeSpec(CACHE_INVALIDATED_CHARS, "int", "report: consumed characters the applied change invalidates "
                  "for the provider's prompt cache (0 on append, defer, abort, halt)"),
    AttributeSpec(CACHE_INVALIDATED_TOKENS, "int", "report: the same, in tokens estimated as ceil(chars / 4)"),
    AttributeSpec(CACHE_READ_TOKENS, "int", "report, when the caller noted the provider's cache reads of a response"),
    AttributeSpec(CACHE_CREATION_TOKENS, "int", "report, when the caller noted the provider's cache writes "
                  "of a response"),
    AttributeSpec(VIOLATIONS, "string[]", "report (empty list when none)"),
    AttributeSpec(WARNINGS, "string[]", "report (empty list when none)"),
    AttributeSpec(CONTRACTION_STATE, "string", "report"),
    AttributeSpec(EPISODE, "int", "report, from the first new_episode() on (absent means 0)"),
    AttributeSpec(SEQUENCE, "int", "telemetry: 1-based, +1 for every span of the loop in the episode"),
    AttributeSpec(CONTRACTION_CYCLE, "int", "telemetry: the guard's detector cycles in its run after this one"),
    AttributeSpec(CONTRACTION_RUN, "int", "telemetry: the guard's detector run, 0 until new_episode() resets it"),
    AttributeSpec(GUARD_INSTANCE, "string", "telemetry: the numbering's instance, a random UUID per process and "
                  "loop (replay and watch: a UUID v5 of the loop id)"),
    AttributeSpec(RESIDUAL_PRESSURE, "int", "report, when the pass cap is reached"),
    AttributeSpec(DEFERRAL_ID, "int", "report, on defer"),
    AttributeSpec(DEFERRAL_RESOLUTION, "string",
                  "report, when a deferred rewrite was applied as whole_pairs, in_place, provider_compaction or as a "
                  "session_boundary"),
    AttributeSpec(OBSERVED, "boolean", "report, true when the change was found already made (observe) or is sent "
                  "as made (adopt); never false"),
    AttributeSpec(SHADOW, "boolean", "report, true in shadow (report-only) mode: the decision is what the guard "
                  "would have done, the caller's context was used unchanged; never false"),
    AttributeSpec(_G.conversation_compacted, "boolean", "report, true on an applied compact/prune; never false"),
    AttributeSpec(_G.error_type, "string", "report, on abort and halt; on an attempt that raised"),
    AttributeSpec(LOST_LITERAL_VALUES, "string[]", "report, content capture on and literals lost"),
)


# --- metric instruments ------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricSpec:
    """One metric instrument: name, instrument kind, UCUM unit, attribute keys, bucket advice."""

    name: str
    instrument: str            # counter (an observable one, see telemetry.tally) | histogram
    unit: str
    attributes: tuple[str, ...]
    description: str
    buckets: tuple[float, ...] | None = None


_BASE = (MUTATION_KIND, DECISION, _G.agent_name, SERVICE_NAME)
_DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                     0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_FRACTION_BUCKETS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
_PASS_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)
# fine around where coding agents compact on their own (Claude Code: ~150k-175k tokens)
_TOKEN_BUCKETS = (10_000, 25_000, 50_000, 75_000, 100_000, 125_000, 150_000, 160_000, 170_000, 180_000,
                  200_000, 250_000, 500_000, 1_000_000)

MUTATIONS = MetricSpec("ctxwatch.mutations", "counter", "{mutation}", (*_BASE, _G.agent_version),
                       "Mutation attempts checked by the guard, by kind and decision (and agent version, when known).")
LOST_LITERALS = MetricSpec("ctxwatch.lost_literals", "counter", "{literal}", _BASE,
                           "Protected literals a proposed rewrite would drop (applied or refused).")
ORPHANED_TOOL_PARTS = MetricSpec("ctxwatch.orphaned_tool_parts", "counter", "{part}", (ORPHAN_SIDE, *_BASE),
                                 "tool_use / tool_result parts a proposed rewrite would leave unpaired.")
DEFERRALS = MetricSpec("ctxwatch.deferrals", "counter", "{rewrite}",
                       (MUTATION_KIND, _G.agent_name, SERVICE_NAME),
                       "Rewrites deferred to the next session boundary.")
INVARIANT_VIOLATIONS = MetricSpec("ctxwatch.invariant_violations", "counter", "{violation}",
                                  (INVARIANT, *_BASE),
                                  "Enforced findings (the mutation was deferred, aborted or halted).")
INVARIANT_WARNINGS = MetricSpec("ctxwatch.invariant_warnings", "counter", "{warning}",
                                (INVARIANT, MUTATION_KIND, _G.agent_name, SERVICE_NAME),
                                "Findings that were only reported (the mutation went ahead).")
TELEMETRY_ERRORS = MetricSpec("ctxwatch.telemetry.errors", "counter", "{error}",
                              (TELEMETRY_STAGE, _G.error_type),
                              "Errors inside ctxwatch telemetry or its exporters (never raised).")
GUARD_DURATION = MetricSpec("ctxwatch.guard.duration", "histogram", "s", _BASE,
                            "Time the guard spent checking one mutation.", _DURATION_BUCKETS)
HASH_DISTANCE_HISTOGRAM = MetricSpec("ctxwatch.rewrite.hash_distance", "histogram", "1", _BASE,
                                     "Fingerprint distance d_t of each applied rewrite (0..1).",
                                     _FRACTION_BUCKETS)
LITERAL_LOSS_RATE = MetricSpec("ctxwatch.rewrite.literal_loss_rate", "histogram", "1", _BASE,
                               "Literal-loss rate r_t = lost / literals before of each applied rewrite with literals.",
                               _FRACTION_BUCKETS)
PASS_NUMBER_HISTOGRAM = MetricSpec("ctxwatch.rewrite.pass_number", "histogram", "{pass}", _BASE,
                                   "Pass number of each applied rewrite.", _PASS_BUCKETS)
TOKENS_BEFORE_HISTOGRAM = MetricSpec("ctxwatch.rewrite.tokens_before", "histogram", "{token}",
                                     (MUTATION_KIND, _G.agent_name, SERVICE_NAME),
                                     "Tokens in the context before each applied rewrite, as the agent counted them "
                                     "(ctxwatch.tokens.before; Claude Code's preTokens).", _TOKEN_BUCKETS)

METRICS: tuple[MetricSpec, ...] = (
    MUTATIONS, LOST_LITERALS, ORPHANED_TOOL_PARTS, DEFERRALS, INVARIANT_VIOLATIONS, INVARIANT_WARNINGS,
    TELEMETRY_ERRORS, GUARD_DURATION, HASH_DISTANCE_HISTOGRAM, LITERAL_LOSS_RATE, PASS_NUMBER_HISTOGRAM,
    TOKENS_BEFORE_HISTOGRAM,
)

# Prometheus label the monitor uses for each metric attribute key (DESIGN.md: bounded labels).
PROMETHEUS_LABELS: dict[str, str] = {
    MUTATION_KIND: "kind", DECISION: "decision", _G.agent_name: "agent", SERVICE_NAME: "service",
    _G.agent_version: "agent_version",
    INVARIANT: "invariant", ORPHAN_SIDE: "side", TELEMETRY_STAGE: "stage", _G.error_type: "error_type",
}

_UNIT_SUFFIX = {"s": "_seconds", "By": "_bytes"}


def prometheus_name(spec: MetricSpec) -> str:
    """The Prometheus family name of an instrument: dots to underscores, base-unit suffix, `_total`
    on counters (annotation units like ``{mutation}`` and ``1`` add no suffix)."""
    name = spec.name.replace(".", "_") + _UNIT_SUFFIX.get(spec.unit, "")
    return name + "_total" if spec.instrument == "counter" else name
