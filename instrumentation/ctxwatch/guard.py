"""`ContextGuard`: one per agent loop; checks every context mutation before it is applied.

The guard holds what the model has consumed (`ConsumedState`: the context, its generation
boundary and everything derived from it), the tool-schema registry, the plan, the pinned policy,
the provenance log, the deferral queue and the loop's contraction detector. `check()` evaluates a
proposed context against every invariant into one immutable `Evaluation` (no side effects), takes
the decision patch / defer / abort / halt from it, and only then commits: on patch the guard's
state moves to the proposal (one step: context, detector, pass count, provenance). `resolve()`
also settles a deferred rewrite by the guard's deferral mode and returns the context to use;
`apply()` returns it or raises the record's error. In shadow mode nothing is changed or refused:
the caller's proposal is used and the report and span say what the guard would have done.

Every report says what the change the agent now uses invalidates of the provider's prompt cache
(`ctxwatch.cache`: nothing on a refusal or a deferral) and carries the provider's own cache figures noted
since the guard's last span (`note_provider_cache`).

Turns the caller appended after its last `observe()` and before proposing a rewrite (a tool call
and its result, appended before compacting) are found by position in the list it extended
(`ctxwatch.unobserved`) and taken as appended first: the rewrite is evaluated on top of them, a
conversion keeps them verbatim, a refusal and `messages` hand them back, and a proposal that does
not end with them is settled like a rewrite of the consumed prefix, its tool pairs judged with them
kept after it (a summary of a stale copy is not refused for the call whose result came since).

Checks fail closed: an exception inside a check becomes an aborting finding for that invariant.
Telemetry fails open: it is observed through `MutationTelemetry`, which never raises.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from . import cache as prompt_cache
from . import decision as decisions
from . import semconv
from .config import DEFAULT_PASS_CAP, GuardConfig, check_deferral, check_on_refusal
from .contraction import ContractionDetector, CycleVerdict, DetectorConfig
from .cycles import OPAQUE, hides_rewritten_content, measure_cycle, no_cycle_reason
from .deferral import (
    Conversion,
    DeferralQueue,
    carried_text,
    results_cleared_in_place,
    whole_pair_conversion,
)
from .diff import Change
from .directives import DEFAULT_MARKERS
from .errors import InvalidContextError
from .evaluation import Evaluation, size_after
from .fingerprint import Fingerprinter
from .formats import FormatBridge, copy_shape, extended, tail_items
from .invariants.directive_colocation import check_colocation
from .invariants.literal_loss import check_literal_loss, literal_diff
from .invariants.order import check_order
from .invariants.pairing import check_pairing, index_pairs, index_pairs_after, introduced_orphans, strict_for
from .invariants.plan import Plan, check_barrier, check_plan, pin_lines
from .invariants.policy import PolicyRegion, PolicySelector, check_pass_cap
from .invariants.prefix import check_prefix, check_rerender, check_unread_tail, with_unread_tail
from .invariants.schemas import SchemaRegistry, check_schemas
from .kinds import classify
from .literals import LiteralRegistry
from .loop_ids import default_loop_id, resource_agent_version
from .model import SYSTEM_ROLES, Context, Message, TextPart, ToolSchema
from .provenance import ProvenanceLog
from .report import MUTATION_KINDS, Finding, Report
from .state import ConsumedState
from .telemetry import MutationTelemetry
from .unobserved import CallerLists, read_tail

log = logging.getLogger("ctxwatch")

_SHARED_TELEMETRY: MutationTelemetry | None = None
# what a trusted edit (`ContextGuard.adopt(trusted=True)`: the caller's own configuration, such as a
# system prompt set per call) breaks by its nature, so only reported: record 000's prefix, record 001's policy
TRUSTED_EDIT_WARNS = ("prefix_identity", "policy_isolation")
F = TypeVar("F", bound=Callable[..., Any])


def _default_telemetry() -> MutationTelemetry:
    global _SHARED_TELEMETRY
    if _SHARED_TELEMETRY is None:
        _SHARED_TELEMETRY = MutationTelemetry()
    return _SHARED_TELEMETRY


@dataclass(frozen=True)
class _Outcome:
    """What the guard settles on for one attempt: the evaluation the decision comes from, the context it
    stands for (model and caller form) and how a deferral was resolved (None: the proposal itself)."""

    evaluation: Evaluation
    raw: Any
    resolution: str | None = None
    conversion: Conversion | None = None


class ContextGuard:
    """Guards one agent loop's context window. See the module docstring and README.

    Parameters (all keyword-only but `loop_id`):
      loop_id: identifies the loop in telemetry and the monitor; when omitted, the process's loop id on
        the resource (`ctxwatch.loop_ids`), else a random one.
      agent / service / conversation_id: reported in telemetry (conversation id only when real).
      agent_version: the agent's version, reported in telemetry (a bounded metric label, docs/telemetry.md);
        when omitted, ``gen_ai.agent.version`` of the process's resource (`ctxwatch.loop_ids`), if any.
      format: the message format ("openai_chat", "openai_responses", "anthropic", "langchain",
        "ctxwatch"); detected from the first input when omitted.
      tools: the tool definitions offered to the model (any supported format, or ToolSchema).
      policy: pinned policy messages, by message ids or a predicate ``(index, message) -> bool``;
        resolved on the first observed context and immutable for the episode (pinned again on a
        change `observe` adopts and at every new episode).
      literals: the literal registry (defaults to the built-in patterns).
      config: every other setting as one `GuardConfig`; or give them as keywords (the same names):
        pass_cap, budget, enforce, detector, directive_markers, deferral, shadow, elision_role.
    """

    def __init__(self, loop_id: str | None = None, *, agent: str | None = None, service: str | None = None,
                 conversation_id: str | None = None, agent_version: str | None = None, format: str | None = None,
                 tools: Iterable[Any] | None = None, policy: PolicySelector | None = None,
                 literals: LiteralRegistry | None = None, config: GuardConfig | None = None,
                 pass_cap: int | None = DEFAULT_PASS_CAP, budget: int | None = None,
                 enforce: Mapping[str, str] | None = None, detector: DetectorConfig | None = None,
                 directive_markers: Sequence[str] = DEFAULT_MARKERS, deferral: str = "auto",
                 shadow: bool = False, elision_role: str = "user",
                 telemetry: MutationTelemetry | None = None) -> None:
        keywords = GuardConfig(pass_cap=pass_cap, budget=budget, enforce=enforce or {},
                               detector=detector or DetectorConfig(), directive_markers=directive_markers,
                               deferral=deferral, shadow=shadow, elision_role=elision_role)
        if config is not None and keywords != GuardConfig():
            raise ValueError("give the guard's settings either as config=GuardConfig(...) or as keywords, not both")
        self.config = config or keywords
        self.literals = literals or LiteralRegistry()
        tools = None if tools is None else list(tools)
        self._settings: dict[str, Any] = {"agent": agent, "service": service, "agent_version": agent_version,
                                          "format": format, "tools": tools, "policy": policy,
                                          "literals": literals, "config": self.config, "telemetry": telemetry}
        self.telemetry = telemetry if telemetry is not None else _default_telemetry()
        self.loop_id = loop_id or default_loop_id(self.telemetry.tracer_provider)
        self.telemetry.new_run(self.loop_id)  # a new guard, episodes from 0: a new run of the loop's numbering
        self.agent, self.service, self.conversation_id = agent, service, conversation_id
        self.agent_version = agent_version or resource_agent_version(self.telemetry.tracer_provider)

        self.bridge = FormatBridge(format)
        self.registry = SchemaRegistry()
        if tools is not None:
            self.registry.activate(self.bridge.tools(tools))
        self.plan = Plan(self.literals)
        self.policy = PolicyRegion(policy, self.literals)
        self.provenance = ProvenanceLog()
        self.deferred = DeferralQueue()
        self.detector = ContractionDetector(self.config.detector)
        self._fingerprinter = Fingerprinter()
        self._state = ConsumedState(self._fingerprinter.buffer(()))
        self._callers = CallerLists()  # the caller's lists the guard's context is the start of
        self._fp_last_rewrite: Any = None
        self._in_flight: list[str] = []
        self.passes_used = 0
        self.episode = 0
        self.detector_run = 0  # how many times new_episode() started the detector afresh (a boundary keeps it)
        self._elisions = 0
        self._markers: frozenset[str] = frozenset()  # the texts of its plain elision markers in the context
        self.halted_at: int | None = None
        self._provider_cache: prompt_cache.ProviderCache | None = None  # reported, not yet on a span

    def sibling(self, conversation_id: str) -> ContextGuard:
        """A guard made as this one was, for another conversation of the same agent: its own loop
        (``<loop_id>/<conversation_id>``) and state, this guard's settings and telemetry."""
        return ContextGuard(f"{self.loop_id}/{conversation_id}", conversation_id=conversation_id,
                            **self._settings)

    def renewed(self) -> ContextGuard:
        """A guard made as this one was, for this guard's conversation begun again with none of its
        history: the same loop id, conversation id, settings and telemetry, fresh state, numbered as a
        new run of the loop (as every new `ContextGuard` is)."""
        return ContextGuard(self.loop_id, conversation_id=self.conversation_id, **self._settings)

    # --- read-only views ----------------------------------------------------------------------
    @property
    def pass_cap(self) -> int | None:
        """The pinned pass cap (fixed when the guard is made)."""
        return self.config.pass_cap

    @property
    def budget(self) -> int | None:
        return self.config.budget

    @property
    def enforcement(self) -> Mapping[str, str]:
        """The enforcement table: one action per invariant."""
        return self.config.enforce

    @property
    def context(self) -> Context:
        return self._state.context

    @property
    def messages(self) -> Any:
        """The current context in the caller's format and shape (a list, or an Anthropic request dict),
        with the turns the caller appended since (to the list it observed or was handed back) at the end.
        Objects the caller edited in place after the guard checked them are replaced by the guard's
        rendering of the checked message (the guard keeps its own immutable copy)."""
        messages, raw, _ = self._with_appended()
        context = self.bridge.checked(messages, raw)
        self._callers.add(context, self._known_items)
        return context

    @property
    def pending_calls(self) -> set[str]:
        return set(self._state.pairs.pending)

    # --- observing what the model consumed ---------------------------------------------------------
    def observe(self, messages: Sequence[Any], *, boundary: int | None = None, rendered: Any = None,
                tools: Iterable[Any] | None = None, kind: str = "rewrite") -> Report | None:
        """Record that the model has consumed `messages` (up to `boundary`, default all of them).

        `rendered` is the exact prompt the model consumed (str, bytes or token ids), when the runtime
        renders it: a later proposal with the same messages must render to the same leading bytes.
        Appended messages are reported as one append span. If `messages` is not an extension of the
        context the guard knows, the agent changed it without the guard (or a server edited it, e.g.
        provider-side context editing): that mutation is evaluated as `kind`, reported and adopted,
        since the model has already consumed it; the report is returned.
        """
        proposed = self.bridge.to_model(messages)
        if boundary is not None and not (type(boundary) is int and 0 <= boundary <= len(proposed)):
            shown = boundary if type(boundary) is int and abs(boundary) < 10**9 else type(boundary).__name__
            raise ValueError(f"boundary must be a message count in 0..{len(proposed)} (the observed context), "
                             f"got {shown}")
        if tools is not None:
            self.registry.activate(self.bridge.tools(tools))
        state = self._state
        change = Change.between(state.context, proposed, "append", state.digests)
        report = None
        if state.context.messages and not change.is_append_only:
            report, _ = self._attempt(proposed, messages, kind=kind, tools=None, rendered=None, adopt=True)
            level = logging.WARNING if report.violations else logging.DEBUG
            log.log(level, "ctxwatch: loop %s: the context changed outside the guard\n%s", self.loop_id,
                    report.explain(values=self.telemetry.capture_content))
        elif len(proposed) > len(state.context):
            self._record_append(change, messages)
        elif state.context.messages:  # the same messages, perhaps new objects with a moved cache breakpoint:
            state.context = Context(proposed, state.context.boundary)  # handed back as the caller holds them now
            state.raw = copy_shape(messages)
        state = self._state
        state.with_boundary(len(proposed) if boundary is None else boundary, rendered)
        self._callers.observed(messages)
        return report

    def _record_append(self, change: Change, raw: Any) -> None:
        """Commit observed growth and emit its append span (so a loop is visible from its first turn)."""
        handle = self.telemetry.start(loop_id=self.loop_id, kind="append", agent=self.agent,
                                      conversation_id=self.conversation_id, service=self.service,
                                      agent_version=self.agent_version,
                                      pass_number=self.passes_used, pass_cap=self.pass_cap)
        started = time.perf_counter()
        before = self._state.context
        size_before = self._state.size
        self._state.advance(change, raw, rewrite=False, strict=self._strict, literals=self._literal_upkeep,
                            track_fingerprint=self.config.tracks_fingerprint)
        self._after_commit(change.after)
        handle.end(self._with_costs(Report(
            loop_id=self.loop_id, kind="append", decision="patch", findings=[], messages_before=len(before),
            messages_after=len(change.after), pass_number=self.passes_used, pass_cap=self.pass_cap,
            agent=self.agent, conversation_id=self.conversation_id, size_before=size_before,
            size_after=self._state.size, literals_before=len(self._state.literal_counts),
            contraction_state=self.detector.state, episode=self.episode, detector_run=self.detector_run,
            duration_s=time.perf_counter() - started), None))

    def note_provider_cache(self, figures: prompt_cache.ProviderCache) -> None:
        """The provider's prompt-cache figures of a response (`ctxwatch.cache` reads them from each provider's
        ``usage``). They go on the next span the guard emits for the loop — the append of the answer, when
        it is observed next — so each response is counted once; figures of several responses noted before
        that span are added up. The integrations call this; call it yourself with your own client."""
        if figures:
            self._provider_cache = prompt_cache.added(self._provider_cache, figures)

    def _with_costs(self, report: Report, applied: Change | None) -> Report:
        """`report` with what `applied` (the change the agent now uses; None: nothing was applied)
        invalidates of the provider's prompt cache, and the provider figures noted since the last span."""
        if applied is not None:
            cost = prompt_cache.invalidated(applied)
            report.invalidated_chars, report.invalidated_tokens = cost.chars, cost.tokens
        figures, self._provider_cache = self._provider_cache, None
        if figures is not None:
            report.cache_read_tokens, report.cache_creation_tokens = figures.read_tokens, figures.creation_tokens
        return report

    @contextmanager
    def in_flight(self, label: str = "write") -> Iterator[None]:
        """Mark an operation (a write, a side effect) as in flight: no rewrite until it ends (record 004)."""
        self._in_flight.append(label)
        try:
            yield
        finally:
            self._in_flight.remove(label)

    # --- checking and applying ----------------------------------------------------------------------
    def check(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
              rendered: Any = None, current: Sequence[Any] | None = None) -> Report:
        """Evaluate a proposed context; never raises for a violation. Records the attempt: on patch the
        guard assumes the agent uses the proposal; on defer the proposal is queued; anything else leaves
        the guard as it was. `current`: the caller's context now, for a loop that builds a new list each
        turn (see `resolve`)."""
        appended = self._appended_in(current)
        model = self.bridge.to_model(proposed)
        schema_list = self.bridge.tools(tools) if tools is not None else None
        return self._attempt(model, proposed, kind=kind, tools=schema_list, rendered=rendered, adopt=False,
                             appended=appended)[0]

    def adopt(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
              current: Sequence[Any] | None = None, trusted: bool = False) -> Report:
        """A context the caller sends to the model as it is — an edit the guard can report but not change
        (a client's own compaction passed through a wrapped SDK call): checked like `check`, one report
        and span. On abort or halt nothing changes (the caller decides whether it still goes out;
        `raise_for` raises the record's error). Otherwise the guard takes it on as the context in use, as
        `observe` takes on a change made outside it: decision patch, ``report.observed``, the findings
        kept — a change of the consumed prefix is reported, not deferred, since the model reads the edit
        as made. Turns appended before the edit are taken as appended first, as in `check` (`current`
        as in `resolve`).

        `trusted`: the edit is the caller's own configuration, not a rewrite of history by the agent (a
        system prompt the application sets per call, e.g. LangChain's ``dynamic_prompt`` middleware): what
        records 000 and 001 say of it — the consumed prefix and the pinned policy changed — is reported as
        warnings, not violations (an invariant set to "off" stays off); the policy region is then pinned
        on it (`TRUSTED_EDIT_WARNS`). Every other check still refuses as configured."""
        appended = self._appended_in(current)
        model = self.bridge.to_model(proposed)
        schema_list = self.bridge.tools(tools) if tools is not None else None
        return self._attempt(model, proposed, kind=kind, tools=schema_list, rendered=None, adopt=True,
                             refusable=True, appended=appended, trusted=trusted)[0]

    def resolve(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
                rendered: Any = None, deferral: str | None = None, shadow: bool | None = None,
                current: Sequence[Any] | None = None) -> tuple[Report, Any]:
        """Check `proposed` and settle what the agent should use now: ``(report, context)``.

        patch: the proposal. A rewrite that would be deferred is settled by the deferral mode (the
        guard's, or `deferral` for this call): "whole_pairs" (and "auto" for compact and prune) turn it
        into whole-pair compaction within the same attempt (decision patch, ``report.resolution ==
        "whole_pairs"``, the context is that compaction); "session_boundary" applies it whole as the
        start of a new session and episode (``resolution == "session_boundary"``); otherwise defer: the
        current context, the rewrite queued. abort / halt: the current context. In shadow mode (the
        guard's, or `shadow` for this call) the proposal itself, whatever the decision. Turns the
        caller appended since the last `observe` are always part of the context returned: found by
        position in the list it observed (or was handed back) and extended in place, or, given
        `current` (the caller's context now: what the guard last saw followed by the turns appended
        since, for a loop that builds a new list each turn), its items after what the guard last saw
        (a `current` that does not start with that is a ValueError naming the first message that differs).
        Never raises for a violation (`apply` raises).
        """
        appended = self._appended_in(current)
        model = self.bridge.to_model(proposed)
        schema_list = self.bridge.tools(tools) if tools is not None else None
        return self._attempt(model, proposed, kind=kind, tools=schema_list, rendered=rendered, adopt=False,
                             settle=True, deferral=deferral, shadow=shadow, appended=appended)

    def apply(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
              rendered: Any = None, deferral: str | None = None, shadow: bool | None = None,
              current: Sequence[Any] | None = None) -> Any:
        """Check `proposed`; return what the agent should use now (see `resolve`), or raise the record's
        error on abort or halt (never in shadow mode)."""
        report, context = self.resolve(proposed, kind=kind, tools=tools, rendered=rendered, deferral=deferral,
                                       shadow=shadow, current=current)
        self.raise_for(report)
        return context

    def raise_for(self, report: Report) -> None:
        """Raise the record's typed error for an abort or halt (not for a shadow report). The message
        describes literal values by kind and length unless content capture is on."""
        if report.decision in ("abort", "halt") and not report.shadow:
            error = decisions.error_for(report.findings, report.decision)
            raise error(report.explain(values=self.telemetry.capture_content), report)

    def guarded(self, kind: str = "compact", *, on_refusal: str = "raise") -> Callable[[F], F]:
        """Decorator for an existing compaction function ``fn(messages, ...) -> messages``.

        The input is observed if the guard has seen nothing yet; the output goes through `apply`.
        ``on_refusal="keep"`` returns the guard's context (what it checked) instead of raising on abort
        or halt.
        """
        check_on_refusal(on_refusal)

        def wrap(fn: F) -> F:
            @functools.wraps(fn)
            def inner(messages: Any, *args: Any, **kwargs: Any) -> Any:
                if not self._state.context.messages:
                    self.observe(messages)
                result = fn(messages, *args, **kwargs)
                report, context = self.resolve(result, kind=kind)
                if on_refusal == "raise":
                    self.raise_for(report)
                return context
            return inner  # type: ignore[return-value]
        return wrap

    def self_edit(self, new_system_prompt: str) -> Any:
        """A model-requested rewrite of its leading system message: validated as an untrusted proposal."""
        if not isinstance(new_system_prompt, str):
            raise TypeError(f"new_system_prompt must be a str, got {type(new_system_prompt).__name__}")
        current = self._state.context.messages
        if not current or current[0].role not in SYSTEM_ROLES:
            raise InvalidContextError("the context has no leading system message to edit", index=0, field="role")
        edited = Message(current[0].role, [TextPart(new_system_prompt)], id=current[0].id, name=current[0].name)
        proposal = self.bridge.to_caller((edited,) + current[1:], self._state.raw)
        return self.apply(proposal, kind="self_edit")

    # --- deferral and episodes ---------------------------------------------------------------------
    def session_boundary(self, *, current: Sequence[Any] | None = None) -> Report | None:
        """The next model call starts a fresh session (nothing consumed) and a new episode: apply the
        latest deferred rewrite, rebased on what was appended since it was proposed (turns appended to
        the caller's list since the last `observe` included; `current` as in `resolve`). Returns its
        report, if any. The context to use from then on is `messages`:
        ``guard.session_boundary(); messages = guard.messages``."""
        messages, raw, digests = self._with_appended(self._appended_in(current))
        entry = self.deferred.take_latest(digests)
        self._state.with_boundary(0)
        self._next_episode()
        if entry is None:
            return None
        rebased_model = entry.rebase(messages)
        rebased_raw = self.bridge.to_caller(rebased_model, raw)
        return self._attempt(rebased_model, rebased_raw, kind=entry.kind, tools=entry.tools, rendered=None,
                             adopt=False)[0]

    def pin_symbols(self, proposed: Sequence[Any], symbols: Iterable[str]) -> Any:
        """Record 004's *pin*: return `proposed` with the lines of the current context that mention
        `symbols` appended verbatim after the rewrite's new content, so the references survive."""
        if isinstance(symbols, str) or not isinstance(symbols, Iterable):
            raise TypeError(f"symbols must be a collection of strings, got {type(symbols).__name__}")
        model = self.bridge.to_model(proposed)
        change = Change.between(self._state.context, model, "rewrite")
        lines = pin_lines(change.removed_messages, symbols)
        if not lines:
            return copy_shape(proposed)
        pin = Message(self.config.elision_role,
                      [TextPart("[ctxwatch] pinned references, verbatim:\n" + "\n".join(lines))])
        at = (change.added[-1][0] + 1) if change.added else change.prefix_len
        return self.bridge.to_caller(model[:at] + (pin,) + model[at:], proposed)

    def new_episode(self) -> None:
        """Start a new episode after fixing the rewrite policy: as every session boundary does (`_next_episode`),
        and besides the halt is cleared and the contraction detector starts afresh (a new detector run,
        ``ctxwatch.contraction.run``, so the monitor starts its own afresh too): the next cycles are judged on
        their own. A session boundary is no fix: it keeps the detector, its evidence and the halt."""
        self._next_episode()
        self.detector_run += 1
        self.halted_at = None
        self.detector = ContractionDetector(self.detector.config)
        self._fp_last_rewrite = None

    def _next_episode(self) -> None:
        """Start a new episode (every session boundary does): the pass count is reset and the policy region is
        pinned again on the current context; the pinned cap stays. The contraction detector lives for the loop
        (the guard's life, DESIGN "The contraction regime"): its cycles, its state and a halt go on."""
        self.episode += 1
        self.passes_used = 0
        self._state.rewrites_since_turn = 0
        self.policy.repin(self._state.context.messages)  # the episode's policy: what the context holds now

    # --- one attempt: evaluate, decide, commit ------------------------------------------------------
    @property
    def _strict(self) -> bool:
        return strict_for(self.bridge.format)

    @property
    def _literal_upkeep(self) -> LiteralRegistry | None:
        return self.literals if self.config.tracks_literals else None

    def _attempt(self, proposed: tuple[Message, ...], raw: Any, *, kind: str | None,
                 tools: list[ToolSchema] | None, rendered: Any, adopt: bool, settle: bool = False,
                 deferral: str | None = None, shadow: bool | None = None, refusable: bool = False,
                 appended: list[Any] | None = None, trusted: bool = False) -> tuple[Report, Any]:
        """Evaluate, decide and commit one proposal. `adopt`: the guard takes it on whatever the decision
        (observed; with `refusable`, unless it aborts or halts). `settle`: a deferral is settled by the mode.
        `appended`: the turns the caller appended since the guard last saw its context, when it said so
        (`current`); None: found in the lists the guard has seen (`_with_unobserved_tail`). `trusted`: the
        caller's own edit (`adopt`), whose `TRUSTED_EDIT_WARNS` findings only warn."""
        started = time.perf_counter()
        if kind is not None and not (isinstance(kind, str) and kind in MUTATION_KINDS):
            raise ValueError(f"kind must be one of {', '.join(MUTATION_KINDS)}; got {kind!r}")
        deferral = self.config.deferral if deferral is None else check_deferral(deferral)
        shadow = self.config.shadow if shadow is None else shadow
        base = self._with_unobserved_tail(proposed, raw, appended, warn=not adopt)
        change = Change.between(base.context, proposed, kind or "rewrite", base.digests)
        if tools is not None and not self.registry.changes(tools):
            tools = None  # the same tool list sent again (runtimes send it with every request): no change
        rewrite = not change.is_append_only or tools is not None
        # the kind is the one the guard evaluates it as (spans, metrics and the monitor follow it): growth
        # alone (or no change) is an append whatever the caller declared; growth with a new tool list a
        # schema change; anything else the caller does not name is named by `kinds.classify`
        if not rewrite:
            kind = "append"
        elif kind is None or kind == "append":
            kind = "schema_change" if change.is_append_only else classify(base.context.messages, proposed)
            change.declared = False
        change.kind = kind
        handle = self.telemetry.start(loop_id=self.loop_id, kind=kind, agent=self.agent,
                                      conversation_id=self.conversation_id, service=self.service,
                                      agent_version=self.agent_version,
                                      pass_number=self.passes_used + (1 if rewrite else 0), pass_cap=self.pass_cap)
        try:
            evaluation = self._evaluate(base, change, tools, rendered, rewrite, prefix_change_allowed=False,
                                        warn_only=TRUSTED_EDIT_WARNS if trusted else (), sent_as_is=adopt)
            outcome = _Outcome(evaluation, raw)
            if settle and not adopt and evaluation.decision == "defer" and deferral != "queue":
                outcome = self._settle(evaluation, raw, deferral, tools) or outcome
            report = self._report(outcome)
            # what the agent now uses: the change made or the proposal (observed, shadow), the settled one
            # on patch, nothing on a refusal
            applied: Change | None = evaluation.change
            if adopt and not (refusable and report.decision in ("abort", "halt")):
                report.observed = True
                report.decision = "patch"  # the model already consumed it: reported, not refused
                self._commit(evaluation, raw, tools, report)
                context = None
            elif shadow:
                report.shadow = True  # the caller uses its own proposal; the guard follows it, and its detector
                self._commit(evaluation, raw, tools, report, feed=outcome.evaluation)  # is fed as the report says
                context = copy_shape(raw)
            else:
                applied = outcome.evaluation.change if report.decision == "patch" else None
                context = self._carry_out(outcome, report, kind, tools)
            self._note_handed_back(report, context, raw if outcome.raw is raw else None, adopt or not settle)
            self._with_costs(report, applied)
        except BaseException as exc:
            handle.fail(exc)
            raise
        report.duration_s = time.perf_counter() - started
        handle.end(report)
        return report, context

    def _note_handed_back(self, report: Report, context: Any, proposal: Any, kept: bool) -> None:
        """Remember the lists the caller may extend next: on a commit, the context handed back and the
        proposal it stands for; otherwise the context handed back, unless the caller `kept` its own
        (observe() names the caller's list itself; check() hands nothing back)."""
        if report.decision == "patch" or report.shadow:
            self._callers.reset(context, *([] if proposal is None else [proposal]))
        elif not kept:
            self._callers.add(context, self._known_items)

    def _carry_out(self, outcome: _Outcome, report: Report, kind: str, tools: list[ToolSchema] | None) -> Any:
        """Do what the decision says; return the context the agent should use."""
        evaluation = outcome.evaluation
        if report.decision == "patch":
            if outcome.conversion is not None:
                self._elisions += 1  # never reset (not even by new_episode): two markers are never the same
                self._markers = outcome.conversion.markers  # a new marker folds them (deferral.py)
            self._commit(evaluation, outcome.raw, tools, report, session=outcome.resolution == "session_boundary")
            return copy_shape(outcome.raw)
        if report.decision == "defer":  # queued with the unread turns it is rebased on (applied ending with them)
            queued = self._rebased_on_unread(evaluation.change, evaluation.base, self.config.enforce)
            report.deferred_id = self.deferred.push(evaluation.base.context, queued or evaluation.change.after,
                                                    kind, tools)
        elif evaluation.halts_for_contraction and evaluation.verdict is not None:
            if self.halted_at is None:  # the cycle it was halted at; later refused cycles still feed the detector
                self.halted_at = evaluation.verdict.cycle
            self._advance_detector(evaluation)
        return self._checked(evaluation.base)

    def _with_unobserved_tail(self, proposed: tuple[Message, ...], raw: Any, appended: list[Any] | None = None,
                              *, warn: bool = True) -> ConsumedState:
        """The state to evaluate against: the guard's, plus the turns the caller appended since the guard
        last saw its context, as if they had been observed (`unobserved` counts them, and the proposal must
        end with them verbatim: `check_unread_tail`). They are `appended` when the caller named them
        (`current`), else the items after the known ones in the list the caller extended (`CallerLists`:
        by position, duplicates and all). When the caller named none and no list the guard saw grew (a
        caller that builds a new list without `current`), they are read from the proposal (`_read_tail`),
        which takes none when it cannot tell, with a warning unless `warn` is False (a context sent as it is).
        The guard's own state is never modified here."""
        state = self._state
        items = appended if appended is not None else self._callers.appended()
        tail = self._as_messages(items)
        if tail:
            known = [*state.digests, *(m.digest for m in tail)]
            if [m.digest for m in proposed[: len(known)]] == known:
                return state  # the proposal extends the caller's list: an append, evaluated as it is
            return self._grown(state, items) or state
        if appended is not None:
            return state  # the caller said what it appended: nothing (or nothing the guard can read)
        count = self._read_tail(proposed, raw, warn)
        return (self._grown(state, tail_items(raw, count)) if count else None) or state

    def _read_tail(self, proposed: tuple[Message, ...], raw: Any, warn: bool) -> int:
        """How many of the proposal's last messages are unread turns, read from the proposal alone
        (`unobserved.read_tail`: the caller's objects the guard holds or handed back tell observed messages
        from the others). Where it cannot tell: 0, with a warning naming current= (`warn`). A loop is taken
        as rebuilding its list only while the model has read all of the guard's context: one that observes
        with a `boundary` before the end declares the messages after it its own working zone."""
        state = self._state
        # a context observed with a boundary before its end has a working zone the caller rewrites as its own
        consumed = state.context.boundary == len(state.context)
        known_items = self._caller_items(state.raw, len(state.context))
        objects = {id(item) for item in known_items if item is not None} | self._callers.objects()
        reading = read_tail(state.context.messages, objects, id(known_items[-1]) if known_items else None,
                            proposed, [None if item is None else id(item)
                                       for item in self._caller_items(raw, len(proposed))],
                            format=self.bridge.format, rebuilds=self._callers.rebuilds and consumed)
        if reading.unsure is not None and warn:  # taken as the rewrite's own, as documented; said once a rewrite
            log.warning("ctxwatch: loop %s: no list the guard saw grew and current= was not given, and the "
                        "proposal does not tell which of its messages were appended since the last observe() "
                        "(%s); they are taken as the rewrite's own. Pass current=<your list before the rewrite>, "
                        "or extend the list you observed in place", self.loop_id, reading.unsure)
        return reading.count

    @staticmethod
    def _caller_items(raw: Any, count: int) -> list[Any]:
        """The caller's objects of a context of `count` messages (a list, or a request dict's messages), one
        per message; None for a message that is not one of them (a request dict's system prompt)."""
        items = list(raw.get("messages", ()) if isinstance(raw, dict) else raw)
        return [None] * (count - len(items)) + items[max(0, len(items) - count):]

    def _with_appended(self, appended: list[Any] | None = None) -> tuple[tuple[Message, ...], Any, list[int]]:
        """The guard's context with the turns the caller appended since (`appended` when the caller named
        them, else found by `CallerLists`): its messages, the caller's form and the digests, read without
        advancing a copy of the state: what `messages` and `session_boundary` use."""
        state = self._state
        appended = self._callers.appended() if appended is None else appended
        tail = self._as_messages(appended)
        if not tail:
            return state.context.messages, state.raw, state.digests
        return (state.context.messages + tail, extended(state.raw, appended),
                [*state.digests, *(m.digest for m in tail)])

    def _appended_in(self, current: Sequence[Any] | None) -> list[Any] | None:
        """The caller's objects `current` (its context now) holds after the guard's context, by position:
        all of them while the guard has seen nothing (the system prompt a loop starts with); None when
        `current` is not given. `current` is also remembered as a list the caller may extend (so `messages`
        after a refusal or a session boundary holds its turns too). ValueError when it does not start with
        the guard's context, naming the first message that differs."""
        if current is None:
            return None
        known = self._state.digests
        model = self.bridge.to_model(current) if known else ()
        if [m.digest for m in model[: len(known)]] != known:
            at = next((i for i, (m, d) in enumerate(zip(model, known, strict=False)) if m.digest != d), len(model))
            raise ValueError(f"current= must start with the context the guard last saw ({len(known)} messages) "
                             f"and hold the turns appended since; message {at} is not the one it saw (observe() a "
                             "context changed outside the guard instead)")
        items = current.get("messages", ()) if isinstance(current, dict) else current
        self._callers.add(current, self._known_items)
        return list(items[self._known_items:])

    def _grown(self, state: ConsumedState, appended: list[Any]) -> ConsumedState | None:
        """A copy of `state` with the caller's objects `appended` taken as appended (None: nothing to add,
        or objects that are not messages of the guard's format)."""
        tail = self._as_messages(appended)
        if not tail:
            return None
        base = state.copy()
        growth = Change.between(state.context, state.context.messages + tail, "append", state.digests)
        base.advance(growth, extended(state.raw, appended), rewrite=False, strict=self._strict,
                     literals=self._literal_upkeep, track_fingerprint=self.config.tracks_fingerprint)
        base.unobserved = len(tail)
        return base

    def _as_messages(self, items: list[Any]) -> tuple[Message, ...]:
        """The caller's objects `items` as messages (converted once: the adapters cache them by identity);
        () when there are none or they are not messages of the guard's format."""
        if not items:
            return ()
        try:
            return self.bridge.to_model(items)
        except (InvalidContextError, ValueError, TypeError):
            return ()

    @property
    def _known_items(self) -> int:
        """How many of the caller's objects the guard's context is (a request dict's messages)."""
        raw = self._state.raw
        items = raw.get("messages", ()) if isinstance(raw, dict) else raw
        return len(items)

    def _settle(self, evaluation: Evaluation, raw: Any, deferral: str, tools: list[ToolSchema] | None
                ) -> _Outcome | None:
        """A deferred rewrite settled by `deferral`, if that gives a patch; None keeps the deferral."""
        base, change = evaluation.base, evaluation.change
        if deferral == "session_boundary":
            rebased = with_unread_tail(change, base.unobserved)  # the turns appended since stay at its end
            if rebased is not None:
                change, raw = (Change.between(base.context, rebased, change.kind, base.digests),
                               self.bridge.to_caller(rebased, base.raw))
            return self._applied_whole(base, change, raw, tools, "session_boundary")
        if not self.config.converts(deferral, change.kind):
            return None
        if hides_rewritten_content(change.added_messages):  # an elision marker cannot carry what the model reads
            return self._settled_as_proposed(evaluation, raw, tools, "provider_compaction", Finding(
                "prefix_identity", "the rewrite replaces consumed messages by an opaque provider compaction (a "
                "summary the model reads but the guard cannot); applied as it is, since whole-pair compaction "
                "would drop it: every pair stays whole and nothing the model has not read changes, but the "
                f"consumed prefix does from message {change.prefix_len} on (the provider's prompt cache with it)",
                action="warn"))
        cleared = results_cleared_in_place(base.context.messages, change.after, base.context.boundary)
        if isinstance(cleared, int) and cleared:
            return self._settled_as_proposed(evaluation, raw, tools, "in_place", Finding(
                "prefix_identity", f"the rewrite clears {cleared} consumed tool results in place; applied as it "
                "is: every call keeps its result and nothing the model has not read changes, but the consumed "
                f"prefix does from message {change.prefix_len} on (the provider's prompt cache with it)",
                action="warn"))
        converted = whole_pair_conversion(
            base.context.messages, base.context.boundary, {i for i, _ in change.removed},
            carried_text(change.added_messages), role=self.config.elision_role, number=self._elisions + 1,
            format=self.bridge.format, own_markers=self._markers)
        if converted is None:
            why = cleared if isinstance(cleared, str) else \
                f"it changes consumed messages from message {change.prefix_len} on"
            converted = f"the rewrite drops no whole consumed unit ({why}), so there is nothing to elide"
        if not isinstance(converted, Conversion):
            return _Outcome(_with_finding(evaluation, Finding(
                "prefix_identity", f"whole-pair compaction was not possible: {converted}; the rewrite waits "
                "in the queue for the next session boundary (deferral=\"session_boundary\" applies it at once "
                "as the start of a new session)", action="warn")), raw)
        conv_change = Change.between(base.context, converted.messages, change.kind, base.digests)
        conv = self._evaluate(base, conv_change, tools, None, True, prefix_change_allowed=True)
        if conv.decision == "halt":
            return _Outcome(conv, raw)  # the alarm judges the rewrite as it would be applied: the loop halts
        if conv.decision != "patch":
            return None
        conv = _with_finding(conv, Finding(
            "prefix_identity", "the rewrite alters the consumed prefix; applied as whole-pair compaction instead: "
            f"{converted.elided} messages in {converted.units} whole units elided, its new text carried by an "
            "elision marker at the frontier" + (f" (folding the guard's {converted.folded} earlier marker(s) into it)"
                                                if converted.folded else "") +
            ", everything after the frontier kept verbatim", action="warn"), first=True)
        return _Outcome(conv, self.bridge.to_caller(converted.messages, base.raw), "whole_pairs", converted)

    def _settled_as_proposed(self, evaluation: Evaluation, raw: Any, tools: list[ToolSchema] | None,
                             resolution: str, note: Finding) -> _Outcome | None:
        """The deferred proposal applied as it is (its change to the consumed prefix allowed), `note`
        saying so; None when it still would not be a patch (then it stays deferred)."""
        return self._applied_whole(evaluation.base, evaluation.change, raw, tools, resolution, note)

    def _applied_whole(self, base: ConsumedState, change: Change, raw: Any, tools: list[ToolSchema] | None,
                       resolution: str, note: Finding | None = None) -> _Outcome | None:
        """`change` judged as it would be applied, its change to the consumed prefix allowed: a patch
        (resolved by `resolution`, `note` saying how), a halt (the alarm judges the rewrite as it would be
        applied: the loop halts, whatever the deferral mode), or None (it stays deferred)."""
        whole = self._evaluate(base, change, tools, None, True, prefix_change_allowed=True)
        if whole.decision == "halt":
            return _Outcome(whole, raw)
        if whole.decision != "patch":
            return None
        return _Outcome(whole if note is None else _with_finding(whole, note, first=True), raw, resolution)

    def _report(self, outcome: _Outcome) -> Report:
        evaluation = outcome.evaluation
        verdict = evaluation.verdict
        report = evaluation.report(
            loop_id=self.loop_id, agent=self.agent, conversation_id=self.conversation_id,
            pass_number=self.passes_used + (1 if evaluation.rewrite else 0), pass_cap=self.pass_cap,
            contraction_state=verdict.state if verdict is not None else self.detector.state, episode=self.episode)
        report.resolution, report.detector_run = outcome.resolution, self.detector_run
        return report

    # --- the evaluation (no side effects) ------------------------------------------------------------
    def _evaluate(self, base: ConsumedState, change: Change, tools: list[ToolSchema] | None, rendered: Any,
                  rewrite: bool, *, prefix_change_allowed: bool, warn_only: Iterable[str] = (),
                  sent_as_is: bool = False) -> Evaluation:
        """`sent_as_is`: the proposal goes to the model as it is (adopted), even where it drops unread turns."""
        config, enforcement = self.config, self.config.enforce
        relaxed = {invariant: "warn" for invariant in warn_only if enforcement.get(invariant) != "off"}
        if relaxed:
            enforcement = {**enforcement, **relaxed}
        pairs_after = index_pairs_after(change, base.pairs, strict=self._strict)
        rebased = None if sent_as_is else self._rebased_on_unread(change, base, enforcement)
        pairs_rebased = None if rebased is None else index_pairs(rebased, strict=self._strict)
        orphans = introduced_orphans(base.pairs, pairs_after, pairs_rebased)
        findings: list[Finding] = []

        def failed(invariant: str, exc: Exception) -> None:  # checks fail closed
            log.error("ctxwatch: the %s check failed internally (%s)", invariant, type(exc).__name__)
            log.debug("ctxwatch: the %s check failed", invariant, exc_info=True)
            findings.append(Finding(invariant, f"the {invariant} check failed internally "
                                    f"({type(exc).__name__}); refusing, since checks fail closed"))

        def run(invariant: str, fn: Callable[[], list[Finding]]) -> None:
            if enforcement.get(invariant) == "off":
                return
            try:
                findings.extend(fn())
            except Exception as exc:
                failed(invariant, exc)

        lost: frozenset[str] = frozenset()
        literals_before = len(base.literal_counts)
        # whether the rewrite is a cycle of the alarm: the one rule (`cycles.no_cycle_reason`), kept on the evaluation
        no_cycle = no_cycle_reason(change) if rewrite else None
        hidden: int | None = None  # an opaque rewrite's hidden literals (None: not one)
        pressure: int | None = None

        def pass_cap() -> list[Finding]:
            nonlocal pressure
            found, pressure = check_pass_cap(base.rewrites_since_turn, config.pass_cap, base.size, config.budget)
            return found
        run("prefix_identity", lambda: check_prefix(change, prefix_change_allowed)
            + check_unread_tail(change, base.unobserved))
        run("rerender", lambda: check_rerender(change, base.rendered, rendered))
        run("tool_pairing", lambda: check_pairing(base.pairs, pairs_after, pairs_rebased))
        run("schema_version", lambda: check_schemas(self.registry, tools, pairs_after))
        run("barrier", lambda: check_barrier(base.pairs.pending, self._in_flight, not rewrite))
        if rewrite:
            run("policy_isolation", lambda: self.policy.check(change, base.symbols))
            run("order", lambda: check_order(change))
            run("plan_reference", lambda: check_plan(self.plan, base.symbols, change.removed_messages,
                                                     change.added_messages))
            run("directive_colocation", lambda: check_colocation(change, config.directive_markers))
            if config.tracks_literals:  # measured for the alarm even when literal_loss only warns
                try:
                    diff = literal_diff(change, self.literals, base.literal_counts)
                except Exception as exc:
                    failed("literal_loss", exc)
                else:
                    lost = diff.lost
                    if no_cycle == OPAQUE:
                        hidden = len(diff.hidden)
                    run("literal_loss", lambda: check_literal_loss(diff))
            run("pass_cap", pass_cap)
        findings = decisions.apply_table(findings, enforcement)
        decision = decisions.decide(findings)
        fp_after = d = verdict = None
        # a change that is no cycle (an elision, an opaque rewrite) is measured as every rewrite is, but the
        # detector does not judge it and its report carries no hash distance (`semconv.feeds_detector`)
        is_cycle = rewrite and no_cycle is None
        measured = rewrite and decision == "patch" and config.tracks_fingerprint
        if measured:
            try:  # the alarm's one measurement of this cycle, previewed: the detector moves only at commit
                cycle = measure_cycle(change, base.fp, self._fp_last_rewrite, self.literals, base.literal_counts,
                                      no_cycle=no_cycle)
                fp_after, literals_before, lost = cycle.fp_after, cycle.literals_before, cycle.lost
                if no_cycle == OPAQUE:  # its loss is unknown: the downstream literals it hid
                    hidden = len(cycle.hidden)
                if cycle.d is not None:
                    d = cycle.d
                    verdict = self.detector.preview(cycle.d, cycle.literals_before, cycle.literals_lost,
                                                    size_after(base, change))
            except Exception as exc:
                fp_after = d = verdict = None
                failed("contraction", exc)
            else:
                if verdict is not None and verdict.state == "contracting":
                    findings.append(_contraction_finding(verdict))
            findings = decisions.apply_table(findings, enforcement)
            decision = decisions.decide(findings)
        # a halted loop stays halted until new_episode() (a session boundary is no fix), whatever this cycle's
        # verdict (the detector may recover)
        if self.halted_at is not None and is_cycle and decision != "halt":
            findings.append(Finding("contraction", f"the loop was halted at cycle {self.halted_at} in the "
                                    "contraction regime; call guard.new_episode() after fixing the rewrite policy",
                                    action="halt"))
            decision = "halt"
        return Evaluation(base=base, change=change, rewrite=rewrite, pairs_after=pairs_after,
                          orphans=(tuple(orphans[0]), tuple(orphans[1])), literals_before=literals_before,
                          lost=lost, fp_after=fp_after, distance=d, verdict=verdict, pressure=pressure,
                          findings=tuple(findings), decision=decision, hidden=hidden, cycle=is_cycle)

    @staticmethod
    def _rebased_on_unread(change: Change, base: ConsumedState,
                           enforcement: Mapping[str, str]) -> tuple[Message, ...] | None:
        """What the guard stands for when `change`'s proposal does not end with the unread turns (None
        when it does, or when prefix_identity is relaxed and the proposal may be used as it is): record
        000 keeps those turns, so the guard defers, settles or queues the proposal with them at its end
        (`with_unread_tail`), and tool pairing judges that too (`check_pairing`): a stale copy's newest
        call is not orphaned by a result kept after it."""
        if enforcement.get("prefix_identity") in ("off", "warn"):
            return None
        return with_unread_tail(change, base.unobserved)

    # --- committing an accepted context (the one place the guard's state moves) ----------------------
    def _commit(self, evaluation: Evaluation, raw: Any, tools: list[ToolSchema] | None, report: Report, *,
                session: bool = False, feed: Evaluation | None = None) -> None:
        """Advance to `evaluation`'s proposal, which `report` describes. The detector is fed the cycle of
        `feed` (default: the same evaluation): the one the report and its span describe, so that the
        monitor, fed from spans, stays in step (`semconv.feeds_detector`). The pinned policy follows the
        context (`_follow_policy`)."""
        change = evaluation.change
        if tools is not None:
            self.registry.activate(tools)
        state = evaluation.base
        state.advance(change, raw, rewrite=evaluation.rewrite, strict=self._strict, literals=self._literal_upkeep,
                      track_fingerprint=self.config.tracks_fingerprint, pairs=evaluation.pairs_after,
                      fp_after=evaluation.fp_after)
        self._state = state
        self._advance_detector(evaluation if feed is None else feed)
        if evaluation.rewrite:
            self.passes_used += 1
            order = None
            if not change.kept_order_preserved:  # a re-rank: log the new order (-1 marks new spans)
                positions = {d: i for i, d in reversed(list(enumerate(change.before_digests)))}
                order = [positions.get(d, -1) for d in change.after_digests]
            self.provenance.record(kind=change.kind, pass_number=self.passes_used, removed=change.removed,
                                   added=change.added, order=order)
            if evaluation.cycle:  # Q_{t-1}: after the last cycle of the alarm
                self._fp_last_rewrite = state.fp
            self.registry.forget_calls(state.pairs.calls)
        self._after_commit(change.after)
        if evaluation.rewrite:
            self._follow_policy(report)
        if session:
            state.with_boundary(0)
            self._next_episode()

    def _after_commit(self, messages: tuple[Message, ...]) -> None:
        self.registry.stamp(self._state.pairs)
        self.policy.resolve(messages)  # the first context the guard accepts fixes the policy region

    def _follow_policy(self, report: Report) -> None:
        """After a rewrite the guard took on: the pins follow their messages; when the pinned messages
        changed anyway (an adopted change the model already read, a shadow proposal, a policy edit only
        warned about) or the change was adopted, the region is pinned again on the context in use, and
        `report` says so once (record 001: the policy is what the model reads now)."""
        state = self._state
        if not report.observed and self.policy.follow(state.digests):  # observed: a change adopted
            return
        if self.policy.repin(state.context.messages):
            pinned = [s.index for s in self.policy.spans or ()]
            report.findings.append(Finding(
                "policy_isolation", f"the pinned policy region is pinned again on the context now in use "
                f"(messages {pinned}): the change was taken on as made, so its policy messages are the ones "
                "the model reads from now on", action="warn", details={"spans": pinned}))

    def _advance_detector(self, evaluation: Evaluation) -> None:
        """Feed the detector the cycle of `evaluation` if it is one by the rule the monitor feeds its own
        detector with (`semconv.feeds_detector`: the report's kind, decision and hash distance)."""
        if evaluation.verdict is not None and semconv.feeds_detector(evaluation.change.kind, evaluation.decision,
                                                                     evaluation.distance):
            self.detector.update(evaluation.verdict.d, evaluation.literals_before, len(evaluation.lost),
                                 evaluation.verdict.size_after)

    def _checked(self, state: ConsumedState) -> Any:
        return self.bridge.checked(state.context.messages, state.raw)


def _contraction_finding(verdict: CycleVerdict) -> Finding:
    """The alarm's finding, worded from what the detector saw on this cycle: d', r, the literals and the
    trend that held (figures only: no message text)."""
    v = verdict
    if v.contracted:
        trend = f"the literals it keeps contracting ({v.literals_before - v.literals_lost} kept)"
    elif v.shrinking:
        trend = "the hash distance converging"
    else:
        trend = "no trend this cycle, and no clear cycle to leave the regime"
    return Finding("contraction", f"the loop is in the contraction regime since cycle {v.onset}: its rewrites change "
                   "the context less than the share of protected literals they drop (cycle "
                   f"{v.cycle}: net hash distance {v.d_net:.3f} {'<' if v.below else '>='} literal-loss rate "
                   f"{v.r:.3f}, {v.literals_lost} of {v.literals_before} literals lost, {trend}). Halt the loop "
                   "and fix what the rewrite keeps: the literals it drops.",
                   action="halt", details={"onset": v.onset, "cycle": v.cycle})


def _with_finding(evaluation: Evaluation, finding: Finding, first: bool = False) -> Evaluation:
    findings = (finding, *evaluation.findings) if first else (*evaluation.findings, finding)
    return replace(evaluation, findings=findings)
