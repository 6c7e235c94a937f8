"""The instruction-absorbing compaction loop (record 003) driven through a real `ContextGuard`: the
scenario several test folders need to reach the contraction regime with the guard's own figures."""

from __future__ import annotations

from collections.abc import Callable

from ctxwatch import ContextGuard, Message, Report
from ctxwatch.simulate.rewriters import InstructionAbsorbingRewriter
from ctxwatch.simulate.text import TextGen


def run_absorbing_loop(guard: ContextGuard, seed: int, done: Callable[[Report], bool], cycles: int = 12
                       ) -> Report | None:
    """Compact the guard's context with an instruction-absorbing rewriter, appending a turn between
    cycles, until `done(report)` (that report) or `cycles` cycles (None)."""
    text = TextGen(seed)
    messages = [Message("system", "You are a helpful agent.")]
    messages += [text.message("user" if i % 2 == 0 else "assistant", 6, 0.6) for i in range(12)]
    guard.observe(messages, boundary=1)
    rewriter = InstructionAbsorbingRewriter(0.6)
    for _ in range(cycles):
        report = guard.check(rewriter(guard.messages), kind="compact")
        if done(report):
            return report
        guard.observe(guard.messages + [text.message("user", 3, 0.5)], boundary=1)
    return None
