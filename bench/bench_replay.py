"""`ctxwatch replay` throughput and memory on the real Claude Code session of ../shared/corpus.

Timed in-process, min / median / max over the repeats, each beside the baseline measured in the
same run — reading the file and json-parsing every line, the least any replay must do:

- read:   the session reader alone (`ctxwatch.sessions.read_session`, every event streamed);
- audit:  the whole audit (`ctxwatch.replay.audit_session`: pairing, literals, fingerprints, verdict);
- report: the audit plus the --json document and the HTML page.

Throughput is given in MB/s of file and records (lines) per second. Peak memory: the Python heap
peak of one audit (tracemalloc) beside that of the baseline, and the peak RSS of the command run
as a user runs it (`python -m ctxwatch.cli replay FILE --json`, the child's own VmHWM) beside
`python -m json.tool --json-lines FILE` (parse every line, print it).

    /work/devvenv/bin/python bench/bench_replay.py [--repeat 7] [--file PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stats import Timing, measure  # noqa: E402

from ctxwatch import __version__  # noqa: E402
from ctxwatch.replay import audit_session  # noqa: E402
from ctxwatch.replay.page import render_html  # noqa: E402
from ctxwatch.replay.schema import document  # noqa: E402
from ctxwatch.sessions import read_session  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
DEFAULT_FILE = next(iter(sorted(CORPUS.glob("claude-code__marot-spotter__*.jsonl"))), None)
# Run a module as `python -m` does, then report this process's own peak RSS (VmHWM covers the
# process image after exec; getrusage would also count the parent's RSS at the moment of spawning).
PEAK_RSS_WRAPPER = """import os, runpy, sys
sys.argv = sys.argv[1:]
try:
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
finally:
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    os.write(2, f"\\nVmHWM {int(hwm.split()[1]) * 1024}\\n".encode())
"""


def parse_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip() and json.loads(line) is not None)


def read_only(path: Path) -> None:
    for _ in read_session(path):
        pass


def full_report(path: Path) -> None:
    audits = [audit_session(path)]
    json.dumps(document(audits, 0, __version__))
    render_html(audits, exit_code=0, version=__version__)


def rates(t: Timing, size: int, records: int) -> str:
    fast, med, slow = min(t.samples), t.median, max(t.samples)
    return (f"{t.label:<8} {size / 1e6 / slow:7.1f} / {size / 1e6 / med:7.1f} / {size / 1e6 / fast:7.1f} MB/s   "
            f"{records / slow:9,.0f} / {records / med:9,.0f} / {records / fast:9,.0f} records/s")


def heap_peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def rss_peak(module: str, *args: str) -> int:
    """Peak RSS in bytes of `python -m MODULE ARGS...` run in a child process."""
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS_WRAPPER, module, *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=600)
    if proc.returncode not in (0, 1) or "VmHWM " not in proc.stderr:
        raise SystemExit(f"python -m {module} {' '.join(args)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return int(proc.stderr.rsplit("VmHWM ", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="session file (default: the corpus "
                        "Claude Code session)")
    args = parser.parse_args()
    if args.file is None or not args.file.is_file():
        raise SystemExit(f"no session file at {args.file} (pass --file)")
    path: Path = args.file
    size, records = path.stat().st_size, parse_lines(path)
    audit = audit_session(path)
    print(f"# ctxwatch replay on {path.name}: {size / 1e6:.2f} MB, {records:,} records, {audit.format}, "
          f"{audit.steps} steps, {len(audit.mutations)} mutation(s); {args.repeat} repeats, after one warm-up")
    base = measure("baseline (json-parse every line)", lambda: parse_lines(path), args.repeat)
    timings = [measure("read", lambda: read_only(path), args.repeat),
               measure("audit", lambda: audit_session(path), args.repeat),
               measure("report", lambda: full_report(path), args.repeat)]
    print("\n## time per run")
    print(base.row("ms"))
    for t in timings:
        print(t.row("ms", base))
    print("\n## throughput (min / median / max)")
    print(rates(Timing("baseline", base.samples), size, records))
    for t in timings:
        print(rates(t, size, records))

    print("\n## peak memory")
    base_heap, audit_heap = heap_peak(lambda: parse_lines(path)), heap_peak(lambda: audit_session(path))
    print(f"python heap (tracemalloc): baseline {base_heap / 1e6:6.1f} MB, audit {audit_heap / 1e6:6.1f} MB "
          f"({audit_heap / max(base_heap, 1):.1f}x)")
    base_rss = rss_peak("json.tool", "--json-lines", str(path))
    cli_rss = rss_peak("ctxwatch.cli", "replay", str(path), "--json")
    print(f"process RSS (VmHWM): baseline {base_rss / 1e6:6.1f} MB, `ctxwatch replay --json` {cli_rss / 1e6:6.1f} MB "
          f"({cli_rss / base_rss:.1f}x), file {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
