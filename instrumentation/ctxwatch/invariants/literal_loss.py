"""Record 003, literal preservation: the literal-set diff of every rewrite.

A literal is lost when the rewrite removes its last copy from the context; the diff is computed
from the messages the change removes and adds against per-literal counts of the current context,
so its cost follows the size of the change, not of the context. A rewrite that adds an opaque provider
compaction (`ctxwatch.cycles.hides_rewritten_content`) loses none it can show: the literals it takes out
of view are hidden behind the compaction, and the finding says so as a warning whatever `literal_loss`
is enforced at (nothing is known lost, so nothing is refused for it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ..cycles import hides_rewritten_content
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
    gone = frozenset(lit for lit, n in removed.items() if counts.get(lit, 0) - n <= 0 and lit not in added)
    new = frozenset(lit for lit in added if not counts.get(lit))
    if hides_rewritten_content(change.added_messages):
        return LiteralDiff(before=len(counts), lost=frozenset(), added=new, hidden=gone)
    return LiteralDiff(before=len(counts), lost=gone, added=new)


def check_literal_loss(diff: LiteralDiff) -> list[Finding]:
    if diff.hidden:
        shown = sorted(diff.hidden)
        head = (f"{len(shown)} of {diff.before} protected literals leave the readable context behind an opaque "
                "provider compaction (its summary is not readable here, so whether it keeps them is unknown; "
                "none is counted as lost): ")
        return [Finding("literal_loss", head + listed(shown, quoted=False), action="warn",
                        details={"hidden": shown}, values=head + listed(shown, quoted=True))]
    if not diff.lost:
        return []
    shown = sorted(diff.lost)
    head = f"the rewrite loses {len(shown)} of {diff.before} protected literals: "
    return [Finding("literal_loss", head + listed(shown, quoted=False), details={"lost": shown},
                    values=head + listed(shown, quoted=True))]
