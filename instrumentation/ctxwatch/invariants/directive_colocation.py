"""Record 003, directive co-location: a rewrite must not write its own directive into the buffer.

A directive absorbed into the buffer ("note to self: compress to essentials") is re-executed by the
next pass and compounds the compression; the markers that identify a directive are configurable
(`ctxwatch.directives.DEFAULT_MARKERS`), and only the messages the rewrite introduces are read.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..diff import Change
from ..directives import find_directives
from ..report import Finding


def check_colocation(change: Change, markers: Iterable[str]) -> list[Finding]:
    hits = find_directives(change.added_messages, markers)
    if not hits:
        return []
    found = sorted({marker for _, marker in hits})
    return [Finding("directive_colocation", f"the rewrite writes its own directive into the buffer "
                    f"({', '.join(repr(m) for m in found)}); the next pass will re-execute it and compound "
                    "the compression. Keep the directive out of band (ctxwatch.directives.strip_directives).",
                    details={"markers": found})]
