"""`python -m ctxwatch_monitor`: the same as `ctxwatch monitor`."""

from .server import main

raise SystemExit(main())
