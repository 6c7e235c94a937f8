"""`ctxwatch replay` throughput and memory: the corpus's Claude Code sessions, and generated worst cases.

Timed in-process, min / median / max over the repeats, each beside the baseline measured in the
same run — reading the files and json-parsing every line, the least any replay must do:

- read:   the session reader alone (`ctxwatch.sessions.read_session`, every event streamed);
- audit:  the whole audit (`ctxwatch.replay.audit_session`: pairing, literals, fingerprints, verdict);
- report: the audit plus the --json document and the HTML page.

The corpus part runs over every Claude Code session of ../shared/corpus (picked by their records,
not their names) as one batch. The worst cases are generated Claude Code files of a given size:

- ``one-turn``: one assistant turn logged as N tool_use lines (one block each) and then N result
  lines, which join one assistant and one user message — the shape that once made the reader
  rebuild the growing message at every line (quadratic: 57 s for 7 MB);
- ``rewinds``: N short turns, every other one a rewind to the turn before — N/2 mutations of a
  buffer that keeps growing, each measured as the guard measures a live one (once O(m·n): every
  mutation re-read its whole buffer);
- ``losing``: the same, but each user record names a ticket of its own, so every rewind really loses a
  literal (once O(m·n): each loss was confirmed by a look through the whole buffer after).

Each is replayed at three sizes (a quarter, half and all of ``--worst-mb``), each beside its own
baseline; the time per MB and how the ratio to the baseline grows from the smallest size (1 while
the time per MB stays flat, 4 at the largest size for a quadratic path, whatever the load of the
machine) are printed. Peak memory: the Python heap peak of
one audit (tracemalloc) beside that of the baseline, and the peak RSS of the command run as a user
runs it (`python -m ctxwatch.cli replay FILE --json`, the child's own VmHWM) beside
`python -m json.tool --json-lines FILE` (parse every line, print it).

    /work/devvenv/bin/python bench/bench_replay.py [--repeat 5] [--corpus DIR] [--worst-mb 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stats import Timing, measure  # noqa: E402

from ctxwatch import __version__  # noqa: E402
from ctxwatch.replay import audit_session  # noqa: E402
from ctxwatch.replay.page import render_html  # noqa: E402
from ctxwatch.replay.schema import document  # noqa: E402
from ctxwatch.sessions import detect_session_format, read_session  # noqa: E402

CORPUS = next((p for p in (Path(__file__).resolve().parents[2] / "shared" / "corpus", Path("/work/shared/corpus"))
               if p.is_dir()), Path(__file__).resolve().parents[2] / "shared" / "corpus")
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


TARGET_MB_S = 50.0  # issue 14: the audit on the corpus's Claude Code files


def claude_code_files(corpus: Path) -> list[Path]:
    """The corpus files the reader detects as Claude Code sessions."""
    out = []
    for path in sorted(p for p in corpus.iterdir() if p.is_file() and p.suffix != ".md"):
        try:
            if detect_session_format(path) == "claude_code":
                out.append(path)
        except ValueError:
            continue
    return out


# --- generated worst cases -----------------------------------------------------------------------
def _record(kind: str, uuid: str, parent: str | None, message: dict) -> str:
    return json.dumps({"parentUuid": parent, "isSidechain": False, "sessionId": "bench", "type": kind,
                       "uuid": uuid, "message": message}, separators=(",", ":")) + "\n"


def one_turn_lines(n: int) -> Iterator[str]:
    """One assistant turn of `n` tool_use lines, then their `n` result lines."""
    yield _record("user", "u0", None, {"role": "user", "content": "Check every shard of ORD-1042"})
    parent = "u0"
    for i in range(n):
        yield _record("assistant", f"a{i}", parent, {"id": "msg_1", "role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{i:08d}", "name": "Bash", "input": {"command": f"check shard-{i}"}}]})
        parent = f"a{i}"
    for i in range(n):
        yield _record("user", f"r{i}", parent, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:08d}", "content": f"shard-{i} ok " + "x" * 120}]})
        parent = f"r{i}"


def rewind_lines(n: int, tickets: bool = False) -> Iterator[str]:
    """`n` short turns; every other user record re-parents onto the turn before (a rewind). With
    `tickets`, each user record names a ticket of its own, so every rewind loses one literal."""
    yield _record("user", "u0", None, {"role": "user", "content": "Plan the migration of ORD-1042"})
    parent = "u0"
    for i in range(n):
        yield _record("assistant", f"a{i}", parent, {"id": f"msg_{i}", "role": "assistant",
                                                     "content": [{"type": "text", "text": f"step {i} " + "y" * 150}]})
        yield _record("user", f"u{i + 1}", f"a{i - 1}" if i % 2 else f"a{i}",
                      {"role": "user", "content": f"go on {f'OPS-{i:05d}' if tickets else i} " + "z" * 150})
        parent = f"u{i + 1}"


def losing_rewind_lines(n: int) -> Iterator[str]:
    return rewind_lines(n, tickets=True)


WORST_CASES: dict[str, tuple[Callable[[int], Iterator[str]], int]] = {
    "one-turn": (one_turn_lines, 2 * 240),  # (generator, bytes per unit of n, about)
    "rewinds": (rewind_lines, 2 * 250),
    "losing": (losing_rewind_lines, 2 * 250),
}


def write_worst_case(directory: Path, name: str, megabytes: float) -> Path:
    generate, unit = WORST_CASES[name]
    path = directory / f"{name}-{megabytes:g}mb.jsonl"
    with path.open("w", encoding="utf-8") as f:
        f.writelines(generate(int(megabytes * 1e6 / unit)))
    return path


# --- timing ----------------------------------------------------------------------------------------
def parse_lines(paths: list[Path]) -> int:
    records = 0
    for path in paths:
        with path.open("rb") as f:
            records += sum(1 for line in f if line.strip() and json.loads(line) is not None)
    return records


def read_only(paths: list[Path]) -> None:
    for path in paths:
        for _ in read_session(path):
            pass


def audit_all(paths: list[Path]) -> None:
    for path in paths:
        audit_session(path)


def full_report(paths: list[Path]) -> None:
    audits = [audit_session(path) for path in paths]
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


def corpus_section(paths: list[Path], repeat: int) -> None:
    size, records = sum(p.stat().st_size for p in paths), parse_lines(paths)
    mutations = sum(len(audit_session(p).mutations) for p in paths)
    print(f"# ctxwatch replay on the corpus's {len(paths)} Claude Code sessions: {size / 1e6:.2f} MB, "
          f"{records:,} records, {mutations} mutation(s); {repeat} repeats, after one warm-up")
    audit_all(paths)
    base = measure("baseline (json-parse every line)", lambda: parse_lines(paths), repeat)
    timings = [measure("read", lambda: read_only(paths), repeat),
               measure("audit", lambda: audit_all(paths), repeat),
               measure("report", lambda: full_report(paths), repeat)]
    print("\n## time per run (all files)")
    print(base.row("ms"))
    for t in timings:
        print(t.row("ms", base))
    print("\n## throughput (min / median / max)")
    print(rates(Timing("baseline", base.samples), size, records))
    for t in timings:
        print(rates(t, size, records))
    audit_rate = size / 1e6 / timings[1].median
    print(f"target (issue 14): audit >= {TARGET_MB_S:g} MB/s median: {audit_rate:.1f} MB/s, "
          f"{'MET' if audit_rate >= TARGET_MB_S else 'MISS'}")

    largest = max(paths, key=lambda p: p.stat().st_size)
    print(f"\n## peak memory ({largest.name}, {largest.stat().st_size / 1e6:.1f} MB)")
    base_heap, audit_heap = heap_peak(lambda: parse_lines([largest])), heap_peak(lambda: audit_session(largest))
    print(f"python heap (tracemalloc): baseline {base_heap / 1e6:6.1f} MB, audit {audit_heap / 1e6:6.1f} MB "
          f"({audit_heap / max(base_heap, 1):.1f}x)")
    base_rss = rss_peak("json.tool", "--json-lines", str(largest))
    cli_rss = rss_peak("ctxwatch.cli", "replay", str(largest), "--json")
    print(f"process RSS (VmHWM): baseline {base_rss / 1e6:6.1f} MB, `ctxwatch replay --json` {cli_rss / 1e6:6.1f} MB "
          f"({cli_rss / base_rss:.1f}x)")


def worst_case_section(megabytes: float, repeat: int) -> None:
    sizes = (megabytes / 4, megabytes / 2, megabytes)
    print(f"\n# generated worst cases at {', '.join(f'{mb:g}' for mb in sizes)} MB ({repeat} repeats each)")
    print("audit time per MB, each size beside its own json-parse baseline; growth = (x baseline) / (x baseline at "
          "the smallest size): 1 while the time per MB stays flat (linear), 4 at the largest size if quadratic")
    print(f"{'case':<10} {'size':>8} {'audit min':>10} {'median':>8} {'max':>8} {'s/MB median':>12} "
          f"{'x baseline':>11} {'growth':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in WORST_CASES:
            first: float | None = None
            for mb in sizes:
                path = write_worst_case(Path(tmp), name, mb)
                size = path.stat().st_size / 1e6
                base = measure("baseline", lambda p=path: parse_lines([p]), repeat)
                t = measure("audit", lambda p=path: audit_session(p), repeat)
                ratio = t.median / base.median
                first = first or ratio
                print(f"{name:<10} {size:6.2f}MB {min(t.samples):9.2f}s {t.median:7.2f}s {max(t.samples):7.2f}s "
                      f"{t.median / size:12.2f} {ratio:10.1f}x {ratio / first:7.2f}")
            rss = rss_peak("ctxwatch.cli", "replay", str(path), "--json")
            print(f"{'':<10} peak RSS of `ctxwatch replay --json` at {mb:g} MB: {rss / 1e6:.1f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--worst-mb", type=float, default=4.0, help="size of the largest generated worst case")
    args = parser.parse_args()
    paths = claude_code_files(args.corpus) if args.corpus.is_dir() else []
    if paths:
        corpus_section(paths, args.repeat)
    else:
        print(f"# no Claude Code session in {args.corpus}: corpus part skipped")
    worst_case_section(args.worst_mb, max(1, args.repeat // 2))


if __name__ == "__main__":
    main()
