"""``ctxwatch check-idempotence MODULE:FUNC --sample FILE``: record 003's re-application test, run on
a user's rewrite function from the command line (`ctxwatch.idempotence.check_idempotence`).

MODULE is a dotted module name (importable from the current directory or the environment) or a
path to a ``.py`` file; FUNC is a name in it (dotted for an attribute of an object in it). The
sample file holds message lists in any format `ctxwatch.adapters` reads: a JSON document (a list
of messages, or an object with a ``messages`` list) is one sample; a JSONL file whose lines are
single messages is one sample; a JSONL file whose lines are message lists is one sample per line.
The function is called on each sample in its own format, several times in a row.

Exit codes: 0 every sample is stable under re-application, 1 at least one is not (the drift
figures say by how much), 2 bad usage: a MODULE:FUNC that cannot be imported or called, a
sample file that cannot be read (the message names the file and line), a rewrite function that
raises or returns something that is not a message list.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .adapters import detect_format, to_messages
from .errors import InvalidContextError
from .idempotence import Drift, IdempotenceResult, check_idempotence
from .sessions.files import SessionReadError, check_file, iter_jsonl, load_document
from .sessions.snapshots import buffer_data

SCHEMA = "ctxwatch.check_idempotence"
SCHEMA_VERSION = 1
_JSONL_SUFFIXES = (".jsonl", ".ndjson")


class UsageError(Exception):
    """Bad usage or unreadable input: one line, printed as is, exit 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("function", metavar="MODULE:FUNC", help="the rewrite function, e.g. mypkg.compact:summarize "
                        "or path/to/file.py:summarize")
    parser.add_argument("--sample", type=Path, required=True, metavar="FILE",
                        help="JSON or JSONL file of messages (OpenAI, Anthropic or LangChain dicts)")
    parser.add_argument("--tolerance", type=_fraction, default=0.05,
                        help="largest hash distance between rewrite(B) and rewrite(rewrite(B)) (default 0.05)")
    parser.add_argument("--literal-tolerance", type=_fraction, default=0.0,
                        help="largest literal drift, as a fraction of the literals (default 0)")
    parser.add_argument("--rounds", type=_rounds, default=3, help="re-applications measured (default 3)")
    parser.add_argument("--ignore-order", action="store_true",
                        help="do not count reordered surviving messages as drift")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def _within(cast: Callable[[str], float], low: float, high: float) -> Callable[[str], Any]:
    """An argparse type: `cast(value)`, refused outside [low, high]."""
    def parse(value: str) -> Any:
        try:
            number = cast(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {'whole ' if cast is int else ''}number: {value!r}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}: {value!r}")
        return number
    return parse


_fraction = _within(float, 0.0, 1.0)
_rounds = _within(int, 1, 100)


# --- the function -------------------------------------------------------------------------------
def load_function(spec: str) -> Callable[[Any], Any]:
    """The callable named by MODULE:FUNC; UsageError saying what is wrong otherwise."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"expected MODULE:FUNC (e.g. mypkg.compact:summarize), got {spec!r}")
    module = _import(module_name)
    target: Any = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError(f"{module_name} has no attribute {attr!r}") from None
    if not callable(target):
        raise UsageError(f"{spec} is a {type(target).__name__}, not a function")
    return target


def _import(name: str) -> Any:
    try:
        if name.endswith(".py") or os.sep in name or "/" in name:
            path = Path(name)
            if not path.is_file():
                raise UsageError(f"cannot import {name}: no such file")
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # as `python path/file.py` does, so a sibling module imports
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None:
                raise UsageError(f"cannot import {name}: not a Python module")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does, so a module next to the user is found
        return importlib.import_module(name)
    except UsageError:
        raise
    except ModuleNotFoundError as exc:
        raise UsageError(f"cannot import {name}: {exc}") from None
    except SyntaxError as exc:
        where = f"{exc.filename}, line {exc.lineno}"
        raise UsageError(f"cannot import {name}: syntax error in {where}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module raised while importing
        raise UsageError(f"importing {name} raised {type(exc).__name__}: {exc}") from None


# --- the samples --------------------------------------------------------------------------------
def load_samples(path: Path) -> list[tuple[str, Any]]:
    """(where, message list) for each sample in the file; UsageError naming file and line otherwise."""
    try:
        check_file(path)
        if path.suffix.lower() not in _JSONL_SUFFIXES:
            try:
                return [(str(path), _sample(load_document(path), str(path)))]
            except SessionReadError as exc:
                if "Extra data" not in str(exc):
                    raise
        return _jsonl_samples(path)
    except (SessionReadError, InvalidContextError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _jsonl_samples(path: Path) -> list[tuple[str, Any]]:
    def fail(line: int, reason: str) -> None:
        raise SessionReadError(path, reason, line)

    lines = list(iter_jsonl(path, fail))
    if not lines:
        raise SessionReadError(path, "holds no JSON line")
    if all(isinstance(value, dict) and "messages" not in value for _, value in lines):
        return [(str(path), _sample([value for _, value in lines], str(path)))]
    return [(f"{path}, line {line}", _sample(value, f"{path}, line {line}")) for line, value in lines]


def _sample(value: Any, where: str) -> Any:
    try:
        data = buffer_data(value)
        to_messages(data)
    except InvalidContextError as exc:
        raise InvalidContextError(exc.reason, index=exc.index, field=exc.field, source=where) from None
    return data


# --- output -------------------------------------------------------------------------------------
def drift_json(d: Drift) -> dict[str, Any]:
    return {"distance": round(d.distance, 6), "literal_drift": round(d.literal_drift, 6),
            "literals_before": d.literals_before, "literals_lost": sorted(d.literals_lost),
            "literals_added": sorted(d.literals_added), "length_ratio": round(d.length_ratio, 6),
            "order_changes": d.order_changes, "surviving": d.surviving,
            "messages": {"before": d.messages[0], "after": d.messages[1]}}


def result_json(where: str, fmt: str, result: IdempotenceResult) -> dict[str, Any]:
    return {"sample": where, "format": fmt, "stable": result.stable, "trend": result.trend,
            "rounds": [drift_json(d) for d in result.rounds]}


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        fn = load_function(args.function)
        samples = load_samples(args.sample)
        results = []
        for where, data in samples:
            try:
                result = check_idempotence(fn, data, args.tolerance, literal_tolerance=args.literal_tolerance,
                                           rounds=args.rounds, check_order=not args.ignore_order)
            except RuntimeError as exc:
                cause = exc.__cause__
                detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
                raise UsageError(f"{args.function} raised on {where}: {detail}") from None
            except InvalidContextError as exc:
                raise UsageError(f"{args.function} on {where}: {exc}") from None
            results.append((where, detect_format(data), result))
    except UsageError as exc:
        err.write(f"ctxwatch check-idempotence: {exc}\n")
        return 2
    unstable = sum(not r.stable for _, _, r in results)
    code = 1 if unstable else 0
    if args.json:
        json.dump({"schema": SCHEMA, "version": SCHEMA_VERSION, "function": args.function,
                   "tolerance": args.tolerance, "literal_tolerance": args.literal_tolerance,
                   "check_order": not args.ignore_order,
                   "samples": [result_json(w, f, r) for w, f, r in results], "exit_code": code}, out, indent=1)
        out.write("\n")
        return code
    for where, fmt, result in results:
        out.write(f"{args.function} on {where} ({fmt}, {result.drift.messages[0]} messages after one application):\n")
        out.write("  " + result.explain().replace("\n", "\n  ") + "\n")
    out.write(f"{len(results) - unstable} of {len(results)} sample(s) stable under re-application "
              f"(exit {code})\n")
    return code
