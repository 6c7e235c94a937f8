"""Bounded Prometheus label values: the first `cap` distinct values pass, later ones become OVERFLOW.

Agent and service names come from the wire, so each label keeps its own small set of admitted
values; an over-long value or one past the cap is recorded as `ctxwatch.semconv.OVERFLOW`, which
keeps the number of series bounded whatever the fleet sends. Loop ids are never labels.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxwatch.semconv import MAX_LABEL_LENGTH, OVERFLOW


class BoundedLabel:
    """The admitted values of one label; `value(raw)` maps a raw value to its label value."""

    __slots__ = ("cap", "_known")

    def __init__(self, cap: int, known: Iterable[str] = ()) -> None:
        self.cap = cap
        self._known: dict[str, str] = {}
        for raw in known:
            self.value(raw)

    def value(self, raw: str) -> str:
        known = self._known.get(raw)
        if known is not None:
            return known
        if len(raw) > MAX_LABEL_LENGTH or len(self._known) >= self.cap:
            return OVERFLOW
        self._known[raw] = raw
        return raw

    def known(self) -> list[str]:
        """The admitted values, in admission order (persisted so a restart keeps the same mapping)."""
        return list(self._known)
