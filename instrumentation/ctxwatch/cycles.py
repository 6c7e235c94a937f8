"""The measurement of one rewrite cycle: d_t and r_t, the contraction detector's inputs.

This is the only place the figures are computed (`_figures`). The guard calls `measure_cycle` for
every rewrite it measures, from its running state; `CycleMeter` feeds `_figures` for callers that
hold whole buffers (`ctxwatch replay`, the simulated loops, the calibration in
`bench/calibrate_alarm.py`), keeping the state the guard keeps and reaching the same figures, bit for
bit, by a cheaper way through whole buffers. So every figure in docs/alarm.md is what a user's
guard computes, and the monitor, which rebuilds the detector from the figures the guard puts on its
spans, sees the same numbers.

For cycle t, with P_t the buffer before the rewrite and Q_t the buffer after it:

- ``d_t = distance(fp(Q_{t-1}), fp(Q_t))``, Q_{t-1} the buffer after the previous applied rewrite
  (appends made since are part of d_t); for the first cycle, ``distance(fp(P_1), fp(Q_1))``.
- the literals that count are the *downstream* literals of P_t (`LiteralRegistry.downstream`):
  those of the system prompt, the user's and the agent's own text and the agent's tool arguments,
  not those that only appear in tool output; ``L_t`` = how many of them appear nowhere in Q_t
  (a literal the rewrite moved into a tool result, or into a longer literal, survives), and
  ``r_t = L_t / |downstream(P_t)|`` (0 when there are none).

Which changes are cycles is one rule, `no_cycle_reason(change)`, which the guard, `CycleMeter` (so the
simulated loops and the calibration), `ctxwatch replay` and, through the spans, the monitor all follow
(docs/alarm.md "What is a cycle"). A change is **no** rewrite cycle of the alarm when it is

- an *append* (P_t a prefix of Q_t);
- *opaque*: its added messages hold a provider compaction the client cannot read
  (`hides_rewritten_content`: OpenAI Responses' ``compaction`` item, whose summary is
  ``encrypted_content``; Anthropic's ``compaction`` block as the adapters read it, an `OpaquePart`). The
  downstream literals it removes from view may be behind the stand-in, so they are *hidden*
  (`CycleFigures.hidden`), not lost: L_t and r_t are unknown, and a cycle whose loss is unknown is no
  evidence for or against the regime;
- an *elision* (`deferral.elides_only`): it only removes messages or parts of them, or replaces old tool
  output by a short placeholder that carries nothing of it, adding nothing of its own but a plain elision
  marker; it reworks no earlier rewrite's output, which is what record 003's contraction is made of.

Such a change is still measured where the caller reports it (its literals before, and lost or hidden),
but it has no d_t, the detector is not fed, its span carries no ``ctxwatch.hash.distance`` (so the monitor
does not feed its detector with it either, `semconv.feeds_detector`) and Q_{t-1} stays the buffer after
the last cycle: the next cycle's d spans it, like appends made in between.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .deferral import elides_only
from .diff import Change
from .fingerprint import BufferFingerprint, Fingerprinter, distance
from .literals import LiteralRegistry
from .model import Context, Message, OpaquePart

# The kinds of `OpaquePart` that stand in for rewritten content the client cannot read: OpenAI Responses'
# ``compaction`` item and Anthropic's ``compaction`` block (both read under their type).
OPAQUE_COMPACTION_KINDS: frozenset[str] = frozenset({"compaction"})


def hides_rewritten_content(added: Iterable[Message]) -> bool:
    """Whether the messages a rewrite adds hold an opaque provider compaction: literals the rewrite removes
    from view may be behind it (unknown), not lost."""
    return any(type(p) is OpaquePart and p.kind in OPAQUE_COMPACTION_KINDS for m in added for p in m.parts)


APPEND, OPAQUE, ELISION = "append", "opaque", "elision"  # why a change is no cycle (`no_cycle_reason`)


def no_cycle_reason(change: Change) -> str | None:
    """The one rule of what is a rewrite cycle of the contraction alarm: None when `change` is one, else why
    it is not: `APPEND` (Q_t extends P_t), `OPAQUE` (it adds a provider compaction the client cannot read:
    its loss is unknown) or `ELISION` (it writes nothing of its own, `deferral.elides_only`)."""
    if change.is_append_only:
        return APPEND
    if hides_rewritten_content(change.added_messages):
        return OPAQUE
    if elides_only(change):
        return ELISION
    return None


@dataclass(frozen=True)
class CycleFigures:
    """The figures of one measured change: what a cycle feeds the detector, the lost values (never sent
    anywhere) and the fingerprint of Q_t (the guard keeps it as the next cycle's Q_{t-1} once the rewrite
    is applied; None where `CycleMeter` had no need of it: a change that is no cycle).

    `no_cycle` says why the change is no cycle of the alarm (`no_cycle_reason`; None: it is one); then
    `d` is None. The downstream literals that left the readable context are `lost`, or, for an opaque
    rewrite, `hidden` (behind the compaction, not known lost: `lost` is empty and r unknown)."""

    d: float | None
    literals_before: int
    literals_lost: int
    lost: frozenset[str]
    fp_after: BufferFingerprint | None
    no_cycle: str | None = None
    hidden: frozenset[str] = frozenset()

    @property
    def is_cycle(self) -> bool:
        """Whether the change is a rewrite cycle of the alarm (the detector is fed its d and r)."""
        return self.no_cycle is None

    @property
    def r(self) -> float | None:
        """The literal-loss rate r_t (0 when there were no literals); None for an opaque rewrite (unknown)."""
        if self.no_cycle == OPAQUE:
            return None
        return self.literals_lost / self.literals_before if self.literals_before else 0.0


def measure_cycle(change: Change, fp_before: BufferFingerprint, last_rewrite: BufferFingerprint | None,
                  registry: LiteralRegistry, counts: Mapping[str, int], *, no_cycle: str | None) -> CycleFigures:
    """The figures of the rewrite `change` (P_t = ``change.before``, Q_t = ``change.after``), given the
    fingerprint of P_t, that of the buffer after the previous cycle of the alarm (None: first cycle),
    `counts`, how many messages of P_t hold each of its literals (so the loss costs the change's size), and
    `no_cycle`, ``no_cycle_reason(change)`` (the caller has it already). fp(Q_t) is always computed: the
    guard follows its buffer's fingerprint through every change."""
    removed: Counter[str] = Counter()
    for m in change.removed_messages:
        removed.update(registry.of(m))
    added = registry.of_all(change.added_messages)

    def held_after(candidates: set[str]) -> set[str]:  # a kept message or an added one holds it
        return {lit for lit in candidates if counts.get(lit, 0) > removed[lit] or lit in added}

    fp_after = fp_before.updated(change.removed_messages, change.added_messages)
    d = None if no_cycle is not None else distance(last_rewrite if last_rewrite is not None else fp_before, fp_after)
    return _figures(change, d, fp_after, no_cycle, registry, held_after)


def _figures(change: Change, d: float | None, fp_after: BufferFingerprint | None, no_cycle: str | None,
             registry: LiteralRegistry, held_after: Callable[[set[str]], set[str]],
             extends: Sequence[int] | None = None) -> CycleFigures:
    """The figures of `change`, given its d (None: no cycle) and fp(Q_t): the downstream literals of P_t,
    and the downstream literals of the removed messages that `held_after` does not find in Q_t, lost (or
    hidden behind Q_t when the rewrite is opaque). `extends`: a digest list P_t's extend, when the caller
    knows one."""
    candidates = registry.downstream_of_all(change.removed_messages)
    gone = frozenset(candidates - held_after(candidates))
    before = registry.downstream_count(change.before.messages, change.before_digests, rewrite=(
        change.removed_messages, change.added_messages, change.after_digests), extends=extends)
    if no_cycle == OPAQUE:
        return CycleFigures(d, before, 0, frozenset(), fp_after, no_cycle, gone)
    return CycleFigures(d, before, len(gone), gone, fp_after, no_cycle)


class CycleMeter:
    """Measures successive (P_t, Q_t) pairs of whole buffers as the guard does (`measure_cycle`'s
    figures, the cycles by `no_cycle_reason`), keeping the fingerprint of the buffer after the last cycle
    as the guard does.

    Whole buffers let it skip what the guard gets from its running state: fp(Q_t) is computed from
    fp(Q_{t-1}) (only the messages that differ between the two; a compaction's epoch in between is
    never fingerprinted), and not at all for a change that is no cycle (its d is not measured), and
    whether Q_t holds a lost literal is looked up in Q_t itself (`LiteralRegistry.held_by`), so tool
    output is extracted only where a candidate appears. The figures are the same, bit for bit
    (tests/instrumentation/test_cycles.py)."""

    def __init__(self, fingerprinter: Fingerprinter | None = None,
                 registry: LiteralRegistry | None = None) -> None:
        self.fingerprinter = fingerprinter or Fingerprinter()
        self.registry = registry or LiteralRegistry()
        self._last: BufferFingerprint | None = None
        self._last_digests: list[int] = []

    def resume(self, post: Sequence[Message]) -> None:
        """Take `post` as the buffer after the last cycle (an audit resumed after it: its fingerprint is that
        of `post`'s messages, as `measure` left it)."""
        self._last, self._last_digests = self.fingerprinter.buffer(post), [m.digest for m in post]

    def measure(self, pre: Sequence[Message], post: Sequence[Message]) -> CycleFigures:
        """The figures of the change P_t -> Q_t, recorded as applied (a cycle moves Q_{t-1})."""
        return self.measure_change(Change.between(Context(tuple(pre)), tuple(post), "rewrite"))

    def measure_change(self, change: Change, held_after: Callable[[set[str]], set[str]] | None = None,
                       extends: Sequence[int] | None = None) -> CycleFigures:
        """As `measure`, for a `Change` whose digests the caller already keeps (replay follows its
        buffer incrementally, so building the change costs no pass over the messages); `held_after`,
        when the caller follows Q_t's literals itself, says which candidates Q_t holds (as
        `LiteralRegistry.held_by` of ``change.after`` would); `extends`, when the caller knows it, is a
        digest list that ``change.before_digests`` extend: when it is the very list of the previous
        cycle's Q_{t-1}, P_t is not compared with Q_{t-1} again (nor by the downstream tally, whose
        previous buffer is the previous change's)."""
        return self._measure(change, no_cycle_reason(change), held_after, extends)

    def cycle(self, pre: Sequence[Message], post: Sequence[Message]) -> CycleFigures | None:
        """As `measure`, but None for a change that is no rewrite cycle of the alarm (`no_cycle_reason`: a pure
        append, an elision, an opaque compaction), which is then not measured."""
        change = Change.between(Context(tuple(pre)), tuple(post), "rewrite")
        no_cycle = no_cycle_reason(change)
        return None if no_cycle is not None else self._measure(change, no_cycle)

    def _measure(self, change: Change, no_cycle: str | None, held_after: Callable[[set[str]], set[str]] | None = None,
                 extends: Sequence[int] | None = None) -> CycleFigures:
        d = fp_after = None
        if no_cycle is None:
            if self._last is None:
                base = self.fingerprinter.buffer(change.before.messages)
                fp_after = base.updated(change.removed_messages, change.added_messages)
            else:
                base = self._last
                fp_after = self._fingerprint_after(change, extends is self._last_digests)
            d = distance(base, fp_after)
            self._last, self._last_digests = fp_after, change.after_digests
        return _figures(change, d, fp_after, no_cycle, self.registry,
                        held_after or (lambda candidates: self.registry.held_by(change.after, candidates)), extends)

    def _fingerprint_after(self, change: Change, extends_last: bool = False) -> BufferFingerprint:
        """fp(Q_t) from fp(Q_{t-1}), by the shorter way (both give the same sums): through P_t when P_t
        extends Q_{t-1} by fewer messages, with the change's, than Q_t holds (a rewind of a long
        buffer: only the appends and the change are read), else directly from the messages Q_{t-1}
        and Q_t do not share (a compaction: the epoch in between is never read). `extends_last`: the
        caller knows P_t extends Q_{t-1}."""
        last, pre = self._last_digests, change.before_digests
        appended = len(pre) - len(last)
        if (self._last is not None and appended >= 0
                and appended + len(change.removed) + len(change.added) < len(change.after)
                and (extends_last or pre[: len(last)] == last)):
            grown = self._last.updated((), change.before.messages[len(last):])
            return grown.updated(change.removed_messages, change.added_messages)
        return self.fingerprinter.buffer(change.after, base=self._last)
