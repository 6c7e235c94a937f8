"""How `ctxwatch demo` stops: SIGINT (Ctrl-C), SIGTERM (`kill`, `docker stop`) and SIGHUP (its
terminal closed) become one exception.

Python's default SIGTERM and SIGHUP end the process at once, skipping every `finally`, which left the
demo's monitor running on its port and its temp folder behind. Inside `StopSignals` these signals raise
`Interrupted` in the main thread instead, so the demo unwinds: it prints what it has (a partial
summary), then stops its children and removes its files. While it cleans up (`ignored()`) further
signals are ignored, so a second Ctrl-C cannot leave a half-stopped child; the clean-up itself is
bounded (the monitor gets a few seconds to exit, then it is killed).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """The demo was asked to stop by a signal; `exit_code` is the shell's 128 + signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


class StopSignals:
    """While entered, the stop signals raise `Interrupted`; the previous handlers come back on exit."""

    def __enter__(self) -> StopSignals:
        self._previous = {sig: signal.signal(sig, _raise) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @contextmanager
    def ignored(self) -> Iterator[None]:
        """Ignore the stop signals for the duration (the bounded clean-up), then raise on them again."""
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        try:
            yield
        finally:
            for sig in STOP_SIGNALS:
                signal.signal(sig, _raise)
