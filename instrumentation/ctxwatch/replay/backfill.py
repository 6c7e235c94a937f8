"""``ctxwatch replay --otlp URL``: the spans a guard would have produced, backfilled over OTLP/HTTP.

`Backfill` is an audit `Observer`, given the telemetry to emit with and how to flush it: for every
step at which the recorded buffer grew it emits an ``append`` span, and for every recorded mutation
a span of that mutation's kind, both through `ctxwatch.telemetry.MutationTelemetry` — the very code
the guard ends its spans with — from a `Report` carrying the audit's figures (sizes, literals before
and lost, orphans, hash distance, contraction state). A mutation that is no rewrite cycle of the alarm
(an elision, an opaque compaction: `ctxwatch.cycles.no_cycle_reason`) carries no hash distance, as the
guard's span of the same change does not, and an opaque one ``ctxwatch.literals.hidden`` instead of a
lost count; so it is no detector cycle of the monitor either. A recorded mutation was applied by the agent,
so its decision is ``patch``; what the guard would have refused is listed in ``ctxwatch.warnings``.
Every recorded buffer was sent to the model, so a mutation's
``ctxwatch.cache.invalidated.*`` count from its first difference to the end of the buffer before it.
A monitor fed these spans rebuilds the same detector state as the replay's own verdict.

Every span carries the session's loop id (`watch.identity.loop_id_for`, the one ``ctxwatch watch``
gives it: from the session id the file records, else from the file), the agent name (the session
format's, `watch.identity.agent_name`, unless given), the agent's version when the file records it
(Claude Code, Codex, Gemini CLI: `watch.identity`, as ``ctxwatch watch`` reads it) and the service
name (for those agents the project, as ``ctxwatch watch`` labels it, unless one name is given), and is
timed at the ``timestamp`` of the record that marks it (`Session.time_of`; the export time when the
format records none), so a backfill lands where it happened.
A mutation whose record says how many tokens the context held before it (Claude Code's ``preTokens``,
`Mutation.pre_tokens`) carries them (``ctxwatch.tokens.before``). The provider's prompt-cache figures
the session records (Claude Code's ``message.usage``, `Session.take_provider_cache`) ride on the
next span emitted after the response, each response once. Spans are flushed every
`flush_every` spans, so a long session never overflows the exporter's queue. `skip` passes over
the first spans of a session (counted and numbered, not emitted): ``ctxwatch watch`` resumes a session that way.
A file the session continued in (rotated) is numbered as the session's next `generation`
(`telemetry.sequence`), so the monitor takes its spans for a new run of the loop, not for duplicates.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..cache import invalidated
from ..diff import Change
from ..literals import LiteralRegistry
from ..model import Context, Message
from ..report import Report
from ..sessions import Mutation, Session, Snapshot
from ..telemetry import MutationTelemetry, error_count
from ..telemetry.sequence import RecordedFiles
from ..watch.identity import AGENTS, MAX_LABEL, ServiceLabels, agent_name, file_opening, identify_file
from .audit import MutationAudit, Observer, SessionAudit
from .buffer import FollowedBuffer

DEFAULT_SERVICE = "ctxwatch-replay"
FLUSH_EVERY = 512
TIMEOUT_S = 5.0


class BackfillError(RuntimeError):
    """The OTLP endpoint could not be reached or refused the spans (one line, names the URL)."""


class _SpannedBuffer(FollowedBuffer):
    """The buffer of the last span: its size, and how many distinct literals it holds (a literal ->
    messages-holding-it tally, so a span costs the messages that changed, not the whole buffer)."""

    def __init__(self, registry: LiteralRegistry) -> None:
        super().__init__()
        self.registry = registry
        self.holders: Counter[str] = Counter()

    @property
    def literals(self) -> int:
        return len(self.holders)

    def _take_back(self, keep: int) -> None:
        holders = self.holders
        for m in self.messages[keep:]:
            for lit in self.registry.of(m):
                if holders[lit] == 1:
                    del holders[lit]
                else:
                    holders[lit] -= 1

    def _push(self, message: Message) -> None:
        self.holders.update(self.registry.of(message))


class Backfill(Observer):
    """Emits one span per recorded step and mutation of one session."""

    def __init__(self, telemetry: MutationTelemetry, flush: Callable[[], object], *, loop_id: str, agent: str,
                 service: str, registry: LiteralRegistry, flush_every: int = FLUSH_EVERY,
                 agent_version: str | None = None, skip: int = 0, generation: int = 0) -> None:
        self.telemetry = telemetry
        self.flush = flush
        self.loop_id, self.agent, self.service = loop_id, agent, service
        self.agent_version = agent_version
        self.skip = skip
        self.generation = generation
        self.session: Session | None = None
        self.registry = registry
        self.flush_every = flush_every
        self.current = _SpannedBuffer(registry)
        self.cycles = 0
        self.state = "healthy"
        self.spans = 0
        telemetry.renumber(loop_id, generation=generation)  # the file is read from its start, skipped spans included

    def resume(self, buffer: tuple[Message, ...], spans: int, cycles: int, state: str) -> None:
        """Go on after the first `spans` spans of the session (`cycles` of them mutations, the detector then in
        `state`), the last of them leaving `buffer`: ``ctxwatch watch`` resuming at an epoch (`watch.checkpoint`)."""
        self.current.sync(buffer)
        self.spans, self.cycles, self.state = spans, cycles, state
        self.telemetry.renumber(self.loop_id, spans, cycles, generation=self.generation)

    def started(self, session: Session) -> None:
        self.session = session

    def snapshot(self, snapshot: Snapshot) -> None:
        self._grow_to(snapshot.messages, snapshot.line)

    def mutation(self, mutation: Mutation, audit: MutationAudit) -> None:
        self._grow_to(mutation.before, mutation.line)
        if audit.verdict is not None:  # a cycle of the alarm: one more detector cycle (else as the guard's span
            self.cycles, self.state = audit.verdict.cycle, audit.verdict.state  # of it: no hash distance)
        findings = [replace(f, action="warn") for f in audit.findings()]
        current = self.current  # at the buffer before: its digests, and the prefix it shares with the one after
        before_digests, keep = current.digests, current.shared(mutation.after)
        current.sync(mutation.after, keep)
        cost = invalidated(Change(Context.of(mutation.before), mutation.after, audit.kind, before_digests,
                                  current.digests, shared=keep))  # every message before was consumed
        self._emit(Report(
            loop_id=self.loop_id, kind=audit.kind, decision="patch", findings=findings,
            messages_before=len(mutation.before), messages_after=len(mutation.after), pass_number=self.cycles,
            pass_cap=None, agent=self.agent, size_before=audit.size_before, size_after=audit.size_after,
            hash_distance=audit.hash_distance, literals_before=audit.literals_before, literals_lost=len(audit.lost),
            literals_hidden=audit.hidden, lost_literals=frozenset(audit.lost),
            orphans_tool_use=len(audit.orphaned_calls), orphans_tool_result=len(audit.orphaned_results),
            contraction_state=self.state,
            invalidated_chars=cost.chars, invalidated_tokens=cost.tokens, tokens_before=mutation.pre_tokens),
            mutation.line)

    def _grow_to(self, messages: tuple[Message, ...], line: int | None) -> None:
        keep = self.current.shared(messages)
        if keep == len(messages) == len(self.current.messages):
            return
        before, size_before, literals_before = self.current.messages, self.current.size, self.current.literals
        self.current.sync(messages, keep)
        self._emit(Report(
            loop_id=self.loop_id, kind="append", decision="patch", findings=[], messages_before=len(before),
            messages_after=len(messages), pass_number=self.cycles, pass_cap=None, agent=self.agent,
            size_before=size_before, size_after=self.current.size,
            literals_before=literals_before, contraction_state=self.state), line)

    def _emit(self, report: Report, line: int | None) -> None:
        self.spans += 1
        figures = self.session.take_provider_cache() if self.session is not None else None
        if figures is not None:
            report.cache_read_tokens, report.cache_creation_tokens = figures.read_tokens, figures.creation_tokens
        if self.spans <= self.skip:  # sent by an earlier run: numbered, not sent again
            self.telemetry.number_unsent(report)
            return
        handle = self.telemetry.start(loop_id=self.loop_id, kind=report.kind, pass_number=report.pass_number,
                                      agent=self.agent, service=self.service, agent_version=self._version_at(line),
                                      at_ns=self.session.time_of(line) if self.session is not None else None)
        handle.end(report)
        if self.spans % self.flush_every == 0:
            self.flush()

    def _version_at(self, line: int | None) -> str | None:
        """The agent's version at `line`: for a session identified with one, the latest the records up to
        `line` carry (`Session.version_at`: what an agent upgraded mid-session did after is labelled with the
        new version), else the one it was identified with."""
        recorded = self.session.version_at(line) if self.session is not None and self.agent_version else None
        return recorded[:MAX_LABEL] if recorded else self.agent_version


def session_backfill(audit: SessionAudit, telemetry: MutationTelemetry, flush: Callable[[], object], *,
                     agent: str | None, service: str | ServiceLabels, registry: LiteralRegistry,
                     generation: int = 0) -> Backfill:
    """The observer that backfills the session `audit` is of, as ``replay --otlp`` does: its agent is `agent`,
    else the session format's as ``ctxwatch watch`` names it (`watch.identity.agent_name`); its version what
    the file records, for the coding agents ``ctxwatch watch`` follows (`watch.identity`). `service`: one
    name, or the labels ``ctxwatch watch`` names a coding-agent session's service by (its project, unless
    they are fixed), so that one loop has one service label whichever sent it; a session of another format
    gets the fixed name, else `DEFAULT_SERVICE`. Numbered as the session's `generation`-th file."""
    identity = identify_file(Path(audit.path), audit.format) if audit.format in AGENTS else None
    if isinstance(service, ServiceLabels):
        service = service.label(identity.project) if identity is not None else service.fixed or DEFAULT_SERVICE
    return Backfill(telemetry, flush, loop_id=audit.loop_id, agent=agent or agent_name(audit.format or "unknown"),
                    service=service, registry=registry,
                    agent_version=identity.version if identity is not None else None, generation=generation)


class Exporter:
    """The OTLP pipeline of one ``--otlp`` run, and whether its exports all went through."""

    def __init__(self, url: str | None, service: str | None, schedule_delay_s: float | None = None) -> None:
        """`url` None: the endpoint of the standard ``OTEL_EXPORTER_OTLP_*`` settings; `service`: the one
        service name of every session (None: each coding-agent session's project, as ``ctxwatch watch``
        names it, `DEFAULT_SERVICE` for the rest; the resource's is `DEFAULT_SERVICE`); `schedule_delay_s`:
        how long spans may wait in the batch before they are sent (default: ``OTEL_BSP_SCHEDULE_DELAY``)."""
        from ..otlp import build  # needs ctxwatch[otlp]

        # The SDK logs every retry over several lines; `close` reports the outcome in one.
        logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
        self.url = url
        self.where = f"--otlp {url}" if url else "the OTEL_EXPORTER_OTLP_* endpoint"
        self.services = ServiceLabels(service)
        self._errors = error_count()
        self.all_sent = True  # no export has failed (or been cut short at the end) so far
        self.pipeline = build(endpoint=url, service_name=service or DEFAULT_SERVICE, with_metrics=False,
                              timeout_s=TIMEOUT_S, max_queue_size=4 * FLUSH_EVERY,
                              max_export_batch_size=FLUSH_EVERY, schedule_delay_s=schedule_delay_s)
        if self.pipeline.tracer_provider is None:
            raise BackfillError(f"{self.where}: tracing is switched off in this environment "
                                "(OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none)")
        self.telemetry = MutationTelemetry(self.pipeline.tracer_provider, self.pipeline.meter_provider,
                                           capture_content=False)
        self.files = RecordedFiles()

    def observer(self, audit: SessionAudit, *, agent: str | None, registry: LiteralRegistry) -> Backfill:
        """The observer that backfills one session file (`session_backfill`): a file of a loop reported before in
        the run that opens with another record is the session continued in it (rotated), its next generation."""
        generation = self.files.generation(audit.loop_id, file_opening(Path(audit.path)))
        return session_backfill(audit, self.telemetry, lambda: self.pipeline.force_flush(TIMEOUT_S), agent=agent,
                                service=self.services, registry=registry, generation=generation)

    def close(self) -> None:
        """Flush and stop; BackfillError when an export not reported yet failed, or they did not finish in time."""
        finished = self.pipeline.shutdown(2 * TIMEOUT_S)
        failed = self.take_failures()
        self.all_sent = self.all_sent and finished
        if failed or not finished:
            raise BackfillError(self.failure(failed or "some"))

    def take_failures(self) -> int:
        """How many exports failed since the last call (the first: since this exporter was made)."""
        failed = error_count() - self._errors
        self._errors += failed
        self.all_sent = self.all_sent and not failed
        return failed

    def failure(self, failed: int | str) -> str:
        """The one line saying that `failed` exports did not go through, and why when the endpoint said."""
        refused = self.pipeline.refused
        if refused is None:
            why = "(is a monitor or collector listening there?)"
        elif refused.status in (401, 403):
            why = f"(refused: {refused}; check the token, OTEL_EXPORTER_OTLP_HEADERS)"
        else:
            why = f"(refused: {refused})"
        return f"{self.where}: {failed} span export(s) failed {why}"
