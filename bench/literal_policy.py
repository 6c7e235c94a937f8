"""The corpus measurements behind the literal rules (docs/alarm.md, "Literals").

For every tool call of every corpus file the session readers read (`ctxwatch.sessions`): the literals
its JSON keys hold, and what scanning the arguments' JSON text finds compared with scanning their
values (`ctxwatch.literals.argument_values`, what the registry reads). For every compaction: the share of P_t's
literals that are downstream, and r_t on all literals versus downstream ones.

    .venv/bin/python bench/literal_policy.py [--corpus DIR]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from calibrate_alarm import DEFAULT_CORPUS

from ctxwatch.literals import LiteralRegistry, argument_values
from ctxwatch.model import ToolCall
from ctxwatch.sessions import Mutation, read_session


def keys_of(node: object) -> Iterator[str]:
    """Every key of a JSON document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from keys_of(value)
    elif isinstance(node, list):
        for value in node:
            yield from keys_of(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    registry = LiteralRegistry()
    per_format: dict[str, Counter[str]] = {}
    compactions = []
    for path in sorted(p for p in args.corpus.iterdir() if p.suffix != ".md"):
        try:
            session = read_session(path)
            events = list(session)
        except Exception:  # noqa: BLE001 - a file no reader reads is reported by calibrate_alarm.py
            continue
        calls: dict[str, ToolCall] = {}
        for event in events:
            messages = (*event.before, *event.after) if isinstance(event, Mutation) else event.messages
            calls.update((call.id, call) for m in messages for call in m.tool_calls)
            if isinstance(event, Mutation) and event.kind == "compact" and registry.of_all(event.before):
                every, downstream = registry.of_all(event.before), registry.downstream_of_all(event.before)
                after = registry.of_all(event.after)
                compactions.append((path.name, event.line, len(downstream) / len(every),
                                    len(every - after) / len(every), len(downstream - after) / len(downstream)))
        tally = per_format.setdefault(session.format, Counter())
        text_found: set[str] = set()
        value_found: set[str] = set()
        for call in calls.values():
            tally["calls"] += 1
            text_found |= registry.extract(call.arguments)
            value_found |= set().union(*map(registry.extract, argument_values(call.arguments)))
            try:
                document = json.loads(call.arguments)
            except ValueError:
                tally["not JSON"] += 1
                continue
            tally["key literals"] += sum(len(registry.extract(key)) for key in keys_of(document))
        tally["hidden by the JSON text"] += len(value_found - text_found)
        tally["invented by the JSON text"] += len(text_found - value_found)
    print("| format | tool calls | not JSON | literals in keys | hidden by scanning the JSON text | "
          "invented by it |")
    print("|---|---|---|---|---|---|")
    for fmt, tally in sorted(per_format.items()):
        print(f"| {fmt} | {tally['calls']} | {tally['not JSON']} | {tally['key literals']} | "
              f"{tally['hidden by the JSON text']} | {tally['invented by the JSON text']} |")
    print("\n| compaction | downstream share of P_t's literals | r_t, all literals | r_t, downstream |")
    print("|---|---|---|---|")
    for name, line, share, r_all, r_down in compactions:
        print(f"| {name}, line {line} | {share:.2f} | {r_all:.3f} | {r_down:.3f} |")


if __name__ == "__main__":
    main()
