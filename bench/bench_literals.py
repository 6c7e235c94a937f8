"""Literal extraction on the texts a replay of the corpus's Claude Code sessions reads literals from.

The texts are the ones `ctxwatch replay` extracts (recorded through a registry passed to
`audit_session`), each file's with a fresh registry, as the CLI does. Timed in-process, min / median /
max over the repeats, beside the baseline measured in the same run:

- whole text: the scan every registry made before literals were read token by token (every pattern
  over the text, token-local ones over its candidate tokens) — the literals the token path must equal;
- tokens:     `LiteralRegistry.extract` (token-local literals from the per-token cache).

Both give the same literals on every text (checked here before timing; `tests/instrumentation/
test_literal_tokens.py` proves it). ``--icount PART`` runs one part once after a warm-up, inside
``operator.call``, for an instruction count of that part alone:

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=_operator_call \\
        --callgrind-out-file=/dev/null python bench/bench_literals.py --icount tokens

PART is ``tokens``, ``whole`` or ``audit`` (the whole audit of the same files, for the share).

    /work/main/.venv/bin/python bench/bench_literals.py [--repeat 5] [--corpus DIR] [--icount PART]
"""

from __future__ import annotations

import argparse
import operator
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_replay import CORPUS, audit_all, claude_code_files, heap_peak  # noqa: E402
from stats import measure  # noqa: E402

from ctxwatch.literals import LiteralRegistry  # noqa: E402
from ctxwatch.replay import audit_session  # noqa: E402


class _Recording(LiteralRegistry):
    """A default registry that keeps every text it extracts literals from."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def extract(self, text: str) -> frozenset[str]:
        self.texts.append(text)
        return super().extract(text)


def replay_texts(paths: list[Path]) -> list[list[str]]:
    """For each file, the texts its replay extracts literals from, in order."""
    out = []
    for path in paths:
        registry = _Recording()
        audit_session(path, registry=registry)
        out.append(registry.texts)
    return out


def run_whole(files: list[list[str]]) -> None:
    for texts in files:
        registry = LiteralRegistry()
        for text in texts:
            registry.extract_whole(text)


def run_tokens(files: list[list[str]]) -> None:
    for texts in files:
        registry = LiteralRegistry()
        for text in texts:
            registry.extract(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--icount", choices=("tokens", "whole", "audit"))
    args = parser.parse_args()
    paths = claude_code_files(args.corpus) if args.corpus.is_dir() else []
    if not paths:
        raise SystemExit(f"no Claude Code session in {args.corpus}")
    files = replay_texts(paths)
    parts: dict[str, Callable[[], None]] = {"whole": lambda: run_whole(files), "tokens": lambda: run_tokens(files),
                                            "audit": lambda: audit_all(paths)}
    if args.icount:
        parts[args.icount]()  # warm-up: compiled patterns, imports
        operator.call(parts[args.icount])
        return
    registry = LiteralRegistry()
    differ = sum(registry.extract(t) != registry.extract_whole(t) for texts in files for t in texts)
    count, chars = sum(map(len, files)), sum(len(t) for texts in files for t in texts)
    print(f"# literal extraction on the {count:,} texts ({chars / 1e6:.2f} M characters) that the replay of the "
          f"corpus's {len(paths)} Claude Code sessions reads; {args.repeat} repeats after one warm-up; "
          f"texts whose literals differ from the whole-text scan: {differ}")
    run_whole(files)
    run_tokens(files)
    base = measure("whole text (baseline)", parts["whole"], args.repeat)
    tokens = measure("tokens (LiteralRegistry.extract)", parts["tokens"], args.repeat)
    print(base.row("ms"))
    print(tokens.row("ms", base))
    print(f"python heap peak (tracemalloc): whole text {heap_peak(parts['whole']) / 1e6:.2f} MB, "
          f"tokens {heap_peak(parts['tokens']) / 1e6:.2f} MB")
    if differ:
        raise SystemExit(f"{differ} text(s) differ")


if __name__ == "__main__":
    main()
