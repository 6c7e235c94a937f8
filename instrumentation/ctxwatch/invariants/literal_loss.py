"""Record 003, literal preservation: the literal-set diff of every rewrite.

A literal is lost when the rewrite removes its last copy from the context; the diff is computed
from the messages the change removes and adds against per-literal counts of the current context,
so its cost follows the size of the change, not of the context.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ..diff import Change
from ..literals import LiteralDiff, LiteralRegistry
from ..redaction import listed
from ..report import Finding


def literal_diff(change: Change, registry: LiteralRegistry, counts: Mapping[str, int]) -> LiteralDiff:
    """What the rewrite loses and introduces, given how many messages of the context hold each literal."""
    removed: Counter[str] = Counter()
    for m in change.removed_messages:
        removed.update(registry.of(m))
    added: set[str] = set()
    for m in change.added_messages:
        added |= registry.of(m)
    lost = frozenset(lit for lit, n in removed.items() if counts.get(lit, 0) - n <= 0 and lit not in added)
    return LiteralDiff(before=len(counts), lost=lost, added=frozenset(lit for lit in added if not counts.get(lit)))


def check_literal_loss(diff: LiteralDiff) -> list[Finding]:
    if not diff.lost:
        return []
    shown = sorted(diff.lost)
    head = f"the rewrite loses {len(shown)} of {diff.before} protected literals: "
    return [Finding("literal_loss", head + listed(shown, quoted=False), details={"lost": shown},
                    values=head + listed(shown, quoted=True))]
