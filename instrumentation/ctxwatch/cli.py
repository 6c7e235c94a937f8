"""The `ctxwatch` command line: `demo` (the main job), `monitor` (the service), `replay` (audit
recorded sessions, ctxwatch.replay), `watch` (follow coding-agent sessions live, ctxwatch.watch)
and `check-idempotence` (record 003's test, ctxwatch.idempotence_cli).

Exit codes: 0 clean, 1 findings, 2 bad usage or unreadable input (with a one-line reason).
`ctxwatch monitor` runs the service of ctxwatch[monitor] in this process's place; ctxwatch
itself never imports it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return number


def _count(value: str) -> int:
    number = _positive(value)
    if number != int(number):
        raise argparse.ArgumentTypeError(f"must be a whole number: {value!r}")
    return int(number)


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 0-65535 (0 picks a free one): {value!r}")
    return port


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: an argument it does not know is its own error (``ctxwatch demo: error:
    unrecognized arguments``), not the top level's."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(prog="ctxwatch", description="Runtime guards and live observability for "
                                     "LLM agents that rewrite their own context window.")
    parser.add_argument("--version", action="version", version=f"ctxwatch {__version__}")
    # Not required=True: argparse would then report a missing COMMAND before an unknown argument
    # (`ctxwatch --bogus`); `parse` asks for the command once the arguments are known to be valid.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)

    demo = sub.add_parser("demo", help="run the monitor and a simulated fleet of guarded agent loops",
                          description="Start the monitor and a simulated fleet (healthy, contracting, orphaning, "
                          "policy-editing and plan-breaking loops) whose guards export real OTLP spans; show what "
                          "fires. Exit 0 when every family behaves as designed, 1 otherwise; Ctrl-C or SIGTERM "
                          "stops it with a partial summary (exit 130 or 143).")
    demo.add_argument("--duration", type=_positive, default=60.0, help="seconds to run (default 60)")
    demo.add_argument("--loops", type=_count, default=3, help="concurrent loops per agent (default 3)")
    demo.add_argument("--port", type=_port, default=0, help="the monitor's port (default: a free one)")
    demo.add_argument("--otlp", metavar="URL", help="send spans to this OTLP/HTTP endpoint (a collector or a "
                      "monitor) instead of starting a monitor")
    demo.add_argument("--seed", type=int, default=7, help="seed of the simulated fleet (default 7)")
    demo.add_argument("--summary-json", type=Path, metavar="FILE", help="also write the closing summary as JSON")
    demo.add_argument("--keep", action="store_true", help="keep the monitor running after the fleet stops")

    sub.add_parser("monitor", help="run the monitor service (ctxwatch monitor --help for its options)",
                   add_help=False)

    from . import idempotence_cli
    from .replay import command as replay_command
    replay_command.add_arguments(sub.add_parser(
        "replay", help="audit recorded agent sessions for the context mutations in them",
        description="Audit recorded sessions (Claude Code, Codex, SWE-agent, OpenHands, Gemini CLI, JSONL of message "
        "lists): "
        "every context mutation with its sizes, orphaned tool pairs, lost literals, hash distance and contraction "
        "verdict. Exit 0 clean, 1 findings (orphaned tool pairs, contraction), 2 unreadable input. "
        "JSON schema: docs/replay.md."))
    from .watch import command as watch_command
    watch_command.add_arguments(sub.add_parser(
        "watch", help="follow Claude Code, Codex and Gemini CLI session files live and export their mutations",
        description="Follow coding-agent session files as they are written (by default in the agents' standard "
        "places, sessions that start later included) and export the spans a guard would have emitted, timed as "
        "recorded, over OTLP. Offsets survive a restart (--state). SIGTERM/SIGINT stop it cleanly. Exit 0 clean, "
        "1 findings, 2 bad usage. See docs/watch.md."))
    idempotence_cli.add_arguments(sub.add_parser(
        "check-idempotence", help="record 003's re-application test on a rewrite function",
        description="Apply MODULE:FUNC repeatedly to the sample and measure the drift between applications. "
        "Exit 0 stable, 1 not idempotent, 2 bad usage or unreadable input."))
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; argparse's usage error (exit 2) when it is not a valid one."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("the following arguments are required: COMMAND")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["monitor"]:
        return _exec_monitor(args_list[1:])
    args = parse(args_list)
    if args.command == "demo":
        from .demo import DemoOptions, run_demo
        try:
            options = DemoOptions(duration=args.duration, loops=args.loops, port=args.port, otlp=args.otlp,
                                  seed=args.seed, summary_json=args.summary_json, keep=args.keep)
            return run_demo(options)
        except ImportError as exc:
            print(f"ctxwatch demo: {exc.name} is missing; install ctxwatch[monitor]", file=sys.stderr)
            return 2
    if args.command == "replay":
        from .replay.command import run as run_replay
        return run_replay(args)
    if args.command == "watch":
        from .watch.command import run as run_watch
        return run_watch(args)
    if args.command == "check-idempotence":
        from .idempotence_cli import run as run_check
        return run_check(args)
    return 2


def _exec_monitor(argv: list[str]) -> int:
    """Replace this process with the monitor service (so signals reach uvicorn directly)."""
    try:
        os.execv(sys.executable, [sys.executable, "-m", "ctxwatch_monitor", *argv])
    except OSError as exc:
        print(f"ctxwatch monitor: cannot start: {exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
