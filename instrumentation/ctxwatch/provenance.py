"""Record 001, provenance: an append-only, hash-chained log of every applied mutation.

Each entry holds (span id, pre-image hash, post-image hash, pass, kind, order) and the hash of
the entry before it, so changing, removing or reordering any entry breaks the chain from there
on; `verify()` names the first entry that does not check out. Mutation passes (those that write
new content) keep the full pre-images of what they replaced in a bounded store, so what was
rewritten can be recovered; selection-only passes (pure pruning) log the set difference.
Hashes are SHA-256 so anyone can check an exported log with standard tools.

A guard runs for days, so the log is bounded: it keeps the newest `max_entries` entries (None: all)
and counts the ones it dropped (`dropped`), oldest first. Sequence numbers and links go on across the
drop, so the entries kept still verify, from the last dropped entry's hash (`anchor`) on. An export
of a log that dropped entries opens with one line saying so (``{"truncated": N, "head": anchor}``);
`verify_jsonl` checks the rest from there and reports the count (`ChainCheck.dropped`). What was
dropped can only be checked against an earlier export, whose last entry's hash is that anchor: export
the log before it fills (`export_jsonl`) to keep all of it.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

from .model import Message

GENESIS = "0" * 64
_ENCODER = json.JSONEncoder(separators=(",", ":"))
_HASHED_FIELDS = ("seq", "span_id", "pre", "post", "pass_number", "kind", "order", "prev")
# entries kept in memory by default (~0.5 kB each): about two thousand turns of a compacting agent's history
DEFAULT_MAX_ENTRIES = 10_000


def image_hash(message: Message) -> str:
    return hashlib.sha256(message.canonical()).hexdigest()


class ProvenanceEntry(NamedTuple):
    """One entry of the chain (immutable)."""

    seq: int
    span_id: str | None
    pre: str | None          # SHA-256 of the span before (None: the span is new)
    post: str | None         # SHA-256 of the span after (None: the span was removed)
    pass_number: int
    kind: str
    order: list[int] | None  # for a re-rank: the new order, as indexes into the old context
    prev: str                # hash of the previous entry (GENESIS for the first)
    hash: str

    @staticmethod
    def compute_hash(fields: dict) -> str:
        """SHA-256 over the fields in a fixed order, each as JSON (so a changed type changes the hash)."""
        body = _ENCODER.encode([fields.get(k) for k in _HASHED_FIELDS])
        return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class ChainCheck:
    """The result of verifying a chain: ok, or the first entry that fails and why."""

    ok: bool
    entries: int
    first_bad: int | None = None
    reason: str | None = None
    dropped: int = 0  # entries before the first one checked, dropped by the log's bound (unchecked)

    def __bool__(self) -> bool:
        return self.ok


# what keeping one pre-image costs besides its bytes (its hex key, the mapping's entry, the bytes object):
# counted against the bound, so that many short pre-images do not hold several times `max_bytes`
_PRE_IMAGE_OVERHEAD = 256


class PreImageStore:
    """Full pre-images of rewritten spans, bounded in total bytes, each counted with its bookkeeping
    (oldest evicted first)."""

    def __init__(self, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self.evicted = 0

    def put(self, digest: str, canonical: bytes) -> None:
        if digest in self._items or len(canonical) + _PRE_IMAGE_OVERHEAD > self.max_bytes:
            return
        self._items[digest] = canonical
        self._bytes += len(canonical) + _PRE_IMAGE_OVERHEAD
        while self._bytes > self.max_bytes:
            _, old = self._items.popitem(last=False)
            self._bytes -= len(old) + _PRE_IMAGE_OVERHEAD
            self.evicted += 1

    def get(self, digest: str) -> bytes | None:
        return self._items.get(digest)

    def __len__(self) -> int:
        return len(self._items)


class ProvenanceLog:
    """The append-only chain of one loop's applied mutations, the newest `max_entries` of it kept."""

    def __init__(self, pre_images: PreImageStore | None = None, *,
                 max_entries: int | None = DEFAULT_MAX_ENTRIES) -> None:
        self._entries: deque[ProvenanceEntry] = deque()
        self.pre_images = pre_images or PreImageStore()
        self.dropped = 0         # entries dropped from the front by the bound
        self.anchor = GENESIS    # the hash of the last dropped entry: what the first kept one links to
        self.max_entries = max_entries

    @property
    def max_entries(self) -> int | None:
        """How many entries are kept (None: all); the oldest beyond it are dropped and counted."""
        return self._entries.maxlen

    @max_entries.setter
    def max_entries(self, limit: int | None) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_entries must be a positive number of entries or None, got {limit!r}")
        self._drop(len(self._entries) - limit if limit is not None else 0)
        self._entries = deque(self._entries, maxlen=limit)

    def __len__(self) -> int:
        """The entries kept (`dropped` more were logged before them)."""
        return len(self._entries)

    def __iter__(self) -> Iterator[ProvenanceEntry]:
        return iter(self._entries)

    @property
    def head(self) -> str:
        return self._entries[-1].hash if self._entries else self.anchor

    def _drop(self, count: int) -> None:
        for _ in range(max(0, count)):
            self.anchor = self._entries.popleft().hash
            self.dropped += 1

    def _append(self, span_id, pre, post, pass_number, kind, order) -> None:
        fields = {"seq": self.dropped + len(self._entries), "span_id": span_id, "pre": pre, "post": post,
                  "pass_number": pass_number, "kind": kind, "order": order, "prev": self.head}
        fields["hash"] = ProvenanceEntry.compute_hash(fields)
        if self._entries.maxlen is not None and len(self._entries) == self._entries.maxlen:
            self._drop(1)
        self._entries.append(ProvenanceEntry(**fields))

    def record(self, *, kind: str, pass_number: int, removed: Iterable[tuple[int, Message]],
               added: Iterable[tuple[int, Message]], order: list[int] | None = None) -> None:
        """Log one applied mutation: an entry per removed and per added span, and the new order of a re-rank."""
        removed, added = list(removed), list(added)
        keep_pre_images = bool(added)  # the pass wrote content: a mutation, not a selection
        for _, m in removed:
            pre = image_hash(m)
            if keep_pre_images:
                self.pre_images.put(pre, m.canonical())
            self._append(m.id, pre, None, pass_number, kind, None)
        for _, m in added:
            self._append(m.id, None, image_hash(m), pass_number, kind, None)
        if order is not None:
            self._append(None, None, None, pass_number, kind, order)

    def verify(self) -> ChainCheck:
        """Check the entries kept, from the anchor on (`ChainCheck.dropped` says how many came before)."""
        return verify_entries((e._asdict() for e in self._entries), dropped=self.dropped, prev=self.anchor)

    def export_jsonl(self, target: str | Path | IO[str]) -> int:
        """Write the chain as JSON lines, after a ``{"truncated": N, "head": anchor}`` line when the bound
        dropped N entries; returns the number of entries written."""
        lines = [json.dumps(e._asdict(), sort_keys=True) + "\n" for e in self._entries]
        header = [json.dumps({"truncated": self.dropped, "head": self.anchor}) + "\n"] if self.dropped else []
        if isinstance(target, (str, Path)):
            Path(target).write_text("".join(header + lines), encoding="utf-8")
        else:
            target.writelines(header + lines)
        return len(lines)


def verify_entries(entries: Iterable[dict], *, dropped: int = 0, prev: str = GENESIS) -> ChainCheck:
    """Check a chain entry by entry; the first entry whose hash or link does not hold is named. A chain
    whose first `dropped` entries are gone starts at that sequence number, linked to `prev`."""
    n = 0
    for n, e in enumerate(entries, 1):
        seq = dropped + n - 1
        reason = None
        if not isinstance(e, dict):
            reason = f"not an entry (a JSON {type(e).__name__})"
        elif e.get("seq") != seq:
            reason = f"sequence number {e.get('seq')!r}, expected {seq} (an entry was removed or moved)"
        elif e.get("prev") != prev:
            reason = "does not link to the entry before it"
        elif ProvenanceEntry.compute_hash(e) != e.get("hash"):
            reason = "its content does not match its hash (tampered)"
        if reason is not None:
            return ChainCheck(False, n, seq, f"entry {seq}: {reason}", dropped)
        prev = e["hash"]
    return ChainCheck(True, n, dropped=dropped)


def verify_jsonl(path: str | Path) -> ChainCheck:
    """Verify an exported chain file; a line that is not JSON is reported as the first bad entry. A file
    that opens with a truncation line (`ProvenanceLog.export_jsonl`) is checked from there on."""
    entries = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError as exc:
                return ChainCheck(False, lineno, lineno - 1, f"{path}:{lineno}: not JSON ({exc.msg})")
    head = entries[0] if entries and isinstance(entries[0], dict) else {}
    dropped, anchor = head.get("truncated"), head.get("head")
    if isinstance(dropped, int) and not isinstance(dropped, bool) and dropped > 0 and isinstance(anchor, str):
        return verify_entries(entries[1:], dropped=dropped, prev=anchor)
    return verify_entries(entries)
