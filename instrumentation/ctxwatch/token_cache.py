"""A bounded cache of what each white-space-delimited token of a text holds (used by `ctxwatch.literals`).

A function of one token alone — the token-local literals of `LiteralRegistry` — gives the same
wherever the token occurs, and real sessions repeat their tokens (paths, ids, words) across
messages: about four occurrences per distinct token in the corpus's Claude Code sessions.
`TokenCache.union(text)` splits the text at white space (`str.split`: the same characters as the
regular expressions' ``\\s``), looks each distinct token up, computes the ones it has not seen in
one batch, and returns the union of what the text's tokens hold.

Memory is bounded: at most `limit` tokens of at most `max_token` characters each are kept (a
longer token is computed again each time it occurs), and the cache is emptied when full. A text
longer than `window` characters is read window by window, each cut at white space so no token is
cut, so that one long text never holds more than a window's tokens at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import compress

TOKEN_LIMIT = 8_192  # tokens kept: ~280 B each on the corpus (~2.3 MB full); its largest session has 4,635
MAX_TOKEN = 128  # characters: a longer token (a blob without white space) is not kept
WINDOW = 1 << 14  # characters of one text split at once: at most 8,192 tokens, never more than TOKEN_LIMIT

_WHITE_SPACE = re.compile(r"\s")

# computes what each of the given tokens holds, in their order
Compute = Callable[[list[str]], list[frozenset[str]]]


class TokenCache:
    """token -> frozenset of what it holds, for texts read token by token; see the module docstring."""

    __slots__ = ("_compute", "_kept", "_limit", "_max_token", "_window")

    def __init__(self, compute: Compute, *, limit: int = TOKEN_LIMIT, max_token: int = MAX_TOKEN,
                 window: int = WINDOW) -> None:
        self._compute = compute
        self._kept: dict[str, frozenset[str]] = {}
        self._limit = max(1, limit)
        self._max_token = max_token
        self._window = max(1, window)

    def union(self, text: str) -> set[str]:
        """The union of what every white-space-delimited token of `text` holds."""
        found: set[str] = set()
        for piece in _windows(text, self._window):
            kept = self._kept  # emptying the cache replaces the dict: this one stays whole while it is read
            tokens = set(piece.split())
            new = tokens.difference(kept)
            found.update(*map(kept.__getitem__, tokens - new))
            if new:
                batch = list(new)
                held = self._compute(batch)
                found.update(*held)
                self._keep(batch, held)
        return found

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        """Forget every token kept (they are pieces of the texts read)."""
        self._kept = {}

    def _keep(self, tokens: list[str], held: list[frozenset[str]]) -> None:
        short = list(compress(zip(tokens, held, strict=True), map(self._max_token.__ge__, map(len, tokens))))
        if len(self._kept) + len(short) > self._limit:
            self._kept = {}
        self._kept.update(short[: self._limit])


def _windows(text: str, size: int) -> Iterator[str]:
    """`text` in pieces of about `size` characters or more, each ending at white space (or the end)."""
    start = 0
    while len(text) - start > size:
        cut = _WHITE_SPACE.search(text, start + size)
        if cut is None:
            break
        yield text[start:cut.start()]
        start = cut.end()
    yield text[start:] if start else text
