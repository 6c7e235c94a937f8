"""Helpers of the command-line tests: running ``python -m ctxwatch.cli`` as a user would, and
generated session files (Claude Code JSONL of any size, JSONL of message snapshots).

The Claude Code writer follows the shape of the corpus session (see ../shared/corpus/README.md):
``user`` / ``assistant`` records linked by ``parentUuid``, one content block per assistant line
sharing ``message.id``, tool results in user records, and every `compact_every` turns a
``compact_boundary`` system record followed by its ``isCompactSummary`` user record.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePath

from corpus_files import jsonl

from ctxwatch.adapters import from_messages
from ctxwatch.model import Message


def ctxwatch(*args: object, timeout: float = 120, **options) -> subprocess.CompletedProcess[str]:
    """`python -m ctxwatch.cli ARGS...` in a subprocess; stdout and stderr captured as text."""
    return subprocess.run([sys.executable, "-m", "ctxwatch.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **options)


def metrics_text(url: str) -> str:
    """``GET /metrics`` of the monitor at `url`."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:  # noqa: S310 - loopback
        return resp.read().decode()


def fleet_samples(url: str) -> dict[str, float]:
    """The fleet metrics' samples (every ``ctxwatch_`` series but the monitor's own), by series."""
    text = metrics_text(url)
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(ctxwatch_(?!monitor_)\S+) (\S+)$", text, re.M)}


def late_spans(url: str) -> float:
    """The spans the monitor at `url` counted as late (duplicates, or past their gap), not applied."""
    late = re.search(r'^ctxwatch_monitor_late_spans_total\{reason="late"\} (\S+)$', metrics_text(url), re.M)
    return float(late.group(1)) if late is not None else 0.0


def loop_detail(url: str, loop_id: str) -> dict | None:
    """``GET /api/loops/{loop_id}`` of the monitor at `url` (None when it does not know the loop)."""
    try:
        with urllib.request.urlopen(f"{url}/api/loops/{urllib.parse.quote(loop_id, safe='')}",  # noqa: S310
                                    timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def recorded_project(path: Path, fmt: str) -> str:
    """The service label of a session's loop, read here from the file: a coding agent's project, the last part
    of the ``cwd`` it records (Codex: in its ``session_meta``; Gemini CLI: the folder holding ``chats/``, else
    the file's own folder), as ``ctxwatch watch`` and ``replay --otlp`` both label it; ``ctxwatch-replay``
    for the other formats."""
    if fmt == "gemini_cli":
        return path.parent.parent.name if path.parent.name == "chats" else path.parent.name
    if fmt not in ("claude_code", "codex"):
        return "ctxwatch-replay"
    records = [r.get("payload") if fmt == "codex" else r for _, r in jsonl(path)]
    return PurePath(next(r["cwd"] for r in records if isinstance(r, dict) and isinstance(r.get("cwd"), str))).name


def replay_json(*args: object, timeout: float = 120) -> tuple[int, dict, str]:
    """(exit code, the --json document, stderr) of `ctxwatch replay ARGS... --json`."""
    proc = ctxwatch("replay", *args, "--json", timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


WORDS = ("deploy", "service", "retry", "cache", "latency", "timeout", "shard", "replica", "queue", "worker",
         "index", "schema", "rollback", "token", "budget", "config", "metric", "alert", "trace", "span")


def _record(kind: str, uuid: str, parent: str | None, message: dict | None = None, **extra) -> str:
    rec = {"parentUuid": parent, "isSidechain": False, "userType": "external", "sessionId": "gen-session",
           "version": "2.1.39", "type": kind, "uuid": uuid, "timestamp": "2026-02-11T21:41:44.800Z", **extra}
    if message is not None:
        rec["message"] = message
    return json.dumps(rec, separators=(",", ":")) + "\n"


def claude_code_lines(turns: int, *, compact_every: int = 0, payload_chars: int = 400,
                      seed: int = 1) -> Iterator[str]:
    """The lines of a generated Claude Code session with `turns` tool-using turns."""
    rng = random.Random(seed)
    filler = " ".join(rng.choice(WORDS) for _ in range(payload_chars // 7 + 1))[:payload_chars]
    parent = None
    n = 0

    def uid() -> str:
        nonlocal n
        n += 1
        return f"00000000-0000-4000-8000-{n:012d}"

    kept: list[str] = []
    first = uid()
    prompt = "Fix the flaky deploy of ORD-1042 in /srv/app/deploy.py"
    yield _record("user", first, None, {"role": "user", "content": prompt})
    parent = first
    for turn in range(1, turns + 1):
        call = f"toolu_{turn:020d}"
        mid = f"msg_{turn:020d}"
        a1, a2, u1 = uid(), uid(), uid()
        yield _record("assistant", a1, parent, {"id": mid, "role": "assistant", "type": "message",
                                                "content": [{"type": "text", "text": f"Step {turn}: checking."}]})
        yield _record("assistant", a2, a1, {"id": mid, "role": "assistant", "type": "message",
                                            "content": [{"type": "tool_use", "id": call, "name": "Bash",
                                                         "input": {"command": f"grep -n retry /srv/app/m{turn}.py"}}]})
        facts = f"build {rng.getrandbits(40):010x} ERR_{turn % 97:03d} /srv/app/m{turn}.py"
        kept.append(facts)
        out = f"run {turn} {facts}\n{filler}"
        yield _record("user", u1, a2, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call, "content": out}]})
        parent = u1
        if compact_every and turn % compact_every == 0:
            boundary, summary = uid(), uid()
            yield _record("system", boundary, None, subtype="compact_boundary", content="Conversation compacted",
                          logicalParentUuid=parent, compactMetadata={"trigger": "auto", "preTokens": 150000})
            # a literal-preserving summary: every build id, error code and path of the epoch survives
            yield _record("user", summary, boundary, {"role": "user", "content":
                          f"This session is being continued. ORD-1042 /srv/app/deploy.py, up to step {turn}:\n"
                          + "\n".join(kept)}, isCompactSummary=True)
            kept.clear()
            parent = summary


def write_claude_code(path: Path, turns: int, **options) -> Path:
    with path.open("w", encoding="utf-8") as f:
        f.writelines(claude_code_lines(turns, **options))
    return path


def write_snapshots(path: Path, buffers: Sequence[Sequence[Message]], fmt: str = "openai_chat") -> Path:
    """A messages_jsonl file: one buffer per line, in `fmt` (LangChain as its ``{"type", "data"}`` dicts)."""
    with path.open("w", encoding="utf-8") as f:
        for buffer in buffers:
            data = from_messages(list(buffer), fmt)
            if fmt == "langchain":
                from langchain_core.messages import messages_to_dict
                data = messages_to_dict(data)
            f.write(json.dumps(data) + "\n")
    return path
