"""``ctxwatch replay``: audit recorded agent sessions for the context mutations in them.

`audit_session(path)` reads one session file (any format of `ctxwatch.sessions`) as a stream and
returns a `SessionAudit`: every mutation with its kind, sizes, orphaned tool ids, lost literals,
hash distance and contraction verdict. The command renders audits as a terminal table
(`table`), a versioned JSON document (`schema`, docs/replay.md), a self-contained HTML page
(`page`) and backfills the guard's spans over OTLP (`backfill`); `command` wires them together.
"""

from ..watch.identity import loop_id_for
from .audit import MutationAudit, SessionAudit, audit_session, explain_cycles
from .schema import SCHEMA, SCHEMA_VERSION

__all__ = ["SCHEMA", "SCHEMA_VERSION", "MutationAudit", "SessionAudit", "audit_session", "explain_cycles",
           "loop_id_for"]
