"""Issue 7 "Must show": the `--html` report opened in real headless Chromium and screenshotted —
sessions listed, a d-against-r chart drawn per session (an SVG with the cycle path and one point
per cycle), self-contained (no script, no external asset) and escaping what the sessions hold."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from corpus_files import readable_files
from replay_fixtures import ctxwatch, replay_json, write_snapshots

from ctxwatch.model import Message
from ctxwatch.simulate.loops import absorption_loop

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
HOSTILE = "<img src=x onerror=alert(1)>"


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install -y chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120)


class Dom(HTMLParser):
    """What the test needs from the rendered DOM: sections, their charts, links, tags seen."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.sections: list[dict] = []
        self.links: list[str] = []
        self.attrs_seen: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        self.attrs_seen.update(a)
        if tag == "section" and "session" in (a.get("class") or ""):
            self.sections.append({"id": a["id"], "status": a.get("data-status"), "charts": [], "h2": ""})
        elif tag == "svg" and self.sections:
            self.sections[-1]["charts"].append({"cycles": int(a["data-cycles"]), "paths": [], "points": 0,
                                                "onset": [], "flag": []})
        elif tag == "polyline" and self.sections:
            self.sections[-1]["charts"][-1]["paths"].append(len((a.get("points") or "").split()))
        elif tag == "circle" and self.sections and "cycle" in (a.get("class") or ""):
            self.sections[-1]["charts"][-1]["points"] += 1
        elif tag in ("circle", "rect") and self.sections and (a.get("class") or "").endswith("-mark"):
            self.sections[-1]["charts"][-1][a["class"].removesuffix("-mark")].append(int(a["data-cycle"]))
        elif tag == "p" and self.sections and a.get("class") == "legend":
            self.sections[-1]["legends"] = self.sections[-1].get("legends", 0) + 1
        elif tag == "a":
            self.links.append(a.get("href") or "")


def test_html_report_in_headless_chromium(corpus: Path, tmp_path: Path) -> None:
    contracting = write_snapshots(tmp_path / "absorbing.jsonl",
                                  [b for c in absorption_loop(2).cycles for b in (c.pre, c.post)])
    hostile = write_snapshots(tmp_path / "hostile.jsonl", [
        [Message("user", f"Render `{HOSTILE}` and keep ticket OPS-20931.")], [Message("user", "Done.")]])
    files = [*readable_files(corpus), contracting, hostile]
    report = tmp_path / "report.html"
    proc = ctxwatch("replay", *files, "--html", report)
    assert proc.returncode == 1, proc.stderr  # the absorbing loop contracts
    _, doc, _ = replay_json(*files)
    html = report.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", html)  # nothing fetched, nothing run

    dumped = chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = Dom()
    dom.feed(dumped.stdout)
    assert "img" not in dom.tags and "script" not in dom.tags
    assert not {"src", "onerror"} & dom.attrs_seen
    assert HOSTILE in dumped.stdout.replace("&lt;", "<").replace("&gt;", ">")  # shown as text
    # sessions listed: an index row linking to each session's section, in order
    assert [link for link in dom.links if link.startswith("#")] == [f"#session-{i}" for i in range(1, len(files) + 1)]
    assert len(dom.sections) == len(files)
    for section, session in zip(dom.sections, doc["sessions"], strict=True):
        (chart,) = section["charts"]
        cycles = sum(m["cycle"] is not None for m in session["mutations"])  # a mutation that is no cycle: no point
        assert chart["cycles"] == cycles and chart["points"] == cycles
        assert chart["paths"] == ([cycles] if cycles else [])
    statuses = [s["status"] for s in dom.sections]
    assert statuses.count("findings") == 1 and statuses.count("clean") == len(files) - 1
    # every chart has its legend (the shaded d < r region explained); the contracting session's chart
    # rings its onset cycle and boxes the cycle the alarm flags, the others mark nothing
    assert all(s.get("legends") == 1 for s in dom.sections)
    assert "shaded: d &lt; r" in html and "not an alarm by itself" in html
    (flagged,) = [s["charts"][0] for s in dom.sections if s["status"] == "findings"]
    (onset,), (flag,) = flagged["onset"], flagged["flag"]
    assert 1 <= onset <= flag <= flagged["cycles"]
    assert all(not s["charts"][0]["flag"] and not s["charts"][0]["onset"]
               for s in dom.sections if s["status"] == "clean")

    shot = tmp_path / "report.png"
    taken = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    assert taken.returncode == 0, taken.stderr[-2000:]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1280, 2000)
    assert len(png) > 50_000  # a drawn page, not a blank one
