"""Symbols a rewrite leaves dangling: the shared core of plan references (004) and policy referents (001).

A *symbol* is a literal (an ID, a path, a hash...) or an identifier (`config_path`, `outputId`).
A rewrite *alters* a symbol when it removes the last message that mentions it, or when it removes
a message binding an identifier to a value (``config_path = /etc/app.yaml``) and that value then
occurs nowhere: the name may survive in prose while what it pointed to is gone. Only an identifier
is bound, and only to a literal: ``ABC-1234: check out the branch`` binds nothing (a ticket is a
value, not a name, and "check" is prose), and neither does a markdown bullet or a colon list.
Policy referents are never read through bindings: what a pinned policy refers to is what its own
text names (`dangling(..., bindings=False)`).

A message *mentions* a symbol only as a whole token: ``ABC-123`` is not mentioned by a message
that says ``ABC-1234``, nor ``/srv/data`` by ``/srv/data/old``. `SymbolIndex` counts, for the
current context, how many messages mention each symbol asked about; counts are computed once per
symbol and then moved along with each applied change, so a check costs only the messages the
change removes and adds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..literals import LiteralRegistry
from ..model import Message
from ..redaction import shown

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


def _is_identifier(symbol: str) -> bool:
    return _IDENTIFIER.fullmatch(symbol) is not None


@dataclass(frozen=True)
class Dangling:
    """Why a change alters a symbol: its last mention is gone, or the literal it was bound to is."""

    bound_value: str | None = None

    def text(self, quoted: bool = False) -> str:
        if self.bound_value is None:
            return "no message mentions it any more"
        return f"the value it was bound to ({shown(self.bound_value, quoted=quoted)}) is gone"


class SymbolIndex:
    """How many messages of the current context mention each symbol (lazily, incrementally)."""

    def __init__(self, messages: Sequence[Message] = ()) -> None:
        self._messages: Sequence[Message] = messages
        self._counts: dict[str, int] = {}

    def copy(self) -> SymbolIndex:
        out = SymbolIndex(self._messages)
        out._counts = dict(self._counts)
        return out

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
                 *, floor: dict[str, int] | None = None, literals: LiteralRegistry | None = None
                 ) -> dict[str, Dangling]:
        """symbol -> why, for each of `symbols` the change would alter.

        `floor` gives, per symbol, mentions that do not count as copies (for a policy referent:
        the pinned spans that name it), so "the last copy" means the last copy outside them.
        `literals`: read bindings of identifiers to the literals it recognizes (None: no bindings).
        """
        out: dict[str, Dangling] = {}
        floor = floor or {}
        for symbol in symbols:
            gone_from = [m for m in removed if mentions(m, symbol)]
            if not gone_from:
                continue
            if self._after(symbol, removed, added) <= floor.get(symbol, 0):
                out[symbol] = Dangling()
                continue
            if literals is None or not _is_identifier(symbol):
                continue
            value = self._lost_binding(symbol, gone_from, removed, added, literals)
            if value is not None:
                out[symbol] = Dangling(value)
        return out

    def _lost_binding(self, symbol: str, gone_from: list[Message], removed: Sequence[Message],
                      added: Sequence[Message], literals: LiteralRegistry) -> str | None:
        """A literal `symbol` was bound to in a removed message that no message holds afterwards."""
        pattern = _binding(symbol)
        for m in gone_from:
            for value in pattern.findall(m.text):
                if value == symbol or value not in literals.extract(value):
                    continue  # prose, not a value: "ABC-1234: check out the branch" binds nothing
                if self._after(value, removed, added) == 0:
                    return value
        return None

    def _after(self, symbol: str, removed: Sequence[Message], added: Sequence[Message]) -> int:
        return (self.count(symbol) - sum(1 for m in removed if mentions(m, symbol))
                + sum(1 for m in added if mentions(m, symbol)))
