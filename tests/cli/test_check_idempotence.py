"""Issue 7 §3: `ctxwatch check-idempotence MODULE:FUNC --sample FILE`, record 003's re-application
test ("apply the rewrite twice offline on a sample buffer"), on a user's module written here: an
idempotent rewrite exits 0, a non-idempotent one exits 1 with its drift figures, bad usage exits 2."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from replay_fixtures import ctxwatch

from ctxwatch.model import Message, TextPart, ToolCall, ToolResult

USER_MODULE = textwrap.dedent('''
    """A user's rewrite functions, in OpenAI Chat shape."""

    def keep_last_four(messages):
        """Idempotent: a fixed window (system prompt + last three) is its own fixed point."""
        return messages[:1] + messages[1:][-3:]

    def halve_and_note(messages):
        """Not idempotent: each pass drops half of the history and writes a note about it."""
        head, rest = messages[:1], messages[1:]
        kept = rest[len(rest) // 2:]
        return head + [{"role": "user", "content": f"(note: {len(rest) - len(kept)} older turns dropped)"}] + kept

    def shout(messages):
        return [{**m, "content": m["content"].upper()} for m in messages]

    def shout_request(request):
        """An Anthropic request dict in, the same shape out."""
        return {"system": request["system"].upper(), "messages": shout(request["messages"])}

    def broken(messages):
        raise KeyError("content")

    def not_messages(messages):
        return 42

    NOT_CALLABLE = [1, 2]
''')


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    (tmp_path / "user_rewrites.py").write_text(USER_MODULE, encoding="utf-8")
    (tmp_path / "broken_import.py").write_text("import json\nraise RuntimeError('no config file')\n")
    (tmp_path / "bad_syntax.py").write_text("def f(:\n    pass\n")
    return tmp_path


def chat_sample() -> list[dict]:
    turns = [{"role": "system", "content": "You are a deploy assistant."}]
    for i in range(1, 9):
        turns.append({"role": "user", "content": f"Step {i}: check build 7f3a{i:04d}c and ticket OPS-{4410 + i}."})
        turns.append({"role": "assistant", "content": f"Build 7f3a{i:04d}c is green; OPS-{4410 + i} noted."})
    return turns


def run_check(user_dir: Path, func: str, sample: Path, *extra: str):
    return ctxwatch("check-idempotence", f"user_rewrites:{func}", "--sample", sample, *extra, cwd=user_dir)


def test_idempotent_rewrite_exits_0(user_dir: Path) -> None:
    sample = user_dir / "sample.json"
    sample.write_text(json.dumps(chat_sample()))
    proc = run_check(user_dir, "keep_last_four", sample)
    assert proc.returncode == 0, proc.stderr
    assert "rewrite is stable" in proc.stdout and "idempotent" in proc.stdout
    assert "rewrite^1 -> rewrite^2: distance 0.000" in proc.stdout
    assert "1 of 1 sample(s) stable under re-application (exit 0)" in proc.stdout


def test_non_idempotent_rewrite_exits_1_with_drift_figures(user_dir: Path) -> None:
    sample = user_dir / "sample.json"
    sample.write_text(json.dumps(chat_sample()))
    proc = run_check(user_dir, "halve_and_note", sample, "--json")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "ctxwatch.check_idempotence" and doc["version"] == 1 and doc["exit_code"] == 1
    (result,) = doc["samples"]
    assert result["stable"] is False and result["format"] == "openai_chat" and len(result["rounds"]) == 3
    first = result["rounds"][0]
    assert first["distance"] > 0.05 and first["literals_lost"]  # the second pass drops more builds and tickets
    assert first["messages"]["after"] < first["messages"]["before"]
    assert all(lit.startswith(("7f3a", "OPS-")) for lit in first["literals_lost"])
    text = run_check(user_dir, "halve_and_note", sample)
    assert text.returncode == 1 and "NOT idempotent" in text.stdout and "literal drift" in text.stdout


def test_jsonl_samples_in_other_formats(user_dir: Path) -> None:
    anthropic_lines = user_dir / "samples.jsonl"
    buffers = [chat_sample()[1:5], chat_sample()[1:9]]
    anthropic_lines.write_text("".join(json.dumps({"system": "Be brief.", "messages": b}) + "\n" for b in buffers))
    proc = run_check(user_dir, "shout_request", anthropic_lines, "--json")
    assert proc.returncode == 0, proc.stderr  # upper-casing twice is upper-casing once
    doc = json.loads(proc.stdout)
    assert [s["sample"] for s in doc["samples"]] == [f"{anthropic_lines}, line 1", f"{anthropic_lines}, line 2"]
    assert {s["format"] for s in doc["samples"]} == {"anthropic"}
    one_message_per_line = user_dir / "messages.jsonl"
    one_message_per_line.write_text("".join(json.dumps(m) + "\n" for m in chat_sample()))
    proc = run_check(user_dir, "keep_last_four", one_message_per_line)
    assert proc.returncode == 0 and "1 of 1 sample(s)" in proc.stdout


def test_file_path_module_and_ctxwatch_messages(user_dir: Path, tmp_path: Path) -> None:
    from ctxwatch.adapters import from_messages
    sample = tmp_path / "tools.json"
    messages = [Message("user", "Read /etc/app.conf"), Message("assistant", [ToolCall("call_1", "read", "{}")]),
                Message("tool", [ToolResult("call_1", "port=8443")]), Message("assistant", [TextPart("Port 8443.")])]
    sample.write_text(json.dumps(from_messages(messages, "openai_responses")))
    proc = ctxwatch("check-idempotence", f"{user_dir / 'user_rewrites.py'}:keep_last_four", "--sample", sample)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("func", "sample_text", "message"), [
    ("user_rewrites", None, "expected MODULE:FUNC"),
    ("no_such_module:f", None, "cannot import no_such_module: No module named 'no_such_module'"),
    ("user_rewrites:nope", None, "user_rewrites has no attribute 'nope'"),
    ("user_rewrites:NOT_CALLABLE", None, "user_rewrites:NOT_CALLABLE is a list, not a function"),
    ("broken_import:f", None, "importing broken_import raised RuntimeError: no config file"),
    ("bad_syntax:f", None, "cannot import bad_syntax: syntax error in"),
    ("missing.py:f", None, "cannot import missing.py: no such file"),
    ("user_rewrites:broken", None, "raised on"),
    ("user_rewrites:not_messages", None, "expected a list of messages"),
    ("user_rewrites:keep_last_four", '[{"role": "user", "content": "a"}]\n{"role": ', "line 2"),
    ("user_rewrites:keep_last_four", '[{"role": "wizard", "content": "a"}]', "message 0"),
    ("user_rewrites:keep_last_four", "", "is empty"),
])
def test_bad_usage_exits_2_with_one_line(user_dir: Path, func: str, sample_text: str | None, message: str) -> None:
    sample = user_dir / "s.json"
    sample.write_text(json.dumps(chat_sample()) if sample_text is None else sample_text)
    proc = ctxwatch("check-idempotence", func, "--sample", sample, cwd=user_dir)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("ctxwatch check-idempotence: ") and message in proc.stderr, proc.stderr


def test_missing_sample_and_bad_options(user_dir: Path) -> None:
    proc = run_check(user_dir, "shout", user_dir / "none.json")
    assert proc.returncode == 2 and f"{user_dir / 'none.json'}: no such file" in proc.stderr
    proc = run_check(user_dir, "shout", user_dir / "none.json", "--tolerance", "2")
    assert proc.returncode == 2 and "must be between 0 and 1" in proc.stderr
