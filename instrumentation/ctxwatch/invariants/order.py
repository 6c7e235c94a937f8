"""Record 003, relative order: a rewrite that is not a re-rank keeps the order of what it keeps.

Salience re-ordering can put a dependency after its dependent ("Y is done" before "do X before
Y"); only a rewrite declared as `rerank` may reorder, and it is logged with its new order. A reorder
the guard classified as a rerank (the caller declared no kind) is checked like any other rewrite.
"""

from __future__ import annotations

from ..diff import Change
from ..report import Finding


def check_order(change: Change) -> list[Finding]:
    if (change.kind == "rerank" and change.declared) or change.kept_order_preserved:
        return []
    named = change.kind if change.declared else f"undeclared {change.kind}"
    return [Finding("order", f"the {named} reorders the messages it keeps; dependencies stated in "
                    "order (do X before Y) may invert. Keep relative order, or declare kind='rerank' "
                    "(recorded with its order in the provenance log).")]
