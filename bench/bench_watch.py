"""`ctxwatch watch` as a daemon: CPU and memory following 200 session files with 5 active, the cost
per record, the pickup latency, and catch-up throughput on the corpus.

Everything runs as a user runs it: ``python -m ctxwatch.cli watch`` in a subprocess against a
temporary HOME (``~/.claude/projects/<project>/<session>.jsonl``), exporting over OTLP/HTTP to a real
monitor subprocess on 127.0.0.1. CPU is the watcher's own user+system time (/proc/PID/stat) over
fixed windows; memory its VmRSS. Each figure is min / median / max over the windows or repeats,
beside a baseline measured in the same run:

- idle: the watcher following 200 files nobody writes, beside a plain Python loop that only
  ``stat``s the same 200 files at the same interval (the least any poller does);
- active: 5 of the 200 files appended at a fixed rate (real corpus records); the cost per record
  is the CPU above idle divided by the records written;
- pickup latency: a compaction (``compact_boundary`` and its summary) appended to an active file
  until the monitor's loop shows the new cycle, beside one ``GET /api/loops/{id}`` (the floor of
  the measurement);
- new sessions: a session file created in a new project directory until its loop is at the
  monitor (``--rescan``, default 0.25 s), beside one ``GET``; one search of the places (each
  directory stat'ed, the changed ones listed) and a first search (all listed), beside one ``stat``
  of every file; and, when the ``watchfiles`` package is installed, an inotify baseline over the
  same tree: a process that only waits for watchfiles' events (its idle CPU beside the watcher's,
  and file created -> event);
- catch-up: ``watch --once`` over the corpus sessions of the three agents (MB/s), beside
  ``ctxwatch replay --otlp`` on the same files;
- restart: a second ``watch --once`` of each compacted corpus session with the state the first left (it
  resumes after the last compaction, `ctxwatch.watch.checkpoint`), beside the same with the state's resume
  point removed (the session read again from its start): CPU of the watcher process, beside that of a
  ``watch --once`` of an empty directory (the start-up floor), and the share of the file read again.

    .venv/bin/python bench/bench_watch.py [--files 200] [--active 5] [--window 10] [--windows 3]
        [--only daemon|catch-up|restart]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stats import Timing, measure  # noqa: E402

from ctxwatch.demo.monitor_process import MonitorProcess  # noqa: E402
from ctxwatch.sessions import detect_session_format  # noqa: E402
from ctxwatch.watch.discovery import Places  # noqa: E402

CORPUS = next((p for p in (Path(__file__).resolve().parents[2] / "shared" / "corpus", Path("/work/shared/corpus"))
               if p.is_dir()), Path(__file__).resolve().parents[2] / "shared" / "corpus")
TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.25


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def claude_lines() -> list[str]:
    """The lines of the largest corpus Claude Code session (records to replay into the bench's files)."""
    files = [p for p in CORPUS.iterdir() if p.suffix == ".jsonl" and detect_session_format(p) == "claude_code"]
    biggest = max(files, key=lambda p: p.stat().st_size)
    return [x if x.endswith("\n") else x + "\n" for x in biggest.read_text(encoding="utf-8").splitlines()]


def cpu_percent_windows(pid: int, window_s: float, windows: int, label: str) -> Timing:
    """The share of one core `pid` used in each window (as a Timing of fractions)."""
    samples = []
    for _ in range(windows):
        before, t0 = cpu_s(pid), time.monotonic()
        time.sleep(window_s)
        samples.append((cpu_s(pid) - before) / (time.monotonic() - t0))
    return Timing(label, samples)


def percent_row(t: Timing, baseline: Timing | None = None) -> str:
    lo, med, hi = (100 * x for x in (min(t.samples), t.median, max(t.samples)))
    ratio = f"  {t.median / baseline.median:6.2f}x {baseline.label}" if baseline and baseline.median else ""
    return f"{t.label:<48} min {lo:7.3f}  median {med:7.3f}  max {hi:7.3f} % of one core{ratio}"


STAT_LOOP = """import os, sys, time
paths = sys.argv[2:]
while True:
    for p in paths:
        os.stat(p)
    time.sleep(float(sys.argv[1]))
"""


INOTIFY_LOOP = """import sys, time, watchfiles
for changes in watchfiles.watch(sys.argv[1], debounce=0, step=10, force_polling=False):
    for _, path in changes:
        print(time.monotonic(), path, flush=True)
"""


def loop_cycles(url: str, loop_id: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/api/loops/{urllib.parse.quote(loop_id, safe='')}", timeout=5) as r:  # noqa: S310
            return json.loads(r.read())["cycles"]
    except urllib.error.HTTPError:
        return -1


def compaction(session: str, n: int) -> str:
    boundary, summary = str(uuid.uuid4()), str(uuid.uuid4())
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    common = {"isSidechain": False, "userType": "external", "sessionId": session, "version": "2.1.39",
              "cwd": "/home/dev/shop", "timestamp": stamp}
    marker = {**common, "parentUuid": None, "type": "system", "subtype": "compact_boundary", "uuid": boundary,
              "content": "Conversation compacted", "compactMetadata": {"trigger": "auto", "preTokens": n}}
    summary_record = {**common, "parentUuid": boundary, "type": "user", "uuid": summary, "isCompactSummary": True,
                      "message": {"role": "user", "content": f"Summary {n}: work so far."}}
    return json.dumps(marker) + "\n" + json.dumps(summary_record) + "\n"


def wait_caught_up(state: Path, files: list[Path], lines: int, timeout_s: float = 900) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            saved = json.loads(state.read_text())["files"]
            if all(saved.get(str(p), {}).get("line") == lines for p in files):
                return time.monotonic() - t0
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.2)
    raise RuntimeError("the watcher did not catch up")


def daemon(args: argparse.Namespace, url: str, tmp: Path) -> None:
    lines = claude_lines()
    head, rest = lines[:args.head], lines[args.head:]
    project = tmp / "home" / ".claude" / "projects" / "-home-dev-shop"
    project.mkdir(parents=True)
    files = [project / f"{uuid.UUID(int=i + 1)}.jsonl" for i in range(args.files)]
    for f in files:
        f.write_text("".join(head), encoding="utf-8")
    state = tmp / "state.json"
    cmd = [sys.executable, "-m", "ctxwatch.cli", "watch", "--otlp", url, "--state", str(state), "--poll", str(POLL_S),
           "--idle", str(args.idle)]
    watch = subprocess.Popen(cmd, env={**os.environ, "HOME": str(tmp / "home")}, stderr=subprocess.DEVNULL)
    baseline = subprocess.Popen([sys.executable, "-c", STAT_LOOP, str(POLL_S), *map(str, files)])
    try:
        took = wait_caught_up(state, files, len(head))
        print(f"caught up on {args.files} files of {len(head)} records in {took:.1f} s; "
              f"RSS {rss_mib(watch.pid):.1f} MiB (every session in memory)")
        time.sleep(args.idle + 2 * POLL_S + 1)
        print(f"RSS after the idle eviction ({args.idle:.0f} s): {rss_mib(watch.pid):.1f} MiB")
        base = cpu_percent_windows(baseline.pid, args.window, args.windows, "stat loop over the same files")
        idle = cpu_percent_windows(watch.pid, args.window, args.windows, f"watch, {args.files} files idle")
        print(percent_row(base))
        print(percent_row(idle, base))

        active, written = files[:args.active], [0]
        stop = threading.Event()

        def write() -> None:
            period = 1.0 / args.rate
            for i, line in enumerate(rest):
                if stop.is_set():
                    return
                with active[i % len(active)].open("a", encoding="utf-8") as f:
                    f.write(line)
                written[0] += 1
                time.sleep(period)

        writer = threading.Thread(target=write)
        before_cpu, before_written = cpu_s(watch.pid), written[0]
        writer.start()
        busy = cpu_percent_windows(watch.pid, args.window, args.windows,
                                   f"watch, {args.active} active at {args.rate:.0f} records/s")
        stop.set()
        writer.join()
        spent, records = cpu_s(watch.pid) - before_cpu, written[0] - before_written
        elapsed = args.window * args.windows
        per_record = (spent - idle.median * elapsed) / max(records, 1)
        print(percent_row(busy, idle))
        print(f"cost per record above idle: {per_record * 1e3:.3f} ms CPU ({records} records); "
              f"RSS {rss_mib(watch.pid):.1f} MiB")

        target = files[0]
        loop_id = f"claude-code-{target.stem}"
        floor, latency = [], []
        for n in range(args.latency_repeat):
            t0 = time.perf_counter()
            seen = loop_cycles(url, loop_id)
            floor.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            with target.open("a", encoding="utf-8") as f:
                f.write(compaction(target.stem, 1000 + n))
            while loop_cycles(url, loop_id) <= seen:
                time.sleep(0.005)
            latency.append(time.perf_counter() - t0)
        floor_t = Timing("one GET /api/loops/{id}", floor)
        print(floor_t.row("ms"))
        print(Timing("pickup: compaction written -> cycle at the monitor", latency).row("ms", floor_t))
        new_sessions(args, url, project.parent, lines[:args.head], floor_t, idle)
    finally:
        baseline.kill()
        watch.send_signal(signal.SIGTERM)
        watch.wait(timeout=120)


def new_sessions(args: argparse.Namespace, url: str, projects: Path, head: list[str], floor: Timing,
                 idle: Timing) -> None:
    """Sessions that start while the watcher runs: created -> loop at the monitor; the inotify baseline."""
    pickup = []
    for n in range(args.latency_repeat):
        project = projects / f"-home-dev-new{n}"
        project.mkdir()
        path = project / f"{uuid.uuid4()}.jsonl"
        t0 = time.perf_counter()
        path.write_text("".join(head), encoding="utf-8")
        while loop_cycles(url, f"claude-code-{path.stem}") < 0:
            time.sleep(0.005)
        pickup.append(time.perf_counter() - t0)
        time.sleep(0.37 * (n + 1) % 1.0)  # not in step with the rescan
    print(Timing("new session: file created -> loop at the monitor", pickup).row("ms", floor))
    places = Places([], projects.parent.parent)
    files = sorted(places.search())
    stat_pass = measure(f"one stat of each of the {len(files)} files", lambda: [os.stat(p) for p in files], 20)
    print(stat_pass.row("ms"))
    print(measure("one search of the standard places", places.search, 20).row("ms", stat_pass))
    print(measure("a first search (every directory listed)", lambda: Places([], projects.parent.parent).search(),
                  20).row("ms", stat_pass))
    try:
        import watchfiles  # noqa: F401 - only the baseline uses it
    except ImportError:
        print("inotify baseline: skipped (watchfiles is not installed)")
        return
    inotify = subprocess.Popen([sys.executable, "-c", INOTIFY_LOOP, str(projects)], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(2)  # its watches are set
        print(percent_row(cpu_percent_windows(inotify.pid, args.window, args.windows,
                                              "watchfiles (inotify) on the same tree, idle"), idle))
        printed: queue.Queue = queue.Queue()
        threading.Thread(target=_read_events, args=(inotify, printed), daemon=True).start()
        events, missed = [], 0
        for _ in range(args.latency_repeat):
            path = projects / "-home-dev-new0" / f"{uuid.uuid4()}.jsonl"  # a directory watched since the start
            t0 = time.monotonic()
            path.write_text("".join(head), encoding="utf-8")
            at = _event_for(printed, path, t0 + 10)
            if at is None:
                missed += 1
            else:
                events.append(at - t0)
        if events:
            print(Timing("inotify: file created -> event (watchfiles)", events).row("ms")
                  + (f"   ({missed} events missed)" if missed else ""))
        else:
            print(f"inotify: no event within 10 s for any of the {missed} files created")
    finally:
        inotify.kill()
        inotify.wait()


def _event_for(events: queue.Queue, path: Path, deadline: float) -> float | None:
    """When the inotify baseline printed an event for `path` (its monotonic time), or None by `deadline`."""
    while (left := deadline - time.monotonic()) > 0:
        try:
            at, changed = events.get(timeout=left)
        except queue.Empty:
            break
        if changed == str(path):
            return at
    return None


def _read_events(process: subprocess.Popen, events: queue.Queue) -> None:
    for line in process.stdout:
        at, _, changed = line.rstrip("\n").partition(" ")
        events.put((float(at), changed))


def catch_up(args: argparse.Namespace, url: str, tmp: Path) -> None:
    files = [p for p in sorted(CORPUS.iterdir()) if p.suffix in (".jsonl", ".json")
             and detect_session_format(p) in ("claude_code", "codex", "gemini_cli")]
    mib = sum(p.stat().st_size for p in files) / 2**20
    watch, replay = [], []
    for i in range(args.repeat):
        once = ["watch", "--once", "--state", str(tmp / f"once-{i}.json")]
        for samples, cmd in ((watch, once), (replay, ["replay"])):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "ctxwatch.cli", *cmd, *map(str, files), "--otlp", url],
                           capture_output=True, check=False)
            samples.append(time.perf_counter() - t0)
    base = Timing(f"replay --otlp, {len(files)} corpus files", replay)
    print(base.row("s"))
    print(Timing(f"watch --once, the same {mib:.1f} MiB", watch).row("s", base))
    print(f"catch-up throughput: {mib / Timing('', watch).median:.2f} MB/s median "
          f"(replay --otlp {mib / base.median:.2f} MB/s)")


def restart(args: argparse.Namespace, url: str, tmp: Path) -> None:
    files = [p for p in sorted(CORPUS.iterdir()) if p.suffix == ".jsonl" and detect_session_format(p) in (
        "claude_code", "codex")]
    empty = tmp / "restart-empty"
    empty.mkdir()
    floor = Timing("watch --once of an empty directory", [watch_once(empty, tmp / "empty.json", url)
                                                           for _ in range(args.repeat)])
    print(floor.row("s"))
    for original in files:
        session = tmp / "restart" / f"{uuid.uuid4()}.jsonl"
        session.parent.mkdir(exist_ok=True)
        session.write_bytes(original.read_bytes())
        state = tmp / "restart" / "state.json"
        watch_once(session, state, url)
        saved = json.loads(state.read_text())
        entry = saved["files"][str(session)]
        if not entry.get("resume"):
            continue  # no compaction: a restart reads it from its start, as before
        share = 1 - entry["resume"]["offset"] / session.stat().st_size
        without = tmp / "restart" / "start.json"
        without.write_text(json.dumps({**saved, "files": {str(session): {**entry, "resume": None}}}))
        samples: dict[Path, list[float]] = {state: [], without: []}
        for _ in range(args.repeat):
            for which, cpu in samples.items():
                scratch = tmp / "restart" / "scratch.json"
                scratch.write_text(which.read_text())
                cpu.append(watch_once(session, scratch, url))
        base, resumed = Timing("  read again from its start", samples[without]), Timing(
            "  resumed after its last compaction", samples[state])
        print(f"restart {original.name[:56]} ({session.stat().st_size / 1e6:.2f} MB, {share:.0%} read again):")
        print(base.row("s", floor))
        print(resumed.row("s", base))
        print(f"  above the floor: {resumed.median - floor.median:.2f} s resumed vs "
              f"{base.median - floor.median:.2f} s from its start")


def watch_once(session: Path, state: Path, url: str) -> float:
    """CPU seconds (user + system) of one ``watch --once`` of `session` (a file or a directory) with `state`."""
    before = os.times()
    subprocess.run([sys.executable, "-m", "ctxwatch.cli", "watch", "--once", str(session), "--otlp", url,
                    "--state", str(state)], capture_output=True, check=False)
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--active", type=int, default=5)
    parser.add_argument("--head", type=int, default=150, help="records each file holds at the start")
    parser.add_argument("--rate", type=float, default=50.0, help="records per second written to the active files")
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--idle", type=float, default=20.0, help="the watcher's --idle eviction")
    parser.add_argument("--latency-repeat", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="catch-up and restart repeats")
    parser.add_argument("--only", choices=("daemon", "catch-up", "restart"), help="run one section")
    args = parser.parse_args()
    sections = {"daemon": daemon, "catch-up": catch_up, "restart": restart}
    with tempfile.TemporaryDirectory() as tmp:
        monitor = MonitorProcess(":memory:", "--grpc-port", "off").start()
        try:
            for name, section in sections.items():
                if args.only in (None, name):
                    section(args, monitor.client.url, Path(tmp))
        finally:
            monitor.close()


if __name__ == "__main__":
    main()
