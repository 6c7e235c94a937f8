"""``ctxwatch replay PATH...``: its options, and the run that audits, prints, writes and backfills.

Exit codes: 2 when any file could not be read (or, with ``--strict``, had a line that could not
be read), or ``--html`` / ``--otlp`` failed; else 1 when any session has findings (see
`ctxwatch.replay.audit`); else 0. Problems go to stderr, one line each, naming the file and line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TextIO

from .. import __version__
from ..literals import LiteralRegistry
from ..sessions import SESSION_FORMATS, SessionReadError, detect_session_format
from .audit import SessionAudit, audit_session
from .backfill import DEFAULT_SERVICE, BackfillError, Exporter
from .page import render_html
from .schema import document
from .table import printable, render

MAX_SKIPS_SHOWN = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="recorded session files")
    parser.add_argument("--format", choices=SESSION_FORMATS, help="the session format (default: detected per file)")
    parser.add_argument("--json", action="store_true", help="print the audit as JSON (schema: docs/replay.md) "
                        "instead of the table")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write a self-contained HTML report")
    parser.add_argument("--otlp", metavar="URL", help="backfill the guard's spans to this OTLP/HTTP endpoint "
                        "(a monitor or a collector; base URL, /v1/traces is appended)")
    parser.add_argument("--agent", help="agent name on the backfilled spans (default: claude-code, codex, gemini-cli "
                        "as ctxwatch watch names them; the session format for the others)")
    parser.add_argument("--service", help="one service name for every session (default: a Claude Code, Codex or "
                        "Gemini CLI session's project, as ctxwatch watch names it; "
                        f"{DEFAULT_SERVICE} for the others)")
    parser.add_argument("--strict", action="store_true", help="a line that cannot be read makes the file "
                        "unreadable (exit 2) instead of a reported skip")
    parser.add_argument("--fail-on-literal-loss", action="store_true",
                        help="count lost protected literals as findings (exit 1); by default they are listed only")
    parser.add_argument("--literals", type=int, default=10, metavar="N",
                        help="lost literals listed per mutation in the table (default 10; --json lists all)")


def exit_code(audits: Sequence[SessionAudit], fail_on_literal_loss: bool = False) -> int:
    if any(not a.readable for a in audits):
        return 2
    return 1 if any(a.findings(fail_on_literal_loss) for a in audits) else 0


def _warn(err: TextIO, message: str) -> None:
    err.write(f"ctxwatch replay: {printable(message)}\n")


def _report_problems(audits: Sequence[SessionAudit], err: TextIO) -> None:
    for a in audits:
        if not a.readable:
            _warn(err, a.error or f"{a.path}: unreadable")
            continue
        for skip in a.skipped[:MAX_SKIPS_SHOWN]:
            where = f"line {skip.line}" if skip.line is not None else skip.where
            _warn(err, f"{a.path}, {where}: skipped: {skip.reason}")
        if len(a.skipped) > MAX_SKIPS_SHOWN:
            _warn(err, f"{a.path}: and {len(a.skipped) - MAX_SKIPS_SHOWN} more skipped lines (all in --json)")


class _Refused(Exception):
    """Bad usage found before any file is read: the one-line reason, exit 2."""


def _exporter(args: argparse.Namespace) -> Exporter | None:
    if not args.otlp:
        return None
    if not args.otlp.startswith(("http://", "https://")):
        raise _Refused(f"--otlp expects an http:// or https:// URL, got {args.otlp!r}")
    try:
        return Exporter(args.otlp, args.service)
    except ImportError as exc:
        raise _Refused(f"--otlp needs the OpenTelemetry SDK ({exc.name} is missing); install ctxwatch[otlp]") from None
    except BackfillError as exc:
        raise _Refused(str(exc)) from None


def _audit_all(args: argparse.Namespace, exporter: Exporter | None) -> list[SessionAudit]:
    audits = []
    for path in args.paths:
        registry = LiteralRegistry()
        observer_for = None
        if exporter is not None:
            observer_for = partial(exporter.observer, agent=args.agent, registry=registry)
        audit = audit_session(path, args.format, strict=args.strict, observer_for=observer_for, registry=registry)
        if args.format is not None and not audit.readable:
            _name_the_mismatch(audit, args.format)
        audits.append(audit)
    return audits


def _name_the_mismatch(audit: SessionAudit, forced: str) -> None:
    """When the file could not be read in the `forced` format but is detected as another one, say that (a
    pretty-printed document read as JSONL gives 'truncated JSON', a symptom, not the cause); else the
    reader's own error stands."""
    try:
        detected = detect_session_format(audit.path)
    except (SessionReadError, OSError):
        return
    if detected != forced:
        audit.error = (f"{audit.path}: not a {forced} session (--format {forced}); it reads as {detected}: "
                       f"leave --format out or pass --format {detected}")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Audit every PATH, report, and return the exit code (see the module docstring)."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        if args.literals < 0:
            raise _Refused(f"--literals must be >= 0, got {args.literals}")
        exporter = _exporter(args)
        audits = _audit_all(args, exporter)
    except _Refused as exc:
        _warn(err, str(exc))
        return 2
    except KeyboardInterrupt:
        _warn(err, "interrupted")
        return 130
    code = exit_code(audits, args.fail_on_literal_loss)
    _report_problems(audits, err)
    if exporter is not None:
        try:
            exporter.close()
        except BackfillError as exc:
            _warn(err, str(exc))
            code = 2
    if args.html:
        try:
            args.html.write_text(render_html(audits, exit_code=code, version=__version__,
                                             fail_on_literal_loss=args.fail_on_literal_loss), encoding="utf-8")
        except OSError as exc:
            _warn(err, f"--html {args.html}: cannot write ({exc.strerror or exc})")
            code = 2
    try:
        if args.json:
            json.dump(document(audits, code, __version__, args.fail_on_literal_loss), out, indent=1)
            out.write("\n")
        else:
            render(audits, out, exit_code=code, literals_shown=args.literals,
                   fail_on_literal_loss=args.fail_on_literal_loss)
        out.flush()
    except BrokenPipeError:  # `ctxwatch replay ... | head`: the reader left, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return code
