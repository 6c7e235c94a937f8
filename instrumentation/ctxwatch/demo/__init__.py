"""`ctxwatch demo`: a simulated fleet of agent loops, guarded and observed end to end."""

from .run import DemoOptions, run_demo

__all__ = ["DemoOptions", "run_demo"]
