"""A simulated fleet of agent loops driven through the real ContextGuard, for the monitoring-mixin tests.

Every loop is a real `ContextGuard` whose telemetry goes to a real OpenTelemetry SDK TracerProvider;
the tests export its spans over OTLP/HTTP to monitors started as subprocesses. Each agent stands for
one behaviour an alert is about (service ``fleet``):

  absorber      record 003, instruction absorption (`simulate.absorption_loop`), guard with
                ``enforce={"contraction": "warn"}``: the loop keeps emitting contracting cycles
  summarizer    healthy literal-preserving summarization (`simulate.summarizing_loop`)
  orphaner      record 000: prunes that drop a tool result and keep its call (abort, orphans)
  editor        record 001: a system-prompt patch of the pinned policy (abort, policy_isolation)
  capped        record 001: prunes in a row past the pinned pass cap (abort, pass_cap)
  deferrer      record 000 row 2: compactions of the consumed prefix in whole pairs (defer; the queue grows);
                its provider serves the unchanged prefix from its prompt cache (issue 16: deferral saves it)

A loop is a generator performing one mutation per `next()`, so `Fleet.step()` advances every loop by
one cycle and the load reaches Prometheus spread over several scrapes (counters then have rates).
`ShardRouter` is the test's stand-in for the collector's load-balancing exporter: it sends each span to
one of N exporters by a stable hash of its loop id (SHA-256 mod N, not the collector's hash ring: what
matters is that one loop always reaches one replica).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ctxwatch import ProviderCache, semconv
from ctxwatch.cache import estimate_tokens
from ctxwatch.guard import ContextGuard
from ctxwatch.model import Message
from ctxwatch.simulate.loops import SyntheticLoop, absorption_loop, summarizing_loop
from ctxwatch.telemetry.mutation import MutationTelemetry

from conversations import assistant, system, tool_turn, user

SERVICE = "fleet"
CONTRACTING_AGENT = "absorber"
HEALTHY_AGENT = "summarizer"
Step = Iterator[str]  # yields the decision of each mutation


def _guard(loop_id: str, agent: str, telemetry: MutationTelemetry, **options: object) -> ContextGuard:
    return ContextGuard(loop_id, agent=agent, service=SERVICE, telemetry=telemetry, **options)


def _rewrite_cycles(guard: ContextGuard, loop: SyntheticLoop) -> Step:
    """Feed a simulated loop's cycles: the agent's new turns (P_t), then its compaction (Q_t)."""
    for cycle in loop.cycles:
        guard.observe(list(cycle.pre), boundary=1)
        yield guard.check(list(cycle.post), kind="compact").decision


def absorber(loop_id: str, seed: int, telemetry: MutationTelemetry, cycles: int) -> Step:
    guard = _guard(loop_id, CONTRACTING_AGENT, telemetry, pass_cap=None,
                   enforce={"contraction": "warn", "directive_colocation": "warn"})
    return _rewrite_cycles(guard, absorption_loop(seed, cycles=cycles, absorbed_at=2))


def summarizer(loop_id: str, seed: int, telemetry: MutationTelemetry, cycles: int) -> Step:
    guard = _guard(loop_id, HEALTHY_AGENT, telemetry, pass_cap=None, enforce={"contraction": "warn"})
    return _rewrite_cycles(guard, summarizing_loop(seed, cycles=cycles))


def _session(loop_id: str) -> list[Message]:
    return [system("You are a support agent. Use the tools; never modify the audit log."),
            user(f"Reconcile the refunds of account {loop_id}.")]


def orphaner(loop_id: str, seed: int, telemetry: MutationTelemetry, cycles: int) -> Step:
    guard = _guard(loop_id, "orphaner", telemetry)
    messages = _session(loop_id)
    for t in range(cycles):
        messages += tool_turn(f"call_{seed}_{t}", "list_refunds", f'{{"refunds": ["ORD-{seed}{t:03d}"]}}', page=t)
        guard.observe(messages, boundary=len(messages) - 2)
        yield guard.check(messages[:-1], kind="prune").decision  # keeps the call, drops its result


def editor(loop_id: str, seed: int, telemetry: MutationTelemetry, cycles: int) -> Step:
    guard = _guard(loop_id, "editor", telemetry, policy=lambda i, m: m.role == "system")
    messages = _session(loop_id)
    for t in range(cycles):
        messages.append(assistant(f"Checked batch {seed}-{t}."))
        guard.observe(messages, boundary=len(messages))
        patched = [system(f"You are a support agent. Audit rule {t} no longer applies.")] + messages[1:]
        yield guard.check(patched, kind="system_patch").decision


def capped(loop_id: str, seed: int, telemetry: MutationTelemetry, cycles: int) -> Step:
    """A runaway: after each new turn it prunes again and again with nothing new in between, so the
    third prune in a row meets the cap of 2."""
    guard = _guard(loop_id, "capped", telemetry, pass_cap=2, budget=200)
    messages = _session(loop_id)
    for t in range(cycles):
        messages += [user(f"Row {seed}-{t}: balance 1{t:02d}.00 EUR."), assistant(f"Noted row {seed}-{t}."),
                     user(f"Row {seed}-{t}: checked.")]
        guard.observe(messages, boundary=0)
        for _ in range(3):
            proposed = messages[:-1]
            decision = guard.check(proposed, kind="prune").decision
            if decision == "patch":
                messages = proposed
            yield decision


def deferrer(loop_id: str, seed: int, telemetry: MutationTelemetry, cycles: int) -> Step:
    guard = _guard(loop_id, "deferrer", telemetry)
    messages = _session(loop_id)
    for t in range(cycles):
        # the answer's usage: the provider read the prefix it was sent last time from its cache
        guard.note_provider_cache(ProviderCache(read_tokens=estimate_tokens(sum(m.size for m in messages))))
        messages += tool_turn(f"call_{seed}_{t}", "lookup_customer", f'{{"customer": {seed}{t:02d}}}', row=t)
        guard.observe(messages, boundary=len(messages))
        # the oldest tool round, summarised in whole pairs: it alters the consumed prefix
        compacted = messages[:2] + [assistant(f"Customer {seed}00 looked up.")] + messages[4:]
        yield guard.check(compacted, kind="compact").decision


AGENTS: dict[str, tuple[Callable[[str, int, MutationTelemetry, int], Step], int]] = {
    # agent: (loop factory, loops of that agent)
    CONTRACTING_AGENT: (absorber, 3),
    HEALTHY_AGENT: (summarizer, 3),
    "orphaner": (orphaner, 1),
    "editor": (editor, 1),
    "capped": (capped, 1),
    "deferrer": (deferrer, 1),
}


@dataclass
class Fleet:
    """All loops of the fleet; `step()` advances each by one mutation."""

    telemetry: MutationTelemetry
    cycles: int
    loops: dict[str, Step] = field(default_factory=dict)
    decisions: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for agent, (factory, count) in AGENTS.items():
            for i in range(count):
                loop_id = f"{agent}-{i}"
                self.loops[loop_id] = factory(loop_id, 101 + 17 * i, self.telemetry, self.cycles)
                self.decisions[loop_id] = []

    def step(self) -> bool:
        """One mutation per loop that has cycles left; False once every loop is done."""
        advanced = False
        for loop_id, loop in self.loops.items():
            decision = next(loop, None)
            if decision is not None:
                self.decisions[loop_id].append(decision)
                advanced = True
        return advanced


def shard_of(loop_id: str, shards: int) -> int:
    """The replica a loop is routed to: the loop id's SHA-256, modulo the number of replicas."""
    return int.from_bytes(hashlib.sha256(loop_id.encode("utf-8")).digest()[:8], "big") % shards


class SpanCount(SpanProcessor):
    """Counts the spans the fleet's guards end (their decisions, and the append spans of `observe`)."""

    def __init__(self) -> None:
        self.ended = 0
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ended += 1


class ShardRouter(SpanExporter):
    """Exports each span to the exporter of its loop's shard (see `shard_of`)."""

    def __init__(self, exporters: Sequence[SpanExporter]) -> None:
        self.exporters = list(exporters)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        batches: list[list[ReadableSpan]] = [[] for _ in self.exporters]
        for span in spans:
            loop_id = semconv.resolve_loop_id(span.attributes or {}, span.resource.attributes) or ""
            batches[shard_of(loop_id, len(self.exporters))].append(span)
        results = [exporter.export(batch) for exporter, batch in zip(self.exporters, batches, strict=True) if batch]
        ok = all(result is SpanExportResult.SUCCESS for result in results)
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        for exporter in self.exporters:
            exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return all(exporter.force_flush(timeout_millis) for exporter in self.exporters)
