"""The docs a newcomer reads name no development machine's paths and no words of the process that
wrote them ("issue 14", "the issue's target"): every path in them is one a checkout has."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FORBIDDEN = re.compile(r"/work/|/root/|/home/[a-z]|devvenv|/tmp/pytest|\bissues? #?\d+|\bissue's\b|\bthe issue\b",
                       re.IGNORECASE)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_no_machine_paths_or_process_words(doc: Path) -> None:
    found = [f"{doc.name}:{n}: {m.group(0)!r}" for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
             for m in FORBIDDEN.finditer(line)]
    assert found == []


def test_the_scan_finds_what_it_looks_for() -> None:
    assert len(DOCS) > 3
    for text in ("run /work/devvenv/bin/python", "see issue 14", "the issue's 3x target", "/home/alice/corpus"):
        assert FORBIDDEN.search(text), text
