"""Where the shared corpus is, and its files picked by what they hold.

Each file is classified from its raw content by this module itself, never from its name and
never with the reader under test, so a test that asks for "every Codex rollout with a
``compacted`` record" gets every such file the corpus holds, however many there are. The facts
the tests check (boundary lines, tool pairs, summaries) are read from the raw records here too.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent


def find_corpus() -> Path:
    """CTXWATCH_CORPUS, else ../shared/corpus beside the checkout, else the workplace's /work/shared/corpus."""
    candidates = [os.environ.get("CTXWATCH_CORPUS"), TESTS.parent.parent / "shared" / "corpus",
                  "/work/shared/corpus"]
    for candidate in filter(None, candidates):
        if Path(candidate).is_dir():
            return Path(candidate).resolve()
    return (TESTS.parent.parent / "shared" / "corpus").resolve()


CORPUS = find_corpus()

# the formats the session readers know; a corpus file in another format is expected to be refused
READ_FORMATS = frozenset({"claude_code", "codex", "swe_agent", "openhands", "gemini_cli"})


def session_files(corpus: Path = CORPUS) -> list[Path]:
    """Every session file of the corpus (its README excluded), sorted by name."""
    if not corpus.is_dir():
        return []
    return sorted(p for p in corpus.iterdir() if p.is_file() and p.suffix != ".md")


@cache
def jsonl(path: Path) -> tuple[tuple[int, dict], ...]:
    """(1-based line, record) of every JSON object line of a JSONL file; () if it is not JSONL."""
    records = []
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append((number, record))
    except (ValueError, UnicodeDecodeError):
        return ()
    return tuple(records)


@cache
def document(path: Path) -> object:
    """The one JSON document a file holds, or None if it is not one."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


@cache
def kind_of(path: Path) -> str | None:
    """The format a file's raw content is in: claude_code, codex, swe_agent, openhands, gemini_cli."""
    doc = document(path)
    if isinstance(doc, dict) and isinstance(doc.get("trajectory"), list):
        return "swe_agent"
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list) and "sessionId" in doc and any(
            isinstance(m, dict) and m.get("type") == "gemini" for m in doc["messages"]):
        return "gemini_cli"
    if isinstance(doc, list) and doc and all(isinstance(e, dict) and ("action" in e or "observation" in e)
                                             for e in doc):
        return "openhands"
    records = [r for _, r in jsonl(path)]
    if any(r.get("type") in ("session_meta", "response_item") and "payload" in r for r in records):
        return "codex"
    if any(r.get("type") in ("user", "assistant") and "uuid" in r and "sessionId" in r for r in records):
        return "claude_code"
    return None


def of_kind(kind: str, corpus: Path = CORPUS) -> list[Path]:
    """Every corpus file whose raw content is in format `kind`."""
    return [p for p in session_files(corpus) if kind_of(p) == kind]


def readable_files(corpus: Path = CORPUS) -> list[Path]:
    """Every corpus file in a format the readers know."""
    return [p for p in session_files(corpus) if kind_of(p) in READ_FORMATS]


# --- Claude Code facts ----------------------------------------------------------------------------
def claude_code_boundaries(path: Path) -> list[tuple[int, dict]]:
    """(line, record) of every ``compact_boundary`` system record."""
    return [(n, r) for n, r in jsonl(path) if r.get("type") == "system" and r.get("subtype") == "compact_boundary"]


def claude_code_message_records(path: Path) -> list[tuple[int, dict]]:
    """(line, record) of every main-chain user/assistant record carrying a message."""
    return [(n, r) for n, r in jsonl(path) if r.get("type") in ("user", "assistant")
            and isinstance(r.get("message"), dict) and not r.get("isSidechain")]


def claude_code_inherited(path: Path) -> list[int]:
    """Lines of the boundaries before any message of the file: a compaction copied from the parent session."""
    messages = claude_code_message_records(path)
    first = messages[0][0] if messages else float("inf")
    return [n for n, _ in claude_code_boundaries(path) if n < first]


def claude_code_compactions(path: Path) -> list[tuple[int, dict]]:
    """The boundaries that compact this session's own buffer."""
    inherited = set(claude_code_inherited(path))
    return [(n, r) for n, r in claude_code_boundaries(path) if n not in inherited]


def claude_code_pre_tokens(path: Path) -> list[int]:
    """``compactMetadata.preTokens`` of every compaction of the session's own buffer that records it."""
    return [meta["preTokens"] for _, r in claude_code_compactions(path)
            if isinstance(meta := r.get("compactMetadata"), dict) and isinstance(meta.get("preTokens"), int)]


def claude_code_with_pre_tokens(corpus: Path = CORPUS, compactions: int = 1) -> list[Path]:
    """The Claude Code sessions with at least `compactions` compactions recording their tokens before, the
    shortest file first."""
    files = [path for path in of_kind("claude_code", corpus) if len(claude_code_pre_tokens(path)) >= compactions]
    return sorted(files, key=lambda path: path.stat().st_size)


def claude_code_microcompacts(path: Path) -> list[tuple[int, dict]]:
    """(line, record) of every ``microcompact_boundary`` system record."""
    return [(n, r) for n, r in jsonl(path) if r.get("type") == "system" and r.get("subtype") == "microcompact_boundary"]


def claude_code_in_flight(path: Path) -> dict[int, list[tuple[str, int]]]:
    """Per compaction line, the calls made since the previous boundary that never got a result
    ((id, line of the call)): in flight when the compaction hit."""
    calls, results = claude_code_tool_ids(path)
    unanswered = sorted((line, cid) for cid, line in calls.items() if cid not in results)
    out: dict[int, list[tuple[str, int]]] = {}
    previous = 0
    for line, _ in claude_code_boundaries(path):
        out[line] = sorted((cid, n) for n, cid in unanswered if previous < n < line)
        previous = line
    return out


def claude_code_branches(path: Path) -> list[int]:
    """Lines of the message records that leave the branch being written: their nearest message
    ancestor (through ``parentUuid``, across other records) is known and is not the previous message
    record, and they are neither another block of that ancestor's turn nor a tool result answering
    one of its calls."""
    links: dict[str, tuple[int, str, str | None] | None] = {}  # uuid -> (line, type, turn) of nearest message
    last: tuple[int, str, str | None] | None = None
    out = []
    for n, r in jsonl(path):
        if r.get("isSidechain"):
            continue
        if r.get("type") == "system" and r.get("subtype") == "compact_boundary":
            links, last = {}, None
            continue
        ancestor = links.get(r.get("parentUuid")) if isinstance(r.get("parentUuid"), str) else None
        if r.get("type") not in ("user", "assistant") or not isinstance(r.get("message"), dict):
            if isinstance(r.get("uuid"), str):
                links[r["uuid"]] = ancestor
            continue
        content = r["message"].get("content")
        answers = isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                    for b in content)
        turn = r["message"].get("id") if r["type"] == "assistant" else (last[2] if answers and last else None)
        if last is not None and ancestor is not None and ancestor != last and not (
                ancestor[2] is not None and ancestor[2] == turn):
            out.append(n)
        links[r.get("uuid")] = last = (n, r["type"], turn)
    return out


def claude_code_summary_after(path: Path, line: int) -> tuple[int, str]:
    """(line, text) of the first ``isCompactSummary`` record after `line`."""
    for n, r in jsonl(path):
        if n > line and r.get("isCompactSummary"):
            content = r["message"]["content"]
            text = content if isinstance(content, str) else "\n".join(
                part.get("text", "") for part in content if isinstance(part, dict))
            return n, text
    raise AssertionError(f"{path.name}: no compact summary after line {line}")


def claude_code_tool_ids(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """({tool_use id: line}, {tool_result tool_use_id: line}) of the main (non-sidechain) chain."""
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for n, r in jsonl(path):
        message = r.get("message")
        if r.get("isSidechain") or not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                calls.setdefault(block["id"], n)
            elif isinstance(block, dict) and block.get("type") == "tool_result":
                results.setdefault(block["tool_use_id"], n)
    return calls, results


# --- OpenHands facts ------------------------------------------------------------------------------
def openhands_tool_ids(path: Path) -> tuple[set[str], set[str]]:
    """(tool call ids of actions, tool call ids of observations). A ``finish`` action is left out: OpenHands
    sends it as a message, not as a call (its ``ConversationMemory`` drops the finish's tool call metadata)."""
    actions: set[str] = set()
    observations: set[str] = set()
    for event in document(path):
        call = (event.get("tool_call_metadata") or {}).get("tool_call_id")
        if call and event.get("action") != "finish":
            (observations if "observation" in event else actions).add(call)
    return actions, observations


# --- Gemini CLI facts -----------------------------------------------------------------------------
def gemini_tool_calls(path: Path) -> tuple[dict[str, int], set[str]]:
    """({call id: index of its message}, ids of the calls with a recorded result) of a JSON recording."""
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, message in enumerate(document(path)["messages"]):
        for call in message.get("toolCalls") or ():
            calls.setdefault(call["id"], i)
            if call.get("result") is not None:
                answered.add(call["id"])
    return calls, answered
