"""The ctxwatch version, from one source: the `version` of pyproject.toml, read from the installed
package's metadata. Both packages (`ctxwatch`, `ctxwatch_monitor`) and the telemetry's
instrumentation scope report this value; a source tree that was never installed reports `0+unknown`.
"""

from __future__ import annotations

from importlib import metadata

UNKNOWN = "0+unknown"  # a valid PEP 440 version that sorts before every release


def _installed_version() -> str:
    try:
        return metadata.version("ctxwatch")
    except metadata.PackageNotFoundError:  # a source tree on sys.path without an install
        return UNKNOWN


VERSION = _installed_version()
