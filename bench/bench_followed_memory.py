"""What a followed session holds and what putting its text away costs, on the corpus Claude Code and Codex sessions.

For each file, in one process, the watch pipeline (`watch.live.LiveSession` on a `Tail`, the audit, the span
emitter to a no-op tracer), as ``ctxwatch watch`` runs it:

- held: the bytes of Python heap the session holds once it has read the whole file and waits for more
  (tracemalloc, after a garbage collection: tests/support/followed_sessions.py, the memory test's harness);
- whole: CPU seconds to read the file as it is (one wait, at its end: ``watch --once``, a catch-up), min of
  `--repeat`;
- line by line: CPU seconds with the file written one line per wait, so every message's text is put away
  before each next line and every measurement that needs it reads it back from the file (the most a live
  session can cost), min of `--repeat`; the ratio to `whole`, and the records read again.

Run it on main's tree too (``PYTHONPATH=<main>/instrumentation``; it holds the text and reads nothing again,
so `records read again` says n/a) to compare in the same run.

    .venv/bin/python bench/bench_followed_memory.py [--repeat 3] [FILE ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from corpus_files import CORPUS  # noqa: E402
from followed_sessions import follow, held_when_caught_up, line_by_line  # noqa: E402

from ctxwatch.sessions import detect_session_format  # noqa: E402

FOLLOWED = ("claude_code", "codex")


def cpu_s(run: Callable[[], object]) -> float:
    before = time.process_time()
    run()
    return time.process_time() - before


def followed_line_by_line(original: Path, scratch: Path) -> tuple[float, int | None]:
    """CPU seconds of following `original` written one line per wait, and the records read again."""
    path = scratch / original.name
    wait = line_by_line(original, path)
    sessions = []
    seconds = cpu_s(lambda: sessions.append(follow(path, wait)[0]))
    filing = getattr(sessions[0], "filing", None)
    return seconds, filing.reads if filing is not None else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    files = args.files or [p for p in sorted(CORPUS.iterdir()) if p.suffix == ".jsonl"
                           and detect_session_format(p) in FOLLOWED]
    print(f"load {os.getloadavg()[0]:.1f}; tree {Path(sys.modules['ctxwatch'].__file__ or '').parent}")
    print(f"{'file':48} {'MB':>5} {'held MB':>8} {'whole s':>8} {'by line s':>9} {'ratio':>6} {'re-read':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            held, _ = held_when_caught_up(path)
            whole = min(cpu_s(lambda p=path: follow(p, lambda: False)) for _ in range(args.repeat))
            runs = []
            for i in range(args.repeat):
                scratch = Path(tmp) / str(i)
                scratch.mkdir(exist_ok=True)
                runs.append(followed_line_by_line(path, scratch))
            by_line, reads = min(runs)
            print(f"{path.name[:48]:48} {path.stat().st_size / 1e6:5.2f} {held / 1e6:8.2f} {whole:8.2f} "
                  f"{by_line:9.2f} {by_line / whole:6.2f} {'n/a' if reads is None else reads:>8}")


if __name__ == "__main__":
    main()
