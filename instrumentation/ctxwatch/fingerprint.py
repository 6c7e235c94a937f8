"""Locality-sensitive buffer fingerprints (SimHash family) with exact incremental updates.

The fingerprint of a buffer is a signed random projection of its feature-count vector, the
quantity whose signs are Charikar's SimHash. Features are the distinct lower-cased word bigrams
of each message (punctuation is a word break; a message without words contributes one feature
naming its canonical digest, so a swapped image still counts). Each feature is hashed with
xxh3-64 under a fixed seed — never Python's per-process `hash()` — to one of `lanes` lanes
(default 512) and a sign, as in a count sketch. A message's contribution is that signed lane
vector; a buffer's fingerprint is the exact integer sum of its messages' contributions.

Because the sum is exact integer arithmetic, removing a message subtracts precisely what adding
it added: an incrementally updated fingerprint *equals* a full recompute, and a rewrite that
changed 5 of 500 messages costs 5 messages. The buffer's lane vector is packed into one Python
integer (32-bit lanes, offset-binary on decode). A message's contribution is kept as its features'
lane codes (2 bytes a feature), or packed like a buffer when that is smaller (more than
``2 · lanes`` features); an update counts the codes of all the messages it adds or removes at once
(`collections.Counter`, in C) and packs the counts once, instead of stepping a lane vector per
feature in Python. Contributions are cached per message digest in a cache bounded by entries and by
bytes (`CACHE_LIMIT`, `CACHE_BYTES`: each entry counted with its bookkeeping), oldest out first.

Distance is the angle between two projections, normalised to [0, 1]: ``d = 2·θ/π`` where
``cos θ`` is the cosine of the two lane vectors. Identical buffers give 0, buffers with no
bigram in common give ~1 (feature vectors are non-negative, so the true angle is at most 90°;
estimates past it are clipped). The scale — replacing 10% of the words of a buffer gives about
0.28 — is part of the contraction alarm's definition and is documented with its measurements in
docs/alarm.md (`bench/bench_fingerprint.py` prints them).
"""

from __future__ import annotations

import math
import sys
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, repeat
from operator import mul

import xxhash

from .model import Message

LANES = 512
FEATURE_SEED = 0x63747877  # "ctxw": fixed, so fingerprints agree across processes and hosts
CACHE_LIMIT = 8192
CACHE_BYTES = 2 * 1024 * 1024  # per fingerprinter (one per guard): a full cache of long messages held ~9 MB
_ENTRY_BYTES = 200  # a cached entry's bookkeeping: the Contribution, its array or int header, the dict slot

_LANE_BITS = 32
_BIAS = 1 << (_LANE_BITS - 1)
_MAX_FEATURES = _BIAS - 1  # no lane can overflow while the buffer has fewer features than this
PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^`{|}~"
# A word is a run of characters that are neither white space nor punctuation: with every punctuation
# mark turned into a space, `str.split()` yields exactly the words (it splits on what regular
# expressions call `\s`), in one C pass instead of a regular expression's per-character steps. The
# marks are turned into spaces in the UTF-8 bytes (every mark is ASCII, and no byte of a multi-byte
# character is): `str.translate` has a fast path only for ASCII text and is ~100x slower on the rest.
_BREAKS = bytes.maketrans(PUNCTUATION.encode(), b" " * len(PUNCTUATION))


def _surrogates_replaced(message: Message) -> Message:
    """A stand-in for the features of a message whose text holds lone surrogates, which xxhash
    cannot hash (they have no UTF-8): the same text with each one read as U+FFFD."""
    text = message.text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return Message(message.role, text)


def _words(text: str) -> list[str]:
    """The lower-cased words of a text (lone surrogates pass through the bytes unchanged)."""
    return text.lower().encode("utf-8", "surrogatepass").translate(_BREAKS).decode("utf-8", "surrogatepass").split()


def message_features(message: Message) -> set[str]:
    """The distinct features of one message: lower-cased word bigrams (one word: the word)."""
    words = _words(message.text)
    if len(words) > 1:
        return set(map(" ".join, zip(words, words[1:], strict=False)))
    if words:
        return set(words)
    return {f"\x00{message.role}\x00{message.digest_hex}"}


class Contribution:
    """One message's signed lane vector: the lane codes of its features (`codes`: code = the
    feature's hash mod ``2 · lanes``, lane ``code >> 1``, +1 when the code is odd, -1 when even), or
    for a message with more features than that is worth, the vector packed (`dense`)."""

    __slots__ = ("codes", "dense", "features", "fingerprinter")

    def __init__(self, fingerprinter: Fingerprinter, codes: array[int]) -> None:
        self.fingerprinter = fingerprinter
        self.features = len(codes)
        if self.features * codes.itemsize < 4 * fingerprinter.lanes:
            self.codes: array[int] | None = codes
            self.dense: int | None = None
        else:
            self.codes, self.dense = None, fingerprinter.pack(Counter(codes))

    @property
    def nbytes(self) -> int:
        """What keeping this contribution in a cache costs: its codes (or packed vector) and bookkeeping."""
        held = self.codes.itemsize * len(self.codes) if self.codes is not None else (self.dense or 0).bit_length() // 8
        return held + _ENTRY_BYTES

    @property
    def packed(self) -> int:
        """The signed lane vector packed into one integer (as `Fingerprinter.decode` reads it)."""
        if self.dense is not None:
            return self.dense
        return self.fingerprinter.pack(Counter(self.codes))


class Fingerprinter:
    """Computes message contributions (cached by digest) and buffer fingerprints.

    `lanes` (a power of two) and `seed` define the fingerprint: distances are only defined
    between fingerprints made with the same pair. `cache_limit` bounds the number of cached
    message contributions (each is 2 bytes a feature, at most ``4 · lanes`` bytes), `cache_bytes`
    what they hold (`Contribution.nbytes`); when either is reached the oldest half goes.
    """

    def __init__(self, lanes: int = LANES, *, seed: int = FEATURE_SEED,
                 cache_limit: int = CACHE_LIMIT, cache_bytes: int = CACHE_BYTES) -> None:
        if lanes < 8 or lanes & (lanes - 1):
            raise ValueError(f"lanes must be a power of two >= 8, got {lanes}")
        if cache_limit < 1:
            raise ValueError(f"cache_limit must be >= 1, got {cache_limit}")
        if type(cache_bytes) is not int or cache_bytes < 1:
            raise ValueError(f"cache_bytes must be a positive int, got {cache_bytes!r}")
        self.lanes = lanes
        self.seed = seed
        self.cache_limit = cache_limit
        self.cache_bytes = cache_bytes
        self._cached_bytes = 0
        self._mask = 2 * lanes - 1
        self._typecode = "H" if 2 * lanes <= 1 << 16 else "I"
        width = array(self._typecode).itemsize
        # each byte of a lane code (lowest first), as a table that masks the same byte of a hash
        self._code_bytes = [bytes(b & (self._mask >> 8 * k) for b in range(256)) for k in range(width)]
        self._no_codes = array("I", bytes(8 * lanes))  # a count per lane code, all zero
        self._offset = int.from_bytes(array("I", repeat(_BIAS, lanes)), "little")  # every lane at zero, offset-binary
        self._cache: dict[int, Contribution] = {}

    @property
    def config(self) -> tuple[int, int]:
        return (self.lanes, self.seed)

    @property
    def cached(self) -> int:
        """How many message contributions the cache holds."""
        return len(self._cache)

    @property
    def cached_bytes(self) -> int:
        """What the cached contributions hold, counted as `cache_bytes` bounds it."""
        return self._cached_bytes

    def clear(self) -> None:
        """Empty the contribution cache (fingerprints already made keep their contributions)."""
        self._cache.clear()
        self._cached_bytes = 0

    def message(self, message: Message) -> Contribution:
        """The contribution of one message, computed once per distinct content."""
        key = message.digest
        found = self._cache.get(key)
        if found is None:
            try:
                found = self._compute(message)
            except UnicodeEncodeError:  # a lone surrogate in the text (JSON's "\ud800" reads as one)
                found = self._compute(_surrogates_replaced(message))
            size = found.nbytes
            if size <= self.cache_bytes:  # one larger than the whole bound is not kept, and evicts nothing
                if len(self._cache) >= self.cache_limit or self._cached_bytes + size > self.cache_bytes:
                    self._evict_oldest_half()
                self._cache[key] = found
                self._cached_bytes += size
        return found

    def _evict_oldest_half(self) -> None:
        """Drop the oldest entries until the cache holds at most half of either bound."""
        oldest = iter(list(self._cache))
        while self._cache and (len(self._cache) > self.cache_limit // 2
                               or self._cached_bytes > self.cache_bytes // 2):
            self._cached_bytes -= self._cache.pop(next(oldest)).nbytes

    def _compute(self, message: Message) -> Contribution:
        # the lane codes (each feature's xxh3-64 mod 2 · lanes) cut from the joined 8-byte hashes in
        # C: the hashes are big-endian, so a code's k-th byte is every hash's (7 - k)-th, masked
        hashes = b"".join(map(xxhash.xxh3_64_digest, message_features(message), repeat(self.seed)))
        width = len(self._code_bytes)
        codes = bytearray(len(hashes) // 8 * width)
        for k, table in enumerate(self._code_bytes):
            codes[k::width] = hashes[7 - k::8].translate(table)
        lane_codes = array(self._typecode, codes)
        if sys.byteorder == "big":
            lane_codes.byteswap()
        return Contribution(self, lane_codes)

    def pack(self, counts: Mapping[int, int], minus: Mapping[int, int] | None = None) -> int:
        """The packed signed lane vector of a count of lane codes (code -> how many features have
        it), less that of `minus` (a feature taken away counts as one of the opposite sign)."""
        tally = array("I", self._no_codes)
        for code, count in counts.items():  # at most 2 · lanes steps, often far fewer
            tally[code] = count
        for code, count in (minus or {}).items():
            tally[code ^ 1] += count
        return int.from_bytes(tally[1::2], "little") - int.from_bytes(tally[0::2], "little")

    def delta(self, added: Iterable[Contribution], removed: Iterable[Contribution] = ()) -> int:
        """The packed sum of the `added` contributions less that of the `removed` ones (all made by
        this fingerprinter): their codes counted at once and packed once, the dense ones added."""
        packed = 0
        counts = []
        for contributions, sign in ((added, 1), (removed, -1)):
            codes: list[array[int]] = []
            for contrib in contributions:
                if contrib.codes is not None:
                    codes.append(contrib.codes)
                elif contrib.dense is not None:
                    packed += sign * contrib.dense
            counts.append(Counter(chain.from_iterable(codes)))
        return packed + self.pack(*counts)

    def buffer(self, messages: Iterable[Message], *,
               base: BufferFingerprint | None = None) -> BufferFingerprint:
        """The fingerprint of a buffer. With `base` (the fingerprint of an earlier buffer made by
        this fingerprinter) only the messages that differ between the two are processed."""
        if base is None:
            return BufferFingerprint(self, 0, 0, {}).updated((), messages)
        self._check_same(base)
        counts: Counter[int] = Counter()
        first: dict[int, Message] = {}
        for m in messages:
            counts[m.digest] += 1
            first.setdefault(m.digest, m)
        removed: list[int] = []
        added: list[Message] = []
        members = base.members
        for digest, (had, _) in members.items():
            removed.extend(repeat(digest, had - counts.get(digest, 0)))
        for digest, has in counts.items():
            entry = members.get(digest)
            added.extend(repeat(first[digest], has - (entry[0] if entry else 0)))
        return base._apply(removed, added)

    def _check_same(self, fp: BufferFingerprint) -> None:
        if fp.config != self.config:
            raise ValueError(f"fingerprint made with (lanes, seed) {fp.config}, "
                             f"this fingerprinter uses {self.config}")

    def decode(self, packed: int) -> list[int]:
        """The signed lane vector of a packed sum. Offset-binary lanes with their top bit flipped are
        two's complement ones: read as signed 32-bit integers in C."""
        offset = self._offset
        return array("i", ((packed + offset) ^ offset).to_bytes(4 * self.lanes, "little")).tolist()


class _Version:
    """One version of a family of member maps that share one dict (Baker's rerooting): the newest
    version read holds the dict (`undo` is None); every other one holds the changes that turn
    `toward`'s map into its own. Reading an older version moves the dict to it, reversing the path,
    so each version stays exactly what it was and an update costs the messages it changes."""

    __slots__ = ("members", "undo", "toward", "lock")

    def __init__(self, members: dict[int, tuple[int, Contribution]], lock: threading.Lock) -> None:
        self.members = members
        self.undo: dict[int, tuple[int, Contribution] | None] | None = None
        self.toward: _Version | None = None
        self.lock = lock

    def reroot(self) -> dict[int, tuple[int, Contribution]]:
        """Make this version hold the shared dict (call with `lock` held) and return it."""
        path = [self]
        while path[-1].undo is not None:
            path.append(path[-1].toward)  # type: ignore[arg-type]
        for child, root in zip(reversed(path[:-1]), reversed(path[1:]), strict=True):
            members, changes = root.members, child.undo
            assert changes is not None
            root.undo, root.toward, root.members = _restore(members, changes), child, {}
            child.undo, child.toward, child.members = None, None, members
        return self.members


def _restore(members: dict[int, tuple[int, Contribution]],
             changes: Mapping[int, tuple[int, Contribution] | None]) -> dict[int, tuple[int, Contribution] | None]:
    """Set each digest of `changes` back to its entry there (None: not a member); return the changes
    that would undo this."""
    inverse: dict[int, tuple[int, Contribution] | None] = {}
    for digest, entry in changes.items():
        inverse[digest] = members.get(digest)
        if entry is None:
            del members[digest]
        else:
            members[digest] = entry
    return inverse


class BufferFingerprint:
    """The fingerprint of one buffer: the packed lane sum, its feature count, and the multiset of
    member messages (digest -> (count, contribution)), so later updates never need the cache.

    Immutable: `updated` returns a new fingerprint. Two fingerprints are equal when they were made
    with the same configuration from the same multiset of messages. The fingerprints updated from one
    another share one member dict (`_Version`), so an update does not copy the members.
    """

    __slots__ = ("fingerprinter", "packed", "features", "_version", "_vector", "_norm")

    def __init__(self, fingerprinter: Fingerprinter, packed: int, features: int,
                 members: Mapping[int, tuple[int, Contribution]]) -> None:
        self.fingerprinter = fingerprinter
        self.packed = packed
        self.features = features
        self._version = _Version(dict(members), threading.Lock())
        self._vector: list[int] | None = None
        self._norm: float | None = None

    @property
    def members(self) -> Mapping[int, tuple[int, Contribution]]:
        """The member multiset: digest -> (count, contribution); a copy, valid after later updates."""
        version = self._version
        with version.lock:
            return dict(version.reroot())

    @property
    def config(self) -> tuple[int, int]:
        return self.fingerprinter.config

    @property
    def size(self) -> int:
        """Number of messages in the buffer."""
        return sum(count for count, _ in self.members.values())

    def updated(self, removed: Iterable[Message], added: Iterable[Message]) -> BufferFingerprint:
        """The fingerprint after removing `removed` and adding `added` (each counted with
        multiplicity). Removing a message that is not in the buffer raises ValueError."""
        return self._apply([m.digest for m in removed], added)

    def _apply(self, removed: Sequence[int], added: Iterable[Message]) -> BufferFingerprint:
        version = self._version
        with version.lock:
            members = version.reroot()
            undo: dict[int, tuple[int, Contribution] | None] = {}
            try:
                packed, features = self._change(members, undo, removed, added)
            except BaseException:
                _restore(members, undo)  # leave this version as it was
                raise
            result = BufferFingerprint.__new__(BufferFingerprint)
            result.fingerprinter, result.packed, result.features = self.fingerprinter, packed, features
            result._vector = result._norm = None
            result._version = newest = _Version(members, version.lock)
            version.undo, version.toward, version.members = undo, newest, {}
            return result

    def _change(self, members: dict[int, tuple[int, Contribution]],
                undo: dict[int, tuple[int, Contribution] | None],
                removed: Sequence[int], added: Iterable[Message]) -> tuple[int, int]:
        """Apply the update to `members` in place, recording in `undo` each changed digest's entry
        before it; return the new packed sum and feature count."""
        packed, features = self.packed, self.features
        gone: list[Contribution] = []
        for digest in removed:
            entry = members.get(digest)
            if entry is None:
                raise ValueError(f"cannot remove message {digest:032x}: it is not in this buffer")
            if digest not in undo:
                undo[digest] = entry
            count, contrib = entry
            if count == 1:
                del members[digest]
            else:
                members[digest] = (count - 1, contrib)
            gone.append(contrib)
            features -= contrib.features
        fpr = self.fingerprinter
        new: list[Contribution] = []
        for m in added:
            contrib = fpr.message(m)
            entry = members.get(m.digest)
            if m.digest not in undo:
                undo[m.digest] = entry
            members[m.digest] = (entry[0] + 1 if entry else 1, contrib)
            new.append(contrib)
            features += contrib.features
        packed += fpr.delta(new, gone)
        if features > _MAX_FEATURES:
            raise ValueError(f"buffer has {features} features; "
                             f"the fingerprint supports at most {_MAX_FEATURES}")
        return packed, features

    @property
    def vector(self) -> list[int]:
        """The signed lane vector (decoded once)."""
        if self._vector is None:
            self._vector = self.fingerprinter.decode(self.packed)
        return self._vector

    @property
    def norm(self) -> float:
        if self._norm is None:
            vec = self.vector
            self._norm = math.sqrt(sum(map(mul, vec, vec)))
        return self._norm

    def distance(self, other: BufferFingerprint) -> float:
        return distance(self, other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BufferFingerprint):
            return NotImplemented
        return (self.config == other.config and self.packed == other.packed
                and self.features == other.features and self.counts() == other.counts())

    def counts(self) -> dict[int, int]:
        """The member multiset: message digest -> how many times it is in the buffer."""
        return {digest: count for digest, (count, _) in self.members.items()}

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BufferFingerprint(messages={self.size}, features={self.features}, lanes={self.config[0]})"


def distance(a: BufferFingerprint, b: BufferFingerprint) -> float:
    """Normalised angle between two fingerprints, in [0, 1]: 0 for the same content, ~1 for
    buffers with no word bigram in common, 1 between an empty and a non-empty buffer."""
    if a.config != b.config:
        raise ValueError(f"fingerprints made with different (lanes, seed): {a.config} vs {b.config}")
    if a.packed == b.packed:
        return 0.0
    na, nb = a.norm, b.norm
    if not na or not nb:
        return 1.0
    cosine = sum(map(mul, a.vector, b.vector)) / (na * nb)
    return min(1.0, 2.0 * math.acos(max(-1.0, min(1.0, cosine))) / math.pi)
