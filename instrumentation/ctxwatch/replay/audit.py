"""The audit of one recorded session: every context mutation in it, measured as the guard would.

`audit_session(path)` streams the session's events (`ctxwatch.sessions.read_session`) once and
turns each `Mutation` into a `MutationAudit`: its kind and source record, how many messages were
kept, dropped, added, elided or rewritten in place, sizes before and after (characters of
readable text), the tool ids it orphaned (record 000's `introduced_orphans`), the protected
literals it lost (listed), and, when it is a rewrite cycle of the alarm, the hash distance and the
contraction verdict of the cycle (the same `ctxwatch.cycles.CycleMeter` and `ContractionDetector` the
guard and the calibration use). Which mutations are cycles is the guard's rule
(`ctxwatch.cycles.no_cycle_reason`): an elision (a Claude Code microcompaction, a rewind) or an opaque
compaction (Codex's remote compaction) is reported with its figures, the literals it hid for an opaque
one, but has no cycle number and no verdict, and the detector is not fed. The buffers are
dropped as soon as they are measured, so memory follows the current buffer, not the file.

Tool pairs are checked on the buffer at the end of each epoch (just before each mutation, and the
final one): between mutations a buffer only grows, so an orphan in any buffer is still there. Each
unpaired id is listed once, with the record that introduced it (`Session.origin`); an id a
mutation orphaned is that mutation's finding and is not listed again. A call still waiting for its
result when a mutation drops it (a compaction that hit while a tool ran) is listed on the mutation
as in flight.

What counts as a *finding* (exit code 1 of ``ctxwatch replay``): what the guard, under its default
enforcement, would have refused or halted — a mutation that leaves tool ids orphaned and an
unpaired tool id in a recorded buffer (``tool_pairing``: the provider rejects such a request), and
a cycle at which the detector enters ``contracting`` (``contraction``); with
``fail_on_literal_loss``, also every mutation that loses protected literals (``literal_loss``, a
warning by default, as in the guard). In-flight calls dropped by a mutation are a warning.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..contraction import ContractionDetector, CycleVerdict, DetectorConfig
from ..cycles import OPAQUE, CycleMeter
from ..diff import Change
from ..errors import InvalidContextError
from ..invariants.pairing import PairIndex, introduced_orphans, strict_for
from ..literals import LiteralRegistry
from ..model import Context, Message
from ..report import Finding
from ..sessions import Mutation, Session, Skip, Snapshot, read_session
from ..sessions.codex import ABORTED_CALLS
from ..sessions.session import ToolSide
from ..watch.identity import file_loop_id, loop_id_for
from .buffer import AuditedBuffer


@dataclass(frozen=True)
class MessageCounts:
    """How the messages of the buffer before a mutation fared in the buffer after it."""

    before: int
    after: int
    kept: int       # same content in both (the k-th copy matching the k-th copy)
    dropped: int    # in `before`, content absent from `after` and not changed in place
    added: int      # in `after`, content absent from `before` and not a change in place
    elided: int     # changed in place (same index and role), shorter than before
    rewritten: int  # changed in place, not shorter


@dataclass(frozen=True)
class ToolIdAt:
    """A tool id and where it entered the session ("line 381", or a JSON path)."""

    id: str
    where: str
    kind: ToolSide = "tool_use"  # or "tool_result": which side of the pair is present


@dataclass(frozen=True)
class MutationAudit:
    """One recorded context mutation, measured (no message text kept, only lost literal values). A mutation
    that is no rewrite cycle of the alarm (`no_cycle` says why, `ctxwatch.cycles.no_cycle_reason`) has
    neither `cycle` nor `verdict`; an opaque one counts the downstream literals it `hidden` instead of
    losing any."""

    cycle: int | None
    kind: str
    source: str
    step: int
    where: str
    line: int | None
    messages: MessageCounts
    size_before: int
    size_after: int
    orphaned_calls: tuple[str, ...]
    orphaned_results: tuple[str, ...]
    literals_before: int
    lost: tuple[str, ...]
    verdict: CycleVerdict | None
    trigger: str | None = None
    pre_tokens: int | None = None
    summary_line: int | None = None
    summary_chars: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    in_flight: tuple[ToolIdAt, ...] = ()  # calls awaiting their result that this mutation dropped
    no_cycle: str | None = None  # why it is no cycle of the alarm (None: it is one)
    hidden: int | None = None  # an opaque mutation: the downstream literals it took out of the readable context

    @property
    def hash_distance(self) -> float | None:
        return None if self.verdict is None else self.verdict.d

    @property
    def literals_lost(self) -> int | None:
        """How many literals it lost (None for an opaque mutation: unknown)."""
        return None if self.hidden is not None else len(self.lost)

    @property
    def name(self) -> str:
        """How the report's notes name it: ``cycle 2``, or ``prune at line 371`` when it is no cycle."""
        return f"{self.kind} at {self.where}" if self.cycle is None else f"cycle {self.cycle}"

    @property
    def label(self) -> str:
        """How its findings name it: ``cycle 2 (compact at line 372)``, ``prune at line 371 (no cycle: elision)``."""
        if self.cycle is None:
            return f"{self.name} (no cycle: {self.no_cycle})"
        return f"{self.name} ({self.kind} at {self.where})"

    @property
    def orphans(self) -> int:
        return len(self.orphaned_calls) + len(self.orphaned_results)

    def findings(self, fail_on_literal_loss: bool = False) -> list[Finding]:
        """The guard's findings on this mutation; `action` is ``warn`` for what is only reported."""
        out: list[Finding] = []
        label = self.label
        if self.orphans:
            out.append(Finding("tool_pairing", f"{label} orphans "
                               f"{len(self.orphaned_calls)} tool call(s) and {len(self.orphaned_results)} "
                               f"tool result(s): {', '.join((self.orphaned_calls + self.orphaned_results)[:5])}",
                               details={"cycle": self.cycle}))
        if self.in_flight:
            out.append(Finding("tool_pairing", f"{label} drops "
                               f"{len(self.in_flight)} tool call(s) in flight, their result never arrived: "
                               + ", ".join(f"{t.id} ({t.where})" for t in self.in_flight[:5]),
                               action="warn", details={"cycle": self.cycle}))
        if self.lost:
            out.append(Finding("literal_loss", f"{label} loses "
                               f"{len(self.lost)} of {self.literals_before} protected literals",
                               action="abort" if fail_on_literal_loss else "warn", details={"cycle": self.cycle}))
        if self.hidden:  # as the guard's literal_loss check words it: nothing is known lost, so only a warning
            out.append(Finding("literal_loss", f"{label} takes {self.hidden} of {self.literals_before} protected "
                               "literals out of the readable context behind an opaque provider compaction (whether "
                               "its summary keeps them is unknown; none is counted as lost)",
                               action="warn", details={"cycle": None}))
        if self.verdict is not None and self.verdict.entered:
            out.append(Finding("contraction", f"{label} enters the "
                               f"contraction regime (onset cycle {self.verdict.onset}): net d="
                               f"{self.verdict.d_net:.3f} < r={self.verdict.r:.3f} while distances shrink and "
                               "literals are lost",
                               action="halt", details={"cycle": self.cycle, "onset": self.verdict.onset}))
        return out


@dataclass
class SessionAudit:
    """Everything the replay found in one session file (or why it could not be read)."""

    path: str
    loop_id: str
    config: DetectorConfig
    format: str | None = None
    bytes: int = 0
    records: int = 0         # the last line read (JSONL formats) or events / steps (documents)
    steps: int = 0           # buffers the model was sent (snapshots)
    messages: int = 0        # messages in the final buffer
    tool_pairs: int = 0      # distinct call ids answered, over every epoch of the session
    pending: int = 0         # calls awaiting their result at the end of the file
    buffer_orphans: list[ToolIdAt] = field(default_factory=list)  # unpaired ids in recorded buffers
    mutations: list[MutationAudit] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # what the reader learned (Session.facts)
    skipped: list[Skip] = field(default_factory=list)
    error: str | None = None

    @property
    def readable(self) -> bool:
        return self.error is None

    @property
    def verdicts(self) -> list[CycleVerdict]:
        """The verdicts of the mutations that are rewrite cycles of the alarm, in order."""
        return [m.verdict for m in self.mutations if m.verdict is not None]

    @property
    def state(self) -> str:
        """``contracting`` if the detector entered the contraction regime at any cycle."""
        return "contracting" if any(v.entered for v in self.verdicts) else "healthy"

    def session_findings(self) -> list[Finding]:
        """Findings on the session rather than on one mutation: unpaired ids in recorded buffers."""
        if not self.buffer_orphans:
            return []
        shown = ", ".join(f"{t.id} ({t.kind} at {t.where})" for t in self.buffer_orphans[:5])
        more = f" (+{len(self.buffer_orphans) - 5} more)" if len(self.buffer_orphans) > 5 else ""
        return [Finding("tool_pairing", f"{len(self.buffer_orphans)} unpaired tool id(s) in recorded buffers, "
                        f"not caused by a mutation: {shown}{more}")]

    def findings(self, fail_on_literal_loss: bool = False) -> list[Finding]:
        """Enforced findings only (those that make ``ctxwatch replay`` exit 1)."""
        return [f for m in self.mutations for f in m.findings(fail_on_literal_loss) if f.enforced] + [
            f for f in self.session_findings() if f.enforced]

    def explain(self) -> str:
        """One line: the contraction verdict and why (see `explain_cycles`)."""
        return explain_cycles(self.verdicts, self.config)


def explain_cycles(verdicts: Sequence[CycleVerdict], config: DetectorConfig) -> str:
    """The verdict over a session's rewrite cycles, with the conditions that kept it healthy."""
    if not verdicts:
        return "healthy: no rewrite cycle recorded, nothing to judge"
    entered = [v for v in verdicts if v.entered]
    if entered:
        return f"CONTRACTING from cycle {entered[0].cycle} (onset {entered[0].onset})"
    evidence = sum(v.evidence for v in verdicts)
    reasons = []
    for label, key in (("d not converging", "shrinking"), ("no literal lost / too few literals", "losing"),
                       ("d >= r", "below")):
        failed = sum(not getattr(v, key) for v in verdicts)
        if failed:
            reasons.append(f"{label} on {failed}")
    return (f"healthy: {len(verdicts)} cycle(s), {evidence} with all three conditions "
            f"(needs {config.enter_cycles} in a row); {', '.join(reasons)} of {len(verdicts)}")


def message_counts(change: Change) -> MessageCounts:
    """Kept / dropped / added by content. When the buffer after keeps every index of the one before
    with the same role (an edit in place, as SWE-agent's elided outputs), a changed message counts as
    elided (shorter) or rewritten instead of dropped and added. Only the messages between the common
    prefix and suffix are read (the rest are the same on both sides)."""
    before, after, start = change.before.messages, change.after, change.prefix_len
    gone = Counter(m.digest for _, m in change.removed)
    new = Counter(m.digest for _, m in change.added)
    elided = rewritten = 0
    in_place = len(after) >= len(before) and all(before[i].role == after[i].role for i in range(start, len(before)))
    for b, a in zip(before[start:], after[start:], strict=False) if in_place else ():
        if gone.get(b.digest, 0) > 0 and new.get(a.digest, 0) > 0:
            gone[b.digest] -= 1
            new[a.digest] -= 1
            if a.size < b.size:
                elided += 1
            else:
                rewritten += 1
    return MessageCounts(len(before), len(after), len(before) - len(change.removed), sum(gone.values()),
                         sum(new.values()), elided, rewritten)


class Observer:
    """Told about every event as the audit streams it (the OTLP backfill is one)."""

    def started(self, session: Session) -> None:
        """The session is open; its events follow (`Session.recorded_ns` says when each was written)."""

    def snapshot(self, snapshot: Snapshot) -> None:
        """A buffer the model was sent."""

    def mutation(self, mutation: Mutation, audit: MutationAudit) -> None:
        """A mutation and its audit."""


class Auditor:
    """Consumes one session's events in order and keeps the figures of `SessionAudit`."""

    def __init__(self, audit: SessionAudit, session: Session, registry: LiteralRegistry | None = None) -> None:
        self.audit = audit
        self.session = session
        self.registry = registry or LiteralRegistry()
        self.meter = CycleMeter(registry=self.registry)
        self.detector = ContractionDetector(audit.config)
        self.buffer = AuditedBuffer(strict=strict_for(audit.format), registry=self.registry)
        self._retired: set[str] = set()  # ids answered in buffers the session has left behind, not answered after
        self._retired_before = 0  # of such ids, those of the epochs before a resume (`resume`), by count
        self._last: Snapshot | None = None
        self._listed: set[str] = set()  # unpaired ids already reported (by a mutation or a buffer)
        self._read_any = False  # a message or a mutation came out of the file

    @property
    def pairs_retired(self) -> int:
        """Distinct call ids answered in buffers the session has left behind (counted in `SessionAudit.tool_pairs`)."""
        return self._retired_before + len(self._retired)

    def resume(self, after: tuple[Message, ...], detector: ContractionDetector, pairs_retired: int) -> None:
        """Go on from just after a recorded rewrite whose buffer after is `after`, with the detector and the
        count of retired pairs it left (``ctxwatch watch`` resuming a session at an epoch, `watch.checkpoint`).
        What the replay's report lists of the epochs before (their mutations, the unpaired ids named, which
        ids were retired) is not kept: a resumed audit feeds spans, not a report."""
        self.detector, self._read_any = detector, True
        self._retired, self._retired_before = set(), pairs_retired
        self.buffer.sync(after)
        if detector.cycle:  # `after` is the buffer after the last cycle (`watch.checkpoint.capture`); before the
            self.meter.resume(after)  # first cycle there is none, and the next cycle's d starts from its own P_t

    def snapshot(self, snap: Snapshot) -> None:
        if not snap.final:
            self.audit.steps += 1
        self._read_any = self._read_any or bool(snap.messages)
        self._seen(snap.line)
        self._last = snap

    def mutation(self, m: Mutation) -> MutationAudit:
        self._seen(m.line)
        self._read_any = True
        self._last = None  # the buffer recorded before is left behind (a snapshot of the one after follows)
        buf = self.buffer
        last = buf.digests  # Q_{t-1}'s when the last mutation left the buffer (the meter's and the tally's)
        grown = buf.shared(m.before)
        buf.sync(m.before, grown)
        size_before, digests_before = buf.size, buf.digests
        # where the reader says the change starts, checked (a rewind keeps all but the last few messages)
        keep = buf.shared(m.after, min(m.changed) if m.changed else None)
        calls, results, in_flight_ids = self._pairs_through(m, keep)
        self._listed.update(calls, results)
        in_flight = tuple(self._at(cid, m.where) for cid in in_flight_ids)
        change = Change(Context(m.before), m.after, "rewrite", digests_before, buf.digests, shared=keep)
        figures = self.meter.measure_change(change, buf.held, last if grown == len(last) else None)
        verdict = None if figures.d is None else self.detector.update(
            figures.d, figures.literals_before, figures.literals_lost, buf.size)
        audit = MutationAudit(
            cycle=None if verdict is None else verdict.cycle, kind=m.kind, source=m.source, step=m.step,
            where=m.where, line=m.line,
            messages=message_counts(change), size_before=size_before, size_after=buf.size,
            orphaned_calls=tuple(calls), orphaned_results=tuple(results), literals_before=figures.literals_before,
            lost=tuple(sorted(figures.lost)), verdict=verdict, trigger=m.trigger, pre_tokens=m.pre_tokens,
            summary_line=m.summary_line, summary_chars=m.summary.size if m.summary is not None else None,
            details=dict(m.details), in_flight=in_flight, no_cycle=figures.no_cycle,
            hidden=len(figures.hidden) if figures.no_cycle == OPAQUE else None)
        self.audit.mutations.append(audit)
        return audit

    def _pairs_through(self, m: Mutation, keep: int) -> tuple[list[str], list[str], list[str]]:
        """Move the followed buffer from `m.before` (where it is) to `m.after` (`keep` leading messages in
        common), listing the ids unpaired before it: (calls, results) the mutation orphans, and the calls
        in flight it drops."""
        buf = self.buffer
        before = buf.pairs
        self._orphans_in(before, m.where)
        pending, orphan_calls, orphan_results = set(before.pending), list(before.orphan_calls), list(
            before.orphan_results)
        leaving_calls, leaving_results = buf.scanner.entered_from(keep)
        paired_leaving = {c for c in (*leaving_calls, *leaving_results) if c in before.calls and c in before.results}
        buf.sync(m.after, keep)
        after = buf.pairs
        self._retired.update(c for c in paired_leaving if not (c in after.calls and c in after.results))
        # `introduced_orphans` asks the index before only which pending calls had a result then
        had_result = set(leaving_results).union(c for c in after.pending if after.results.get(c, keep) < keep)
        before_view = PairIndex(results=dict.fromkeys(had_result & after.pending, 0),
                                orphan_calls=orphan_calls, orphan_results=orphan_results)
        calls, results = introduced_orphans(before_view, after)
        return calls, results, sorted(pending - after.calls.keys())

    def finish(self, forced_format: bool = False) -> None:
        """Close the last epoch (the final buffer, or the last recorded one) and collect the skips."""
        if self._last is not None:
            self.buffer.sync(self._last.messages)
            pairs = self.buffer.pairs
            self._orphans_in(pairs, self._last.where)
            # a call Codex answered "aborted" itself (its turn was interrupted) was never answered by a tool
            # an id answered again after a step left it unanswered (or reused by a later call) is one pair
            paired = self._retired.union(c for c in pairs.calls if c in pairs.results)
            self.audit.tool_pairs = len(paired) + self._retired_before - len(self.session.facts.get(ABORTED_CALLS, ()))
            self.audit.pending = len(pairs.pending)
            self.audit.messages = len(self._last.messages)
        if not self.audit.records:
            self.audit.records = self.audit.steps
        self.audit.skipped = list(self.session.skipped)
        self.audit.facts = dict(self.session.facts)
        if self._read_any:
            return
        if self.session.skipped:  # read nothing: not "healthy"
            first = self.session.skipped[0]
            where = f"line {first.line}" if first.line is not None else first.where
            self.audit.error = (f"{self.audit.path}, {where}: {first.reason} "
                                f"(no readable record; {len(self.session.skipped)} skipped)")
        else:
            forced = " (the format forced with --format)" if forced_format else ""
            self.audit.error = f"{self.audit.path}: no {self.audit.format} record in the file{forced}"

    def _seen(self, line: int | None) -> None:
        if line is not None and line > self.audit.records:
            self.audit.records = line

    def _orphans_in(self, pairs: PairIndex, where: str) -> None:
        """List the ids unpaired in a recorded buffer that no earlier report named."""
        for kind, ids in (("tool_use", pairs.orphan_calls), ("tool_result", pairs.orphan_results)):
            for cid in ids:
                if cid not in self._listed:
                    self._listed.add(cid)
                    self.audit.buffer_orphans.append(self._at(cid, where, kind))

    def _at(self, tool_id: str, fallback: str, kind: ToolSide = "tool_use") -> ToolIdAt:
        """`tool_id` named at the record that introduced its `kind` side (the one present in the buffer)."""
        return ToolIdAt(tool_id, self.session.origin(tool_id, kind) or fallback, kind)


def audit_session(path: str | os.PathLike[str], format: str | None = None, *, strict: bool = False,
                  config: DetectorConfig | None = None,
                  observer_for: Callable[[SessionAudit], Observer] | None = None,
                  registry: LiteralRegistry | None = None) -> SessionAudit:
    """Audit one session file. An unreadable file gives a `SessionAudit` with `error` set (one line
    naming the file and, where known, the line), never an exception. `observer_for(audit)`, once
    the format is known, gives an `Observer` told about every event as it streams by."""
    audit = SessionAudit(str(path), file_loop_id(path), config or DetectorConfig())
    try:
        session = read_session(path, format, strict=strict)
        audit.format = session.format
        audit.loop_id = loop_id_for(path, session.format, file_id=audit.loop_id)
        audit.bytes = session.path.stat().st_size
        auditor = Auditor(audit, session, registry)
        observer = observer_for(audit) if observer_for is not None else None
        feed(session, auditor, observer)
        auditor.finish(forced_format=format is not None)
    except InvalidContextError as exc:
        audit.error = str(exc)
    except OSError as exc:
        audit.error = f"{path}: cannot be read ({exc.strerror or exc})"
    except Exception as exc:  # noqa: BLE001 - one line naming the file, never a traceback
        audit.error = f"{path}: cannot be audited ({type(exc).__name__}: {exc})"
    return audit


def feed(session: Session, auditor: Auditor, observer: Observer | None, *, final: bool = True) -> None:
    """Stream `session`'s events through `auditor` and then `observer`; with ``final=False`` the
    buffer left at the end of the file (never sent, see `Snapshot.final`) is passed over. An event is let go
    once handled: a followed session waits for its file to grow inside the stream, and a compaction's
    buffer before must not stay alive through that wait."""
    if observer is not None:
        observer.started(session)
    for event in session:
        if isinstance(event, Mutation):
            result = auditor.mutation(event)
            if observer is not None:
                observer.mutation(event, result)
        elif final or not event.final:
            auditor.snapshot(event)
            if observer is not None:
                observer.snapshot(event)
        del event
