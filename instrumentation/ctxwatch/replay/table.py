"""The terminal output of ``ctxwatch replay``: per session a header, one row per mutation, the
lost literals, the verdict and the findings; a closing summary line.

On a terminal with ``rich`` installed (it comes with ``ctxwatch[monitor]``) the tables are drawn
by rich; otherwise — a pipe, a file, CI, or a base install without rich — as aligned plain text.
Both renderings take their cells from `mutation_row`, so they show the same figures.

Text taken from a session file (paths, ids, triggers, reasons, literals) never reaches the
terminal raw: `printable` shows control characters (ESC and the rest of C0 and C1, DEL) as
``\\xNN`` escapes (line and paragraph separators and bidirectional overrides as ``\\uNNNN``), so a
session cannot move the cursor, recolour, retitle the terminal or reorder what is shown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from ..sessions.codex import ABORTED_CALLS
from .audit import MutationAudit, SessionAudit

if TYPE_CHECKING:
    from rich.console import Console

HEADERS = ("#", "where", "kind", "source", "messages", "kept/dropped/added/elided", "size (chars)",
           "orphans", "literals lost", "d", "r", "state")
_RIGHT = frozenset({0, 4, 6, 7, 8, 9, 10})
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every control character shown as an escape (one line, nothing for the terminal to obey)."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def quote(literal: str, limit: int = 60) -> str:
    """A literal as a JSON string (so spaces and escapes are visible), cut to `limit` characters."""
    cut = literal if len(literal) <= limit else literal[: limit - 1] + "…"
    return json.dumps(cut, ensure_ascii=False)


def mutation_row(m: MutationAudit) -> tuple[str, ...]:
    """The cells of one mutation; one that is no cycle of the alarm has no number, d, r or state (``—``,
    and ``no cycle: elision`` or ``no cycle: opaque``), and an opaque one's literals read ``N hidden/M``."""
    c, v = m.messages, m.verdict
    cells = (m.where, m.kind, m.source, f"{c.before} -> {c.after}", f"{c.kept}/{c.dropped}/{c.added}/{c.elided}",
             f"{m.size_before:,} -> {m.size_after:,}", str(m.orphans))
    if v is None:
        shown = f"{m.hidden} hidden" if m.hidden is not None else str(len(m.lost))
        literals = f"{shown}/{m.literals_before}"
        return ("—", *cells, literals, "—", "—", f"no cycle: {m.no_cycle}")
    state = v.state + (" (entered)" if v.entered else " (left)" if v.left else "")
    return (str(m.cycle), *cells, f"{v.literals_lost}/{v.literals_before}", f"{v.d:.3f}", f"{v.r:.3f}", state)


def session_header(a: SessionAudit) -> str:
    if not a.readable:
        return f"UNREADABLE: {a.error}"
    skipped = f", {len(a.skipped)} skipped" if a.skipped else ""
    return (f"{a.format}, {a.records:,} records, {a.steps} steps, {a.messages} messages at the end, "
            f"{a.tool_pairs} tool pairs ({a.pending} pending), {len(a.mutations)} mutation(s){skipped}")


def session_notes(a: SessionAudit, literals_shown: int, fail_on_literal_loss: bool) -> list[str]:
    """The lines under the table: lost literals, orphans, summaries, verdict, findings."""
    out = []
    for m in a.mutations:
        name = m.name
        if m.summary_chars is not None:
            at = f" at line {m.summary_line}" if m.summary_line is not None else ""
            out.append(f"{name}: summary of {m.summary_chars:,} chars{at}"
                       + (f", trigger {m.trigger}" if m.trigger else "")
                       + (f", {m.pre_tokens:,} tokens before" if m.pre_tokens is not None else ""))
        elif "cleared_results" in m.details:
            out.append(f"{name}: {m.details['cleared_results']} tool result(s) cleared in place "
                       f"({m.details['compacted_tool_ids']} named)"
                       + (f", trigger {m.trigger}" if m.trigger else "")
                       + (f", {m.pre_tokens:,} tokens before" if m.pre_tokens is not None else "")
                       + (f", {m.details['tokens_saved']:,} saved" if "tokens_saved" in m.details else ""))
        if m.orphans:
            out.append(f"{name}: orphaned calls {list(m.orphaned_calls)}, "
                       f"orphaned results {list(m.orphaned_results)}")
        if m.in_flight:
            out.append(f"{name}: dropped {len(m.in_flight)} tool call(s) in flight (no result arrived): "
                       + ", ".join(f"{t.id} ({t.where})" for t in m.in_flight))
        if m.lost and literals_shown:
            shown = ", ".join(quote(v) for v in m.lost[:literals_shown])
            more = f" (+{len(m.lost) - literals_shown} more)" if len(m.lost) > literals_shown else ""
            out.append(f"{name}: lost {len(m.lost)} literal(s): {shown}{more}")
        if m.hidden is not None:
            out.append(f"{name}: an opaque compaction (its summary is not readable): {m.hidden} of "
                       f"{m.literals_before} literal(s) left the readable context, whether they are kept is "
                       "unknown; no cycle of the alarm")
        elif m.no_cycle is not None:
            out.append(f"{name}: an elision (it writes nothing of its own): no cycle of the alarm")
    inherited = a.facts.get("inherited_compaction")
    if inherited:
        summary = inherited.get("summary") or {}
        out.insert(0, f"starts from a compaction copied from its parent session (boundary at line {inherited['line']}"
                   + (f", summary of {summary['chars']:,} chars at line {summary['line']}" if summary else "")
                   + "): the buffer starts there, not a cycle")
    in_progress = a.facts.get("compaction_in_progress")
    if in_progress:
        out.append(f"compaction in progress at end of file (boundary at line {in_progress['line']}"
                   + (f", trigger {in_progress['trigger']}" if in_progress["trigger"] else "")
                   + (f", {in_progress['pre_tokens']:,} tokens before" if in_progress["pre_tokens"] is not None else "")
                   + "): its summary is not written yet; pending, not a mutation (the buffer at the end is the "
                   "one before it)")
    aborted = a.facts.get(ABORTED_CALLS)
    if aborted:
        out.append(f"{len(aborted)} tool call(s) of interrupted turns never answered (sent with Codex's \"aborted\" "
                   "output, not counted as pairs): " + ", ".join(f"{c['id']} ({c['where']})" for c in aborted[:5])
                   + (f" (+{len(aborted) - 5} more)" if len(aborted) > 5 else ""))
    out.append(f"verdict: {a.explain()}")
    findings = a.findings(fail_on_literal_loss)
    out.append("findings: " + ("none" if not findings else
                               "; ".join(f"[{f.invariant}] {f.message}" for f in findings)))
    return out


def summary_line(audits: Sequence[SessionAudit], exit_code: int, fail_on_literal_loss: bool) -> str:
    unreadable = sum(not a.readable for a in audits)
    findings = sum(bool(a.findings(fail_on_literal_loss)) for a in audits)
    mutations = sum(len(a.mutations) for a in audits)
    return (f"{len(audits)} session(s), {mutations} mutation(s): {findings} with findings, "
            f"{unreadable} unreadable (exit {exit_code})")


def render_plain(audits: Sequence[SessionAudit], out: TextIO, *, exit_code: int, literals_shown: int,
                 fail_on_literal_loss: bool) -> None:
    for a in audits:
        out.write(f"\n{printable(a.path)}\n  {printable(session_header(a))}\n")
        if not a.readable:
            continue
        if a.mutations:
            rows = [HEADERS] + [tuple(map(printable, mutation_row(m))) for m in a.mutations]
            widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
            for row in rows:
                cells = [cell.rjust(w) if i in _RIGHT else cell.ljust(w)
                         for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
                out.write("  " + "  ".join(cells).rstrip() + "\n")
        else:
            out.write("  no context mutation: the buffer only grew\n")
        for note in session_notes(a, literals_shown, fail_on_literal_loss):
            out.write(f"  {printable(note)}\n")
    out.write("\n" + summary_line(audits, exit_code, fail_on_literal_loss) + "\n")


def render_rich(audits: Sequence[SessionAudit], console: Console, *, exit_code: int, literals_shown: int,
                fail_on_literal_loss: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    for a in audits:
        console.print()
        console.print(f"[bold]{escape(printable(a.path))}[/bold]", highlight=False)
        console.print(("  [red]" if not a.readable else "  ") + escape(printable(session_header(a))), highlight=False)
        if not a.readable:
            continue
        if a.mutations:
            table = Table(show_edge=False, pad_edge=False)
            for i, header in enumerate(HEADERS):
                table.add_column(header, justify="right" if i in _RIGHT else "left",
                                 overflow="fold")
            for m in a.mutations:
                style = "red" if m.orphans or (m.verdict is not None and m.verdict.state == "contracting") else None
                table.add_row(*(escape(printable(cell)) for cell in mutation_row(m)), style=style)
            console.print(table)
        else:
            console.print("  no context mutation: the buffer only grew")
        for note in session_notes(a, literals_shown, fail_on_literal_loss):
            console.print("  " + escape(printable(note)), soft_wrap=True, highlight=False)
    console.print()
    console.print(escape(summary_line(audits, exit_code, fail_on_literal_loss)), highlight=False)


def render(audits: Sequence[SessionAudit], out: TextIO, *, exit_code: int, literals_shown: int = 10,
           fail_on_literal_loss: bool = False) -> None:
    """Write the audits to `out`: with rich on a terminal when it is installed, else as plain text."""
    options = {"exit_code": exit_code, "literals_shown": literals_shown, "fail_on_literal_loss": fail_on_literal_loss}
    try:
        from rich.console import Console
    except ImportError:
        render_plain(audits, out, **options)
        return
    console = Console(file=out)
    if console.is_terminal:
        render_rich(audits, console, **options)
    else:
        render_plain(audits, out, **options)
