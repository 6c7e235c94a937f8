"""`ContextGuard`: one per agent loop; checks every context mutation before it is applied.

The guard holds what the model has consumed (the current context and its generation boundary),
the tool-schema registry, the plan, the pinned policy, the provenance log, the deferral queue
and the loop's contraction detector. `check()` evaluates a proposed context against every
invariant, decides patch / defer / abort / halt, records the attempt (one telemetry span) and,
when the decision is patch, moves its view to the proposal. `apply()` does the same and returns
what the agent should now use, or raises the record's error.

Checks fail closed: an exception inside a check becomes an aborting finding for that invariant.
Telemetry fails open: it is observed through `MutationTelemetry`, which never raises.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from . import decision as decisions
from .contraction import ContractionDetector, DetectorConfig
from .cycles import measure_cycle
from .deferral import DeferralQueue, carried_text, elision_marker, whole_pair_compaction
from .diff import Change
from .directives import DEFAULT_MARKERS
from .errors import InvalidContextError, NonMonotonicRewriteError
from .fingerprint import Fingerprinter
from .formats import FormatBridge, copy_shape
from .invariants.directive_colocation import check_colocation
from .invariants.literal_loss import check_literal_loss, literal_diff
from .invariants.order import check_order
from .invariants.pairing import PairIndex, check_pairing, index_pairs, introduced_orphans, strict_for
from .invariants.plan import Plan, check_barrier, check_plan, pin_lines
from .invariants.policy import PolicyRegion, PolicySelector, check_pass_cap
from .invariants.prefix import check_prefix, check_rerender
from .invariants.references import SymbolIndex
from .invariants.schemas import SchemaRegistry, check_schemas
from .literals import LiteralRegistry
from .model import Context, Message, TextPart, ToolSchema
from .provenance import ProvenanceLog
from .report import MUTATION_KINDS, Finding, Report
from .telemetry import MutationTelemetry

log = logging.getLogger("ctxwatch")

_SHARED_TELEMETRY: MutationTelemetry | None = None
DEFERRAL_MODES = ("auto", "queue", "whole_pairs")
WHOLE_PAIR_KINDS = frozenset({"compact", "prune"})  # the kinds that shrink history


def _default_telemetry() -> MutationTelemetry:
    global _SHARED_TELEMETRY
    if _SHARED_TELEMETRY is None:
        _SHARED_TELEMETRY = MutationTelemetry()
    return _SHARED_TELEMETRY


class ContextGuard:
    """Guards one agent loop's context window. See the module docstring and README.

    Parameters (all keyword-only but `loop_id`):
      loop_id: identifies the loop in telemetry and the monitor (a random id when omitted).
      agent / service / conversation_id: reported in telemetry (conversation id only when real).
      format: the message format ("openai_chat", "openai_responses", "anthropic", "langchain",
        "ctxwatch"); detected from the first input when omitted.
      tools: the tool definitions offered to the model (any supported format, or ToolSchema).
      policy: pinned policy messages, by message ids or a predicate ``(index, message) -> bool``;
        resolved on the first observed context and immutable afterwards.
      pass_cap: pinned cap on rewrite passes per episode (None: no cap).
      budget: the context budget in characters, to report residual pressure at the cap.
      literals: the literal registry (defaults to the built-in patterns).
      enforce: overrides of the enforcement table, e.g. ``{"literal_loss": "abort"}``.
      detector: the contraction detector's configuration; halt_on_contraction: stop the loop.
      directive_markers: phrases that identify a rewrite directive inside the buffer.
      deferral: what `apply` does with a deferred rewrite. "queue": keep the current context and apply
        the rewrite at the next session boundary. "whole_pairs": turn it at once into whole-pair
        compaction with an elision marker at the frontier. "auto" (default): whole pairs for the
        kinds that shrink history (compact, prune), the queue for every other kind.
    """

    def __init__(self, loop_id: str | None = None, *, agent: str | None = None, service: str | None = None,
                 conversation_id: str | None = None, format: str | None = None,
                 tools: Iterable[Any] | None = None, policy: PolicySelector | None = None,
                 pass_cap: int | None = 8, budget: int | None = None,
                 literals: LiteralRegistry | None = None, enforce: Mapping[str, str] | None = None,
                 detector: DetectorConfig | None = None, halt_on_contraction: bool = True,
                 directive_markers: Sequence[str] = DEFAULT_MARKERS, deferral: str = "auto",
                 elision_role: str = "user", telemetry: MutationTelemetry | None = None) -> None:
        if pass_cap is not None and pass_cap < 1:
            raise ValueError(f"pass_cap must be a positive number of passes or None, got {pass_cap!r}")
        if deferral not in DEFERRAL_MODES:
            raise ValueError(f"deferral must be one of {', '.join(DEFERRAL_MODES)}, got {deferral!r}")
        self.loop_id = loop_id or uuid.uuid4().hex
        self.agent, self.service, self.conversation_id = agent, service, conversation_id
        self._pass_cap = pass_cap
        self.budget = budget
        self.literals = literals or LiteralRegistry()
        self.enforcement = decisions.enforcement_table(enforce)
        # the literal counts and the buffer fingerprint are upkeep for the checks that read them
        self._tracks_literals = any(self.enforcement[i] != "off" for i in ("literal_loss", "contraction"))
        self._tracks_fingerprint = self.enforcement["contraction"] != "off"
        self.halt_on_contraction = halt_on_contraction
        self.directive_markers = tuple(directive_markers)
        self.deferral_mode = deferral
        self.elision_role = elision_role
        self.telemetry = telemetry if telemetry is not None else _default_telemetry()

        self.bridge = FormatBridge(format)
        self.registry = SchemaRegistry()
        if tools is not None:
            self.registry.activate(self.bridge.tools(tools))
        self.plan = Plan(self.literals)
        self.policy = PolicyRegion(policy, self.literals)
        self.provenance = ProvenanceLog()
        self.deferred = DeferralQueue()
        self.detector = ContractionDetector(detector)
        self._fingerprinter = Fingerprinter()

        self._context = Context((), 0)
        self._digests: list[int] = []
        self._raw: list[Any] = []
        self._pairs = index_pairs(())
        self._symbols = SymbolIndex()
        self._literal_counts: Counter[str] = Counter()
        self._size = 0
        self._fp = self._fingerprinter.buffer(())
        self._fp_last_rewrite = None
        self._rendered: Any = None
        self._in_flight: list[str] = []
        self.passes_used = 0
        self.episode = 0
        self._elisions = 0
        self.halted_at: int | None = None

    # --- read-only views ----------------------------------------------------------------------
    @property
    def pass_cap(self) -> int | None:
        """The pinned pass cap (fixed when the guard is made)."""
        return self._pass_cap

    @property
    def context(self) -> Context:
        return self._context

    @property
    def messages(self) -> Any:
        """The current context in the caller's format and shape (a list, or an Anthropic request dict)."""
        return copy_shape(self._raw)

    @property
    def pending_calls(self) -> set[str]:
        return set(self._pairs.pending)

    # --- observing what the model consumed ---------------------------------------------------------
    def observe(self, messages: Sequence[Any], *, boundary: int | None = None, rendered: Any = None,
                tools: Iterable[Any] | None = None, kind: str = "rewrite") -> Report | None:
        """Record that the model has consumed `messages` (up to `boundary`, default all of them).

        `rendered` is the exact prompt the model consumed (str, bytes or token ids), when the runtime
        renders it: a later proposal with the same messages must render to the same leading bytes.
        If `messages` is not an extension of the context the guard knows, the agent changed it
        without the guard (or a server edited it, e.g. provider-side context editing): that mutation
        is evaluated as `kind`, reported and adopted, since the model has already consumed it; the
        report is returned.
        """
        proposed = self.bridge.to_model(messages)
        if boundary is not None and not 0 <= boundary <= len(proposed):
            raise ValueError(f"boundary {boundary} is outside the observed context (0..{len(proposed)})")
        if tools is not None:
            self.registry.activate(self.bridge.tools(tools))
        change = Change.between(self._context, proposed, "append", self._digests)
        report = None
        if self._context.messages and not change.is_append_only:
            report = self._attempt(proposed, messages, kind=kind, tools=None, rendered=None, adopt=True)
            level = logging.WARNING if report.violations else logging.DEBUG
            log.log(level, "ctxwatch: loop %s: the context changed outside the guard\n%s", self.loop_id,
                    report.explain())
        else:
            self._commit(change, proposed, messages, applied_rewrite=False)
        b = len(proposed) if boundary is None else boundary
        self._context = Context(self._context.messages, b)
        self._rendered = rendered
        return report

    @contextmanager
    def in_flight(self, label: str = "write"):
        """Mark an operation (a write, a side effect) as in flight: no rewrite until it ends (record 004)."""
        self._in_flight.append(label)
        try:
            yield
        finally:
            self._in_flight.remove(label)

    # --- checking and applying ----------------------------------------------------------------------
    def check(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
              rendered: Any = None) -> Report:
        """Evaluate a proposed context; never raises for a violation. Records the attempt: on patch the
        guard assumes the agent uses the proposal; on defer the proposal is queued."""
        model = self.bridge.to_model(proposed)
        schema_list = self.bridge.tools(tools) if tools is not None else None
        return self._attempt(model, proposed, kind=kind, tools=schema_list, rendered=rendered, adopt=False)

    def resolve(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
                rendered: Any = None) -> tuple[Report, Any]:
        """Check `proposed` and settle what the agent should use now: ``(report, context)``.

        patch: the proposal. A rewrite that would be deferred is, when the deferral mode says so (see
        the constructor), compacted in whole pairs within the same attempt: one report and one span,
        decision patch, ``report.resolution == "whole_pairs"``, and the context is that compaction.
        Otherwise defer: the current context, the rewrite queued. abort / halt: the current context.
        Never raises for a violation (`apply` raises).
        """
        model = self.bridge.to_model(proposed)
        schema_list = self.bridge.tools(tools) if tools is not None else None
        report = self._attempt(model, proposed, kind=kind, tools=schema_list, rendered=rendered, adopt=False,
                               convert_deferral=True)
        if report.decision == "patch" and report.resolution is None:
            return report, copy_shape(proposed)
        return report, self.messages

    def apply(self, proposed: Sequence[Any], *, kind: str | None = None, tools: Iterable[Any] | None = None,
              rendered: Any = None) -> Any:
        """Check `proposed`; return what the agent should use now (see `resolve`), or raise the record's
        error on abort or halt."""
        report, context = self.resolve(proposed, kind=kind, tools=tools, rendered=rendered)
        if report.decision in ("abort", "halt"):
            raise decisions.error_for(report.findings, report.decision)(report.explain(), report)
        return context

    def guarded(self, kind: str = "compact", *, on_refusal: str = "raise") -> Callable:
        """Decorator for an existing compaction function ``fn(messages, ...) -> messages``.

        The input is observed if the guard has seen nothing yet; the output goes through `apply`.
        ``on_refusal="keep"`` returns the input unchanged instead of raising on abort or halt.
        """
        if on_refusal not in ("raise", "keep"):
            raise ValueError(f"on_refusal must be 'raise' or 'keep', got {on_refusal!r}")

        def wrap(fn: Callable) -> Callable:
            @functools.wraps(fn)
            def inner(messages, *args, **kwargs):
                if not self._context.messages:
                    self.observe(messages)
                result = fn(messages, *args, **kwargs)
                try:
                    return self.apply(result, kind=kind)
                except NonMonotonicRewriteError:
                    if on_refusal == "keep":
                        return self.messages
                    raise
            return inner
        return wrap

    def self_edit(self, new_system_prompt: str) -> list[Any]:
        """A model-requested rewrite of its leading system message: validated as an untrusted proposal."""
        current = self._context.messages
        if not current or current[0].role not in ("system", "developer"):
            raise InvalidContextError("the context has no leading system message to edit", index=0, field="role")
        edited = Message(current[0].role, [TextPart(new_system_prompt)], id=current[0].id, name=current[0].name)
        proposal = self.bridge.to_caller((edited,) + current[1:], self._raw)
        return self.apply(proposal, kind="self_edit")

    # --- deferral ------------------------------------------------------------------------------------
    def session_boundary(self) -> Report | None:
        """The next model call starts a fresh session (nothing consumed): apply the latest deferred
        rewrite, rebased on what was appended since it was proposed. Returns its report, if any."""
        entry = self.deferred.take_latest(self._context.digests)
        self._context = Context(self._context.messages, 0)
        if entry is None:
            return None
        rebased_model = entry.rebase(self._context.messages)
        rebased_raw = self.bridge.to_caller(rebased_model, self._raw)
        return self._attempt(rebased_model, rebased_raw, kind=entry.kind, tools=entry.tools, rendered=None,
                             adopt=False)

    def compact_in_whole_pairs(self) -> list[Any]:
        """Turn the latest deferred rewrite into whole-pair compaction of the current context: only units
        the proposal dropped entirely (a call with all its results) are removed, the proposal's new text is
        carried by an elision marker appended at the frontier. Returns the context to use."""
        entry = self.deferred.take_latest(self._context.digests)
        if entry is None:
            return self.messages
        model = self._whole_pairs(entry.dropped_positions(), entry.added_text())
        if model is None:
            return self.messages
        raw = self.bridge.to_caller(model, self._raw)
        report = self._attempt(model, raw, kind="compact", tools=entry.tools, rendered=None, adopt=False,
                               prefix_change_allowed=True)
        if report.decision != "patch":
            raise decisions.error_for(report.findings, report.decision)(report.explain(), report)
        return raw

    def _whole_pairs(self, dropped: set[int], carried_text: str) -> tuple[Message, ...] | None:
        """The current context without the whole units at `dropped` positions, plus an elision marker
        carrying `carried_text` at the frontier; None when no whole unit was dropped."""
        kept, units, elided = whole_pair_compaction(self._context.messages, dropped)
        if not elided:
            return None
        self._elisions += 1  # never reset (not even by new_episode): two markers are never the same message
        return tuple(kept) + (elision_marker(self.elision_role, elided, units, carried_text, self._elisions),)

    def _converts(self, kind: str) -> bool:
        return self.deferral_mode == "whole_pairs" or (self.deferral_mode == "auto" and kind in WHOLE_PAIR_KINDS)

    def pin_symbols(self, proposed: Sequence[Any], symbols: Iterable[str]) -> Any:
        """Record 004's *pin*: return `proposed` with the lines of the current context that mention
        `symbols` appended verbatim after the rewrite's new content, so the references survive."""
        model = self.bridge.to_model(proposed)
        change = Change.between(self._context, model, "rewrite")
        lines = pin_lines(change.removed_messages, symbols)
        if not lines:
            return copy_shape(proposed)
        pin = Message(self.elision_role, [TextPart("[ctxwatch] pinned references, verbatim:\n" + "\n".join(lines))])
        at = (change.added[-1][0] + 1) if change.added else change.prefix_len
        return self.bridge.to_caller(model[:at] + (pin,) + model[at:], proposed)

    def new_episode(self) -> None:
        """Start a new episode: the pass count, the halt and the contraction detector are reset; the
        pinned cap stays. Spans carry the episode number, so the monitor resets its detector too."""
        self.episode += 1
        self.passes_used = 0
        self.halted_at = None
        self.detector = ContractionDetector(self.detector.config)
        self._fp_last_rewrite = None

    # --- the evaluation ------------------------------------------------------------------------------
    def _attempt(self, proposed: tuple[Message, ...], raw: Sequence[Any], *, kind: str | None,
                 tools: list[ToolSchema] | None, rendered: Any, adopt: bool,
                 prefix_change_allowed: bool = False, convert_deferral: bool = False) -> Report:
        started = time.perf_counter()
        if kind is not None and kind not in MUTATION_KINDS:
            raise ValueError(f"kind must be one of {', '.join(MUTATION_KINDS)}; got {kind!r}")
        change = Change.between(self._context, proposed, kind or "rewrite", self._digests)
        if tools is not None and not self.registry.changes(tools):
            tools = None  # the same tool list sent again (runtimes send it with every request): no change
        rewrite = not change.is_append_only or tools is not None
        # the kind is the one the guard evaluates it as (spans, metrics and the monitor follow it): growth
        # alone (or no change) is an append whatever the caller declared; growth with a new tool list a
        # schema change, anything else a rewrite unless the caller names its kind
        if not rewrite:
            kind = "append"
        elif kind is None or kind == "append":
            kind = "schema_change" if change.is_append_only else "rewrite"
        change.kind = kind
        handle = self.telemetry.start(loop_id=self.loop_id, kind=kind, agent=self.agent,
                                      conversation_id=self.conversation_id, service=self.service,
                                      pass_number=self.passes_used + (1 if rewrite else 0), pass_cap=self._pass_cap)
        try:
            report, after_pairs, fp_after = self._evaluate(change, tools, rendered, rewrite, prefix_change_allowed)
            if convert_deferral and report.decision == "defer" and self._converts(kind):
                converted = self._whole_pairs({i for i, _ in change.removed}, carried_text(change.added_messages))
                if converted is not None:
                    change = Change.between(self._context, converted, kind, self._digests)
                    proposed, raw = converted, self.bridge.to_caller(converted, self._raw)
                    report, after_pairs, fp_after = self._evaluate(change, tools, None, True, True)
                    if report.decision == "patch":
                        report.resolution = "whole_pairs"
                        report.findings.insert(0, Finding(
                            "prefix_identity", "the rewrite alters the consumed prefix; applied as whole-pair "
                            "compaction instead, its new text carried by an elision marker at the frontier",
                            action="warn"))
            if adopt:
                report.observed = True
                report.decision = "patch"  # the model already consumed it: reported, not refused
            if adopt or report.decision == "patch":
                self._commit(change, proposed, raw, applied_rewrite=rewrite, tools=tools, pairs=after_pairs,
                             fp_after=fp_after)
            elif report.decision == "defer":
                report.deferred_id = self.deferred.push(self._context, proposed, kind, tools)
        except BaseException as exc:
            handle.fail(exc)
            raise
        report.duration_s = time.perf_counter() - started
        handle.end(report)
        return report

    def _evaluate(self, change: Change, tools: list[ToolSchema] | None, rendered: Any, rewrite: bool,
                  prefix_change_allowed: bool) -> tuple[Report, PairIndex, Any]:
        after_pairs = index_pairs(change.after, strict=strict_for(self.bridge.format))
        orphans = introduced_orphans(self._pairs, after_pairs)
        findings: list[Finding] = []
        figures: dict[str, Any] = {}

        def run(invariant: str, fn: Callable[[], list[Finding]]) -> None:
            if self.enforcement.get(invariant) == "off":
                return
            try:
                findings.extend(fn())
            except Exception as exc:  # checks fail closed
                log.exception("ctxwatch: the %s check failed", invariant)
                findings.append(Finding(invariant, f"the {invariant} check failed internally "
                                        f"({type(exc).__name__}: {exc}); refusing, since checks fail closed"))

        run("prefix_identity", lambda: check_prefix(change, prefix_change_allowed))
        run("rerender", lambda: check_rerender(change, self._rendered, rendered))
        run("tool_pairing", lambda: check_pairing(self._pairs, after_pairs))
        run("schema_version", lambda: check_schemas(self.registry, tools, after_pairs))
        run("barrier", lambda: check_barrier(self._pairs.pending, self._in_flight, not rewrite))
        if rewrite:
            run("policy_isolation", lambda: self.policy.check(change, self._symbols))
            run("order", lambda: check_order(change))
            run("plan_reference", lambda: check_plan(self.plan, self._symbols, change.removed_messages,
                                                     change.added_messages))
            run("directive_colocation", lambda: check_colocation(change, self.directive_markers))
            run("literal_loss", lambda: self._check_literals(change, figures))
            run("pass_cap", lambda: self._check_pass_cap(figures))
        findings = decisions.apply_table(findings, self.enforcement)
        decision = decisions.decide(findings)
        if rewrite and decision == "patch":
            run("contraction", lambda: self._check_contraction(change, figures))
            findings = decisions.apply_table(findings, self.enforcement)
            decision = decisions.decide(findings)
        elif self.halted_at is not None and rewrite:
            findings.append(Finding("contraction", f"the loop was halted at cycle {self.halted_at} in the "
                                    "contraction regime; call guard.new_episode() after fixing the rewrite policy",
                                    action="halt"))
            decision = "halt"
        report = Report(
            loop_id=self.loop_id, kind=change.kind, decision=decision, findings=findings,
            messages_before=len(self._context), messages_after=len(change.after),
            pass_number=self.passes_used + (1 if rewrite else 0), pass_cap=self._pass_cap,
            agent=self.agent, conversation_id=self.conversation_id,
            size_before=self._size,
            size_after=self._size - sum(m.size for m in change.removed_messages)
            + sum(m.size for m in change.added_messages),
            hash_distance=figures.get("d"), literals_before=figures.get("literals_before", len(self._literal_counts)),
            literals_lost=len(figures.get("lost", ())), lost_literals=frozenset(figures.get("lost", ())),
            orphans_tool_use=len(orphans[0]), orphans_tool_result=len(orphans[1]),
            contraction_state=self.detector.state, residual_pressure=figures.get("pressure"),
            episode=self.episode,
        )
        return report, after_pairs, figures.get("fp_after")

    # --- individual checks that need guard state -----------------------------------------------------
    def _check_literals(self, change: Change, figures: dict[str, Any]) -> list[Finding]:
        diff = literal_diff(change, self.literals, self._literal_counts)
        figures["lost"], figures["literals_before"] = diff.lost, diff.before
        return check_literal_loss(diff)

    def _check_pass_cap(self, figures: dict[str, Any]) -> list[Finding]:
        found, pressure = check_pass_cap(self.passes_used, self._pass_cap, self._size, self.budget)
        figures["pressure"] = pressure
        return found

    def _check_contraction(self, change: Change, figures: dict[str, Any]) -> list[Finding]:
        cycle = measure_cycle(change, self._fp, self._fp_last_rewrite, self.literals, self._literal_counts)
        figures.update(d=cycle.d, fp_after=cycle.fp_after, literals_before=cycle.literals_before, lost=cycle.lost)
        verdict = self.detector.update(cycle.d, cycle.literals_before, cycle.literals_lost)
        if verdict.state != "contracting":
            return []
        action = "halt" if self.halt_on_contraction else "warn"
        if self.halt_on_contraction:
            self.halted_at = verdict.cycle
        return [Finding("contraction", f"the loop is in the contraction regime since cycle {verdict.onset}: "
                        f"hash distance {verdict.d:.3f} < literal-loss rate {verdict.r:.3f} while distances shrink "
                        "and lost literals accumulate; the rewrite converges on its own directive. Halt the loop and "
                        "fix the rewrite policy (directive out of band, literals preserved).",
                        action=action, details={"onset": verdict.onset, "cycle": verdict.cycle})]

    # --- committing an accepted context --------------------------------------------------------------
    def _commit(self, change: Change, proposed: tuple[Message, ...], raw: Sequence[Any], *,
                applied_rewrite: bool, tools: list[ToolSchema] | None = None, pairs: PairIndex | None = None,
                fp_after: Any = None) -> None:
        removed, added = change.removed_messages, change.added_messages
        if tools is not None:
            self.registry.activate(tools)
        self._size += sum(m.size for m in added) - sum(m.size for m in removed)
        if self._tracks_literals:
            for m in removed:
                self._literal_counts.subtract(self.literals.of(m))
            for m in added:
                self._literal_counts.update(self.literals.of(m))
            if removed:
                self._literal_counts = +self._literal_counts
        if self._tracks_fingerprint:
            self._fp = fp_after if fp_after is not None else self._fp.updated(removed, added)
        self._symbols.advance(proposed, removed, added)
        self._pairs = pairs if pairs is not None else index_pairs(proposed, strict=strict_for(self.bridge.format))
        self.registry.stamp(self._pairs)
        if applied_rewrite:
            self.passes_used += 1
            order = None
            if not change.kept_order_preserved:  # a re-rank: log the new order (-1 marks new spans)
                positions = {d: i for i, d in reversed(list(enumerate(change.before_digests)))}
                order = [positions.get(d, -1) for d in change.after_digests]
            self.provenance.record(kind=change.kind, pass_number=self.passes_used, removed=change.removed,
                                   added=change.added, order=order)
            self._fp_last_rewrite = self._fp
            self.registry.forget_calls(self._pairs.calls)
        if change.prefix_len < self._context.boundary:
            self._rendered = None  # the rendering of a prefix that no longer exists
        boundary = min(self._context.boundary, change.prefix_len)
        self._context = Context(proposed, boundary)
        self.policy.resolve(proposed)  # the first context the guard accepts fixes the policy region
        self._digests = change.after_digests
        self._raw = copy_shape(raw)
