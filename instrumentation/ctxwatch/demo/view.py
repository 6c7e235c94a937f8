"""The demo's terminal view: a live fleet table (rich) while it runs, a summary when it ends.

On a terminal the table refreshes in place; elsewhere (a pipe, CI) one progress line is printed
every few seconds, so logs stay readable.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

_DECISIONS = ("patch", "defer", "abort", "halt")


class FleetView:
    def __init__(self) -> None:
        self.console = Console()
        if not self.console.is_terminal:
            self.console = Console(width=150)  # logs and pipes: wide enough for the summary
        self._live: Live | None = None
        self._last_line = 0.0
        self._endpoint = ""
        self._duration = 0.0

    def start(self, endpoint: str, duration: float) -> None:
        self._endpoint, self._duration = endpoint, duration
        self.console.print(f"[bold]ctxwatch demo[/bold]: spans go to {endpoint}/v1/traces")
        self.console.print(f"live page: {endpoint}/   metrics: {endpoint}/metrics   API: {endpoint}/api/loops")
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=2, transient=False)
            self._live.start()

    def update(self, fleet: Any, elapsed: float, alarms: list[dict[str, Any]] | None) -> None:
        flagged = {a["loop_id"] for a in alarms if a.get("flagged_cycle") is not None} if alarms else set()
        if self._live is not None:
            self._live.update(self._table(fleet, elapsed, flagged))
        elif time.monotonic() - self._last_line > 5:
            self._last_line = time.monotonic()
            totals = sum((t.decisions for t in fleet.agents.values()), Counter())
            self.console.print(f"[{elapsed:5.0f}s/{self._duration:.0f}s] "
                               + " ".join(f"{d}={totals.get(d, 0)}" for d in _DECISIONS)
                               + f" contracting loops flagged by the monitor: {len(flagged)}")

    def _table(self, fleet: Any, elapsed: float, flagged: set[str]) -> Table:
        table = Table(title=f"fleet — {elapsed:.0f}s of {self._duration:.0f}s — {self._endpoint}/")
        for col in ("agent", "what it does", "loops", "cycles", *_DECISIONS, "refused for", "flagged"):
            table.add_column(col)
        for agent, tally in fleet.agents.items():
            d = tally.decisions
            refused = ", ".join(f"{k}×{v}" for k, v in tally.violations.most_common(3)) or "—"
            hits = sum(1 for lp in tally.loops if lp.loop_id in flagged)
            table.add_row(agent, tally.description, str(len(tally.loops)), str(tally.cycles),
                          *(str(d.get(x, 0)) for x in _DECISIONS), refused, str(hits))
        return table

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def note(self, text: str) -> None:
        self.console.print(text)

    def summary(self, result: dict[str, Any], endpoint: str, *, monitor_answered: bool) -> None:
        table = Table(title="what fired")
        for col in ("agent", "decisions", "refused or halted for", "halted by the guard", "flagged by the monitor",
                    "as designed"):
            table.add_column(col)
        for agent, v in result.items():
            decisions = " ".join(f"{k}={v['decisions'].get(k, 0)}" for k in _DECISIONS)
            refused = ", ".join(f"{k}×{n}" for k, n in sorted(v["violations"].items(), key=lambda kv: -kv[1])[:3])
            table.add_row(agent, decisions, refused or "—", _cycles(v["halted_cycles"]),
                          _cycles(v["flagged_cycles"]) if monitor_answered else "n/a",
                          "yes" if v["as_designed"] else "NO")
        self.console.print(table)
        if not monitor_answered:
            self.console.print(f"{endpoint} is not a ctxwatch monitor: the monitor's verdicts were not read back.")


def _cycles(by_loop: dict[str, int | None]) -> str:
    """'3 loops, at cycles 5-7' for a {loop id: cycle} map."""
    if not by_loop:
        return "—"
    cycles = sorted(c for c in by_loop.values() if c is not None)
    span = (f", at cycle {cycles[0]}" if cycles[0] == cycles[-1] else f", at cycles {cycles[0]}-{cycles[-1]}") \
        if cycles else ""
    return f"{len(by_loop)} loop{'s' if len(by_loop) != 1 else ''}{span}"
