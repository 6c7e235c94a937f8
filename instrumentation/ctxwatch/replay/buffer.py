"""The buffer the audit follows: kept in step with each recorded buffer at the cost of what changed.

A recorded session hands the audit whole buffers (`Snapshot.messages`, `Mutation.before` and
``after``), but between two of them only a few messages differ: appends, the last message grown by
a block, a rewind's cut, a compaction's new start. `AuditedBuffer.sync` finds the common prefix
with the buffer it holds (equal slices compare in C, identical messages by identity) and takes
back and pushes only the messages after it, keeping the digests, the running size and the pair
index (`PairScanner` with undo) of the whole buffer (`AuditedBuffer`; the OTLP backfill follows its own,
with a literal tally). So an audit of m mutations over buffers of n
messages costs the messages that changed, not m·n Python steps (bench/bench_replay.py
``rewinds``).
"""

from __future__ import annotations

from ..diff import common_prefix
from ..invariants.pairing import PairIndex, PairScanner
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

    def shared(self, buffer: tuple[Message, ...]) -> int:
        """How many leading messages `buffer` has in common with this one."""
        return common_prefix(self.messages, buffer)

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
    """The buffer the audit measures mutations on: also its tool pairs (`PairScanner` with undo)."""

    def __init__(self, *, strict: bool) -> None:
        super().__init__()
        self.scanner = PairScanner(strict=strict, undo=True)

    @property
    def pairs(self) -> PairIndex:
        return self.scanner.pairs()

    def _take_back(self, keep: int) -> None:
        self.scanner.truncate(keep)

    def _push(self, message: Message) -> None:
        self.scanner.push(message)
