"""The buffer the audit follows: kept in step with each recorded buffer at the cost of what changed.

A recorded session hands the audit whole buffers (`Snapshot.messages`, `Mutation.before` and
``after``), but between two of them only a few messages differ: appends, the last message grown by
a block, a rewind's cut, a compaction's new start. `AuditedBuffer.sync` finds the common prefix
with the buffer it holds (equal slices compare in C, identical messages by identity) and takes
back and pushes only the messages after it, keeping the digests, the running size and the pair
index (`PairScanner` with undo) of the whole buffer. So an audit of m mutations over buffers of n
messages costs the messages that changed, not m·n Python steps (bench/bench_replay.py
``rewinds``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..diff import common_prefix
from ..invariants.pairing import PairIndex, PairScanner
from ..model import Message


class AuditedBuffer:
    """One session's current buffer: its messages, their digests, sizes and tool pairs."""

    def __init__(self, *, strict: bool) -> None:
        self.messages: list[Message] = []
        self.digests: list[int] = []
        self._sizes: list[int] = [0]  # _sizes[i]: characters of the first i messages
        self.scanner = PairScanner(strict=strict, undo=True)

    @property
    def size(self) -> int:
        """Characters of readable text in the buffer (`Message.size` summed)."""
        return self._sizes[-1]

    @property
    def pairs(self) -> PairIndex:
        return self.scanner.pairs()

    def shared(self, buffer: Sequence[Message]) -> int:
        """How many leading messages `buffer` has in common with this one."""
        return common_prefix(self.messages, list(buffer))

    def sync(self, buffer: Sequence[Message], shared: int | None = None) -> None:
        """Become `buffer` (`shared`: its common prefix with this one, when already known)."""
        keep = self.shared(buffer) if shared is None else shared
        del self.messages[keep:], self.digests[keep:], self._sizes[keep + 1:]
        self.scanner.truncate(keep)
        total = self._sizes[-1]
        for m in buffer[keep:]:
            self.messages.append(m)
            self.digests.append(m.digest)
            total += m.size
            self._sizes.append(total)
            self.scanner.push(m)
