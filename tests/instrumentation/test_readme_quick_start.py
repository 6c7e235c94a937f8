"""The README's quick start runs as printed: with an OpenAI-format conversation standing in for
`messages`, a careless compaction for `compacted` and the tool definitions for `tools`, the
refusal is printed by the except branch; a sound compaction goes through."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from conversations import in_format, record_000_session, user

README = Path(__file__).resolve().parents[2] / "README.md"
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in ("lookup_customer", "query_db", "list_refunds")]


def quick_start() -> str:
    section = README.read_text(encoding="utf-8").split("\n## Quick start\n", 1)[1]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)[0]


def run(compacted: list) -> tuple[dict, str]:
    messages = in_format(record_000_session(), "openai_chat")
    namespace = {"tools": TOOLS, "messages": messages, "compacted": compacted}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(quick_start(), namespace)
    return namespace, out.getvalue()


def test_the_quick_start_prints_the_refusal_of_a_careless_compaction() -> None:
    messages = in_format(record_000_session(), "openai_chat")
    namespace, printed = run(messages[:1] + messages[5:])          # drops call_7f3a's call, keeps its result
    assert "tool_pairing" in printed and "call_7f3a" in printed
    assert namespace["messages"] == messages                          # the old context stays


def test_the_quick_start_applies_a_sound_compaction() -> None:
    messages = in_format(record_000_session(), "openai_chat")
    summary = in_format([user("Summary: customer 4411 is Ada Park (gold).")], "openai_chat")
    namespace, printed = run(messages[:1] + summary + messages[4:])
    assert printed == ""
    assert namespace["messages"][-1]["content"].startswith("[ctxwatch] earlier turns were elided")
