"""The one mutation-kind classifier (`ctxwatch.kinds`): each rule of the table in docs/telemetry.md,
and the three callers using it — the guard for an undeclared change, the integrations through the
guard, the session readers for a change between two recorded buffers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ctxwatch import ContextGuard, Message, ToolResult
from ctxwatch.kinds import classify, classify_with_positions
from ctxwatch.report import MUTATION_KINDS
from ctxwatch.sessions import classify_change

ROOT = Path(__file__).resolve().parents[2]

S = Message("system", "You are a careful assistant.")
S2 = Message("system", "You are a careful assistant. Answer in French.")
U1, U2 = Message("user", "list the files in /srv"), Message("user", "now read config.yaml")
A1 = Message("assistant", "the folder holds config.yaml and run.sh")
T1 = Message("tool", [ToolResult("c1", "config.yaml\nrun.sh\n" * 20)], id="t1")
T1_ELIDED = Message("tool", [ToolResult("c1", "(400 chars omitted)")], id="t1")
SUMMARY = Message("user", "Summary: the folder holds two files.")
LONGER = Message("assistant", "the folder /srv holds config.yaml (the service's settings) and run.sh")

CASES = [  # (before, after, kind, positions of before removed or replaced), in the order of the table
    ([S, U1, A1], [S, U1, A1, U2], "append", ()),
    ([S, U1, A1], [S, A1, U1], "rerank", ()),
    ([S, U1, A1], [S2, U1, A1], "system_patch", (0,)),
    ([S, U1, T1, A1, U2], [S, U1, A1, U2], "prune", (2,)),
    ([S, U1, T1, A1], [S, U1, T1_ELIDED, A1], "prune", (2,)),
    ([S, U1, T1, A1], [S, U1, Message("tool", [ToolResult("c1", "(400 chars omitted)")]), A1], "prune", (2,)),
    ([S, U1, T1, A1, U2], [S, SUMMARY, U2], "compact", (1, 2, 3)),
    ([S, U1, T1, A1], [S, SUMMARY], "compact", (1, 2, 3)),  # nothing kept but the system prompt
    ([S, U1, A1], [S, U1, LONGER], "rewrite", (2,)),
]


@pytest.mark.parametrize(("before", "after", "kind", "changed"), CASES)
def test_each_rule_of_the_table(before, after, kind, changed):
    classified = classify_with_positions(before, after)
    assert (classified.kind, classified.changed) == (kind, changed)
    assert classify(before, after) == kind


def test_the_session_readers_name_changes_with_it():
    for before, after, kind, changed in CASES:
        assert classify_change(before, after) == (None if kind == "append" else (kind, changed))


def test_the_docs_table_names_every_kind_the_classifier_returns():
    text = (ROOT / "docs" / "telemetry.md").read_text(encoding="utf-8")
    section = text.split("### Which change is which kind", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if re.match(r"\| (\d|—) \|", line)]
    named = {row[3].strip().strip("`") for row in rows}
    assert {kind for _, _, kind, _ in CASES} <= named <= set(MUTATION_KINDS)


def _guard_after(before: list[Message]) -> ContextGuard:
    guard = ContextGuard("loop-kinds", enforce={"order": "warn"})
    guard.observe(before, boundary=0)
    return guard


def test_the_guard_names_an_undeclared_change_with_the_classifier():
    for before, after, kind, _ in CASES[2:]:
        assert _guard_after(before).check(after).kind == kind
        assert _guard_after(before).check(after, kind="rewrite").kind == "rewrite"  # a declared kind stands


def test_an_undeclared_reorder_is_named_rerank_but_still_order_checked():
    guard = ContextGuard("loop-kinds")
    guard.observe([S, U1, A1], boundary=0)
    undeclared = guard.check([S, A1, U1])
    assert (undeclared.kind, undeclared.decision) == ("rerank", "abort")
    assert undeclared.violations == ["order"]
    assert "undeclared rerank" in next(f.message for f in undeclared.findings if f.invariant == "order")
    declared = guard.check([S, A1, U1], kind="rerank")
    assert (declared.kind, declared.decision) == ("rerank", "patch")
