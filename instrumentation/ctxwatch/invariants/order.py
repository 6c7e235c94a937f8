"""Record 003, relative order: a rewrite that is not a re-rank keeps the order of what it keeps.

Salience re-ordering can put a dependency after its dependent ("Y is done" before "do X before
Y"); only a rewrite declared as `rerank` may reorder, and it is logged with its new order.
"""

from __future__ import annotations

from ..diff import Change
from ..report import Finding


def check_order(change: Change) -> list[Finding]:
    if change.kind == "rerank" or change.kept_order_preserved:
        return []
    return [Finding("order", f"the {change.kind} reorders the messages it keeps; dependencies stated in "
                    "order (do X before Y) may invert. Keep relative order, or declare kind='rerank' "
                    "(recorded with its order in the provenance log).")]
