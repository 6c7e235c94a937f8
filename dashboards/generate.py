"""Generate the ctxwatch mixin's files from dashboards/mixin/ (one config: dashboards/mixin/config.py).

Writes the Prometheus recording rules and alerts (prometheus/rules/*.rules.yml) and the Grafana dashboards
(grafana/dashboards/*.json) under this folder, or under ``--out DIR`` in the same layout. The committed
files are what Prometheus and Grafana load; run ``python dashboards/generate.py`` after editing the mixin.
``--check`` exits 1 and names the files that differ from a fresh generation (tests/e2e/test_dashboards.py
runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from mixin import boards, rules
from mixin.config import DEFAULT, Config

HERE = Path(__file__).resolve().parent


class _RuleDumper(yaml.SafeDumper):
    """Block style, keys in the order written, multi-line expressions as literal blocks."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_RuleDumper.add_representer(str, _string)


def rule_file(header: str, document: dict[str, Any]) -> str:
    """A rule file: the header as comments, then the rules."""
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + yaml.dump(document, Dumper=_RuleDumper, sort_keys=False, width=118, allow_unicode=True)


def render(config: Config = DEFAULT) -> dict[str, str]:
    """Path (relative to dashboards/) -> text of every generated file."""
    files = {
        "prometheus/rules/ctxwatch-recording.rules.yml": rule_file(rules.RECORDING_HEADER, rules.recording_rules()),
        "prometheus/rules/ctxwatch-alerts.rules.yml": rule_file(rules.ALERTS_HEADER, rules.alerts(config)),
    }
    for name, build in boards.BOARDS.items():
        files[f"grafana/dashboards/{name}"] = json.dumps(build(config).json(), indent=2, sort_keys=True) + "\n"
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) the ctxwatch rules, alerts and dashboards.")
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file differs")
    parser.add_argument("--out", type=Path, default=HERE, help=f"directory (default {HERE})")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render().items():
        path = args.out / name
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python dashboards/{Path(__file__).name}): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
