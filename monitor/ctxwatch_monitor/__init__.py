"""ctxwatch_monitor: the service that turns ctxwatch mutation spans into alarms, metrics and a live page.

Run it with `ctxwatch monitor` or `python -m ctxwatch_monitor`; embed it with
`ctxwatch_monitor.app.create_app(config)`. See docs/monitor.md.
"""

from ctxwatch.version import VERSION as __version__

__all__ = ["__version__"]
