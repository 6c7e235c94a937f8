"""The invariants of the design records, one module each, pure and free of telemetry.

Each module reads a `ctxwatch.diff.Change` (and whatever state its record needs: the schema
registry, the plan, the pinned policy) and returns `ctxwatch.report.Finding`s. None of them
decides what happens: `ctxwatch.decision` turns findings into patch / defer / abort / halt.
"""
