"""Symbols a rewrite leaves dangling: the shared core of plan references (004) and policy referents (001).

A *symbol* is a literal (an ID, a path, a hash...) or an identifier (`config_path`, `outputId`).
A rewrite *alters* a symbol when it removes the last message that mentions it, or when it removes
a message binding an identifier to a value (``config_path = /etc/app.yaml``) and that value then
occurs nowhere: the name may survive in prose while what it pointed to is gone.

A message *mentions* a symbol only as a whole token: ``ABC-123`` is not mentioned by a message
that says ``ABC-1234``, nor ``/srv/data`` by ``/srv/data/old``. `SymbolIndex` counts, for the
current context, how many messages mention each symbol asked about; counts are computed once per
symbol and then moved along with each applied change, so a check costs only the messages the
change removes and adds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from ..literals import LiteralRegistry
from ..model import Message

# a symbol stands alone: not inside a longer word, path, ticket or file name (the same bounds for
# reading symbols out of a text and for finding them again)
_START, _END = r"(?<![\w./-])", r"(?![\w-]|[./]\w)"
_IDENTIFIER = re.compile(_START + r"(?:[A-Za-z_][A-Za-z0-9]*_[A-Za-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]*)" + _END)
_MIN_SYMBOL = 3


def extract_symbols(text: str, literals: LiteralRegistry) -> frozenset[str]:
    """The literals and identifiers `text` names (what a plan step or a pinned policy refers to)."""
    found = set(literals.extract(text)) | set(_IDENTIFIER.findall(text))
    return frozenset(s for s in found if len(s) >= _MIN_SYMBOL)


@lru_cache(maxsize=4096)
def _whole(symbol: str) -> re.Pattern[str]:
    return re.compile(_START + re.escape(symbol) + _END)


def mentions(message: Message, symbol: str) -> bool:
    """Whether `message` mentions `symbol` as a whole token (not inside a longer one)."""
    text = message.text
    return symbol in text and _whole(symbol).search(text) is not None


def _binding(symbol: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(symbol)
                      + r"""\s*(?:=|:=|:|->|\bis\b|\bwas\b)\s*["'`]?([^\s"'`,;)\]}]+)""")


class SymbolIndex:
    """How many messages of the current context mention each symbol (lazily, incrementally)."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._messages: Sequence[Message] = messages
        self._counts: dict[str, int] = {}

    def reset(self, messages: Sequence[Message]) -> None:
        self._messages = messages
        self._counts.clear()

    def count(self, symbol: str) -> int:
        n = self._counts.get(symbol)
        if n is None:
            n = self._counts[symbol] = sum(1 for m in self._messages if mentions(m, symbol))
        return n

    def advance(self, messages: Sequence[Message], removed: Iterable[Message], added: Iterable[Message]) -> None:
        """Move to the context an applied change produced, updating only the known counts."""
        removed, added = list(removed), list(added)
        for symbol in self._counts:
            self._counts[symbol] += (sum(1 for m in added if mentions(m, symbol))
                                     - sum(1 for m in removed if mentions(m, symbol)))
        self._messages = messages

    def dangling(self, symbols: Iterable[str], removed: Sequence[Message], added: Sequence[Message],
                 *, floor: dict[str, int] | None = None) -> dict[str, str]:
        """symbol -> why, for each of `symbols` the change would alter.

        `floor` gives, per symbol, mentions that do not count as copies (for a policy referent:
        the pinned spans that name it), so "the last copy" means the last copy outside them.
        """
        out: dict[str, str] = {}
        floor = floor or {}
        for symbol in symbols:
            gone_from = [m for m in removed if mentions(m, symbol)]
            if not gone_from:
                continue
            if self._after(symbol, removed, added) <= floor.get(symbol, 0):
                out[symbol] = "no message mentions it any more"
                continue
            pattern = _binding(symbol)
            for m in gone_from:
                for value in pattern.findall(m.text):
                    if value != symbol and self._after(value, removed, added) == 0:
                        out[symbol] = f"the value it was bound to ({value!r}) is gone"
                        break
                if symbol in out:
                    break
        return out

    def _after(self, symbol: str, removed: Sequence[Message], added: Sequence[Message]) -> int:
        return (self.count(symbol) - sum(1 for m in removed if mentions(m, symbol))
                + sum(1 for m in added if mentions(m, symbol)))
