"""The buffer the audit follows: kept in step with each recorded buffer at the cost of what changed.

A recorded session hands the audit whole buffers (`Snapshot.messages`, `Mutation.before` and
``after``), but between two of them only a few messages differ: appends, the last message grown by
a block, a rewind's cut, a compaction's new start. `AuditedBuffer.sync` finds the common prefix
with the buffer it holds (equal slices compare in C, identical messages by identity) and takes
back and pushes only the messages after it, keeping the digests, the running size and the pair
index (`PairScanner` with undo) of the whole buffer (`AuditedBuffer`; the OTLP backfill follows its own,
with a literal tally). `AuditedBuffer.held` answers which of a rewrite's candidate literals the buffer
still holds from a tally of the messages whose literals were read, reading the others lazily (a
message is scanned for the candidates once, and its literals are extracted the next time it is asked
about, so each message costs at most one scan and one extraction over the whole session). So an audit
of m mutations over buffers of n messages costs the messages that changed, not m·n Python steps
(bench/bench_replay.py ``rewinds``).
"""

from __future__ import annotations

from collections import Counter

from ..diff import common_prefix
from ..invariants.pairing import PairIndex, PairScanner
from ..literals import LiteralRegistry, literal_text
from ..model import Message


class FollowedBuffer:
    """One session's current buffer: its messages, their digests and sizes; subclasses follow more
    (`_take_back` and `_push` are told which messages leave and which come).

    `messages` and `digests` are replaced, never changed in place, by `sync`: the ones of the buffer
    before stay valid for whoever holds them (a mutation's measurement reads both sides)."""

    def __init__(self) -> None:
        self.messages: tuple[Message, ...] = ()
        self.digests: list[int] = []
        self._sizes: list[int] = [0]  # _sizes[i]: characters of the first i messages

    @property
    def size(self) -> int:
        """Characters of readable text in the buffer (`Message.size` summed)."""
        return self._sizes[-1]

    def shared(self, buffer: tuple[Message, ...], guess: int | None = None) -> int:
        """How many leading messages `buffer` has in common with this one (`guess`: see `common_prefix`)."""
        return common_prefix(self.messages, buffer, guess)

    def sync(self, buffer: tuple[Message, ...], shared: int | None = None) -> None:
        """Become `buffer` (`shared`: its common prefix with this one, when already known)."""
        keep = self.shared(buffer) if shared is None else shared
        if keep == len(self.messages) == len(buffer):
            self.messages = buffer
            return
        del self._sizes[keep + 1:]
        self._take_back(keep)
        total, added = self._sizes[-1], buffer[keep:]
        for m in added:
            total += m.size
            self._sizes.append(total)
            self._push(m)
        self.messages = buffer
        self.digests = self.digests[:keep] + [m.digest for m in added]

    def _take_back(self, keep: int) -> None:
        """The messages from index `keep` on leave the buffer (still in `messages` now)."""

    def _push(self, message: Message) -> None:
        """`message` joins the end of the buffer."""


class AuditedBuffer(FollowedBuffer):
    """The buffer the audit measures mutations on: also its tool pairs (`PairScanner` with undo) and
    which literals it holds (`held`)."""

    def __init__(self, *, strict: bool, registry: LiteralRegistry) -> None:
        super().__init__()
        self.scanner = PairScanner(strict=strict, undo=True)
        self.registry = registry
        self._literals: list[frozenset[str] | None] = []  # per message: its literals, None while not read
        self._holders: Counter[str] = Counter()  # literal -> messages read that hold it
        self._unread: dict[int, bool] = {}  # index of each message not read -> whether it was scanned once

    @property
    def pairs(self) -> PairIndex:
        return self.scanner.pairs()

    def held(self, candidates: set[str]) -> set[str]:
        """The `candidates` that are literals of some message of the buffer (``LiteralRegistry.held_by``
        of the whole buffer, at the cost of the messages not read before)."""
        holders, unread = self._holders, self._unread
        held = {lit for lit in candidates if lit in holders}
        left = candidates - held
        read: list[int] = []
        for at, scanned in unread.items() if left else ():
            message = self.messages[at]
            if not scanned:
                text = literal_text(message) if message.tool_calls else message.text
                if not any(lit in text for lit in left):
                    unread[at] = True  # the next time, it is read
                    continue
            found = self._literals[at] = self.registry.of(message)
            holders.update(found)
            read.append(at)
            hit = left.intersection(found)
            held |= hit
            left -= hit
            if not left:
                break
        for at in read:
            del unread[at]
        return held

    def _take_back(self, keep: int) -> None:
        self.scanner.truncate(keep)
        holders = self._holders
        for at in range(keep, len(self._literals)):
            found = self._literals[at]
            if found is None:
                del self._unread[at]
                continue
            for lit in found:
                if holders[lit] == 1:
                    del holders[lit]
                else:
                    holders[lit] -= 1
        del self._literals[keep:]

    def _push(self, message: Message) -> None:
        self.scanner.push(message)
        self._unread[len(self._literals)] = False
        self._literals.append(None)
