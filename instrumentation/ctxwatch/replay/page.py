"""``ctxwatch replay --html FILE``: one self-contained HTML page (inline CSS and SVG, no script, no
CDN, no external asset) listing the sessions, and per session a chart of d against r and the
mutation table.

The chart plots each rewrite cycle at (r_t, d_t) — literal-loss rate across, hash distance up —
joined in cycle order, over the d = r diagonal: points below it (shaded) are cycles where the
buffer changed less than it lost, the third condition of the contraction regime (docs/alarm.md).
The onset cycle of a contraction is ringed, the cycle the alarm flags it boxed, and a legend under
the chart says so (the shaded region alone is not an alarm).
Every value from a session file (paths, literals, ids) is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

from .audit import MutationAudit, SessionAudit
from .table import HEADERS, mutation_row, session_header, session_notes, summary_line

WIDTH, HEIGHT = 440, 340
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 28, 16, 48
_LABELLED_POINTS = 40      # cycle numbers are written next to the points up to this many cycles
_LITERALS_LISTED = 500     # lost literal values listed per mutation (all of them are in --json)

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d2433; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 4px; word-break: break-all; }
.meta { color: #5a6478; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 8px 0; } th, td { padding: 3px 8px; border-bottom: 1px solid #dde2ea;
 text-align: left; vertical-align: top; } th { background: #f3f5f9; } td.num { text-align: right; }
tr.finding td { background: #fde8e8; } .bad { color: #b3261e; font-weight: 600; } .ok { color: #1b7f3b; }
section.session { border-top: 2px solid #dde2ea; } .row { display: flex; gap: 24px; flex-wrap: wrap; }
svg.chart { background: #fbfcfe; border: 1px solid #dde2ea; } .notes { margin: 6px 0; padding-left: 18px; }
.legend { font-size: 12px; color: #5a6478; max-width: 440px; }
.legend .key { display: inline-block; width: 12px; height: 12px; vertical-align: middle; }
.key.below { background: #fdecea; border: 1px solid #f3c4bf; } .key.cycle { background: #2f6fdf; border-radius: 6px; }
.key.onset { border: 1px dashed #b3261e; border-radius: 6px; } .key.flag { border: 2px solid #b3261e; }
details { margin: 4px 0; } code { font-size: 12px; background: #f3f5f9; padding: 0 3px; word-break: break-all; }
"""


CHART_LEGEND = (
    '<p class="legend"><span class="key below"></span> shaded: d &lt; r, the buffer changed less than it lost '
    "literals — one of the three conditions of the contraction regime (docs/alarm.md), not an alarm by itself; "
    '<span class="key cycle"></span> a rewrite cycle (red: the detector saw contraction evidence); '
    '<span class="key onset"></span> onset cycle of a contraction; '
    '<span class="key flag"></span> the cycle the alarm flags it (the guard halts there by default)</p>')


def _x(r: float) -> float:
    return _LEFT + r * (WIDTH - _LEFT - _RIGHT)


def _y(d: float) -> float:
    return HEIGHT - _BOTTOM - d * (HEIGHT - _TOP - _BOTTOM)


def chart(mutations: Sequence[MutationAudit], title: str) -> str:
    """The inline SVG chart of d against r for one session's cycles (a mutation that is no cycle of the
    alarm has neither and is not plotted)."""
    mutations = [m for m in mutations if m.verdict is not None]
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" data-cycles="{len(mutations)}">',
             f"<title>{escape(title)}</title>",
             f'<polygon class="below" points="{_x(0)},{_y(0)} {_x(1)},{_y(0)} {_x(1)},{_y(1)}" fill="#fdecea"/>']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{_x(0)}" y1="{_y(tick):.1f}" x2="{_x(1)}" y2="{_y(tick):.1f}" stroke="#e3e7ee"/>'
                     f'<line x1="{_x(tick):.1f}" y1="{_y(0)}" x2="{_x(tick):.1f}" y2="{_y(1)}" stroke="#e3e7ee"/>'
                     f'<text x="{_LEFT - 6}" y="{_y(tick) + 4:.1f}" text-anchor="end" font-size="11">{tick:g}</text>'
                     f'<text x="{_x(tick):.1f}" y="{_y(0) + 15}" text-anchor="middle" font-size="11">{tick:g}</text>')
    parts.append(f'<line class="diagonal" x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" stroke="#c0392b" '
                 'stroke-dasharray="5 4"/>'
                 f'<text x="{_x(0.97):.1f}" y="{_y(0.90):.1f}" text-anchor="end" font-size="11" fill="#c0392b">'
                 'd = r</text>'
                 f'<text x="{(_x(0) + _x(1)) / 2:.1f}" y="{HEIGHT - 12}" text-anchor="middle" font-size="12">'
                 'r = literals lost / literals before</text>'
                 f'<text transform="translate(16 {(_y(0) + _y(1)) / 2:.1f}) rotate(-90)" text-anchor="middle" '
                 'font-size="12">d = hash distance</text>')
    if not mutations:
        parts.append(f'<text class="empty" x="{(_x(0) + _x(1)) / 2:.1f}" y="{(_y(0) + _y(1)) / 2:.1f}" '
                     'text-anchor="middle" font-size="13" fill="#5a6478">no rewrite cycle</text>')
    else:
        onsets = {m.verdict.onset for m in mutations if m.verdict.entered}
        points = " ".join(f"{_x(m.verdict.r):.1f},{_y(m.verdict.d):.1f}" for m in mutations)
        parts.append(f'<polyline class="path" points="{points}" fill="none" stroke="#2f6fdf" stroke-width="1.5"/>')
        for m in mutations:
            v = m.verdict
            colour = "#b3261e" if v.state == "contracting" or v.evidence else "#2f6fdf"
            cx, cy = _x(v.r), _y(v.d)
            parts.append(f'<circle class="cycle" data-cycle="{m.cycle}" cx="{cx:.1f}" cy="{cy:.1f}" r="4" '
                         f'fill="{colour}"><title>cycle {m.cycle} ({escape(m.kind)} at {escape(m.where)}): '
                         f'd={v.d:.3f} r={v.r:.3f}, {v.state}</title></circle>')
            if m.cycle in onsets:
                parts.append(f'<circle class="onset-mark" data-cycle="{m.cycle}" cx="{cx:.1f}" cy="{cy:.1f}" r="8" '
                             'fill="none" stroke="#b3261e" stroke-dasharray="3 2"/>')
            if v.entered:  # where the guard's alarm flags the loop (and halts it with the default enforcement)
                parts.append(f'<rect class="flag-mark" data-cycle="{m.cycle}" x="{cx - 7:.1f}" y="{cy - 7:.1f}" '
                             'width="14" height="14" fill="none" stroke="#b3261e" stroke-width="2"/>')
            if len(mutations) <= _LABELLED_POINTS:
                parts.append(f'<text x="{cx + 6:.1f}" y="{cy - 6:.1f}" font-size="10" fill="#1d2433">'
                             f"{m.cycle}</text>")
    parts.append("</svg>")
    return "".join(parts) + CHART_LEGEND


def _mutation_table(mutations: Sequence[MutationAudit]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
    rows = []
    for m in mutations:
        cls = ' class="finding"' if m.orphans or (m.verdict is not None and m.verdict.entered) else ""
        cells = "".join(f"<td>{escape(c)}</td>" for c in mutation_row(m))
        rows.append(f"<tr{cls}>{cells}</tr>")
    return f'<table class="mutations"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _lost_literals(mutations: Sequence[MutationAudit]) -> str:
    out = []
    for m in mutations:
        if not m.lost:
            continue
        listed = " ".join(f"<code>{escape(v)}</code>" for v in m.lost[:_LITERALS_LISTED])
        more = (f" … and {len(m.lost) - _LITERALS_LISTED} more (all in --json)"
                if len(m.lost) > _LITERALS_LISTED else "")
        name = m.name
        out.append(f"<details><summary>{escape(name)}: {len(m.lost)} literal(s) lost</summary>"
                   f"<p>{listed}{escape(more)}</p></details>")
    return "".join(out)


def _session(index: int, a: SessionAudit, fail_on_literal_loss: bool) -> str:
    status = "unreadable" if not a.readable else ("findings" if a.findings(fail_on_literal_loss) else "clean")
    head = (f'<section class="session" id="session-{index}" data-status="{status}">'
            f"<h2>{escape(a.path)}</h2><p class=\"meta\">{escape(session_header(a))}</p>")
    if not a.readable:
        return head + "</section>"
    notes = session_notes(a, 0, fail_on_literal_loss)
    body = [f'<div class="row">{chart(a.mutations, f"d against r: {a.path}")}<div>',
            _mutation_table(a.mutations) if a.mutations else "<p>No context mutation: the buffer only grew.</p>",
            '<ul class="notes">' + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>",
            _lost_literals(a.mutations), "</div></div></section>"]
    return head + "".join(body)


def _index(audits: Sequence[SessionAudit], fail_on_literal_loss: bool) -> str:
    rows = []
    for i, a in enumerate(audits, 1):
        findings = len(a.findings(fail_on_literal_loss))
        verdict = "unreadable" if not a.readable else a.state
        cls = "bad" if not a.readable or findings or a.state == "contracting" else "ok"
        rows.append(f'<tr><td><a href="#session-{i}">{escape(a.path)}</a></td><td>{escape(a.format or "-")}</td>'
                    f'<td class="num">{a.steps}</td><td class="num">{len(a.mutations)}</td>'
                    f'<td class="num">{a.tool_pairs}</td><td class="num">{findings}</td>'
                    f'<td class="{cls}">{escape(verdict)}</td></tr>')
    return ('<table class="sessions"><thead><tr><th>session</th><th>format</th><th>steps</th><th>mutations</th>'
            "<th>tool pairs</th><th>findings</th><th>verdict</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def render_html(audits: Sequence[SessionAudit], *, exit_code: int, version: str,
                fail_on_literal_loss: bool = False) -> str:
    """The whole page as one string."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sessions = "".join(_session(i, a, fail_on_literal_loss) for i, a in enumerate(audits, 1))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>ctxwatch replay: {len(audits)} session(s)</title><style>{_CSS}</style></head><body>"
            f"<h1>ctxwatch replay</h1><p class=\"meta\">{escape(summary_line(audits, exit_code, fail_on_literal_loss))}"
            f" — generated {when} by ctxwatch {escape(version)}</p>"
            f"{_index(audits, fail_on_literal_loss)}{sessions}</body></html>\n")
