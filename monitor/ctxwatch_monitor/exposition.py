"""The Prometheus text (0.0.4) and OpenMetrics (1.0) exposition of the monitor's families.

The samples are what prometheus_client's own encoders write for the same families (the tests
parse both and compare), but each series' label text is formatted once and kept on its family
(`Family.label_text`), so a render is string joins over a snapshot of the values: at the default
series budget it stays within the 50 ms a scrape may take. Content negotiation is
prometheus_client's (`choose_encoder`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import exposition
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from .metrics import Family, Histogram

OPENMETRICS = "application/openmetrics-text"


def _number(value: float) -> str:
    """A sample value as prometheus_client writes it (integers, the common case, without its call)."""
    return f"{value}.0" if value.__class__ is int else floatToGoString(value)


def _help(doc: str, openmetrics: bool) -> str:
    text = doc.replace("\\", r"\\").replace("\n", r"\n")
    return text.replace('"', r"\"") if openmetrics else text


def _family_lines(family: Family, openmetrics: bool, out: list[str]) -> None:
    name, kind = family.name, family.kind
    declared = name[:-len("_total")] if kind == "counter" and openmetrics and name.endswith("_total") else name
    out.append(f"# HELP {declared} {_help(family.doc, openmetrics)}\n# TYPE {declared} {kind}\n")
    if kind == "histogram":
        _histogram_lines(family, out)  # type: ignore[arg-type]
        return
    label_text = family.label_text
    for key, value in family.items():
        out.append(f"{name}{label_text(key)} {_number(value)}\n")


def _histogram_lines(family: Histogram, out: list[str]) -> None:
    name, les = family.name, family.bucket_labels
    for key, series in list(family.values.items()):
        series = list(series)  # one consistent copy of this series
        labels = family.label_text(key)
        inner = labels[1:-1] + "," if labels else ""
        total = 0
        for le, count in zip(les, series, strict=False):
            total += count
            out.append(f'{name}_bucket{{{inner}le="{le}"}} {_number(total)}\n')
        out.append(f"{name}_count{labels} {_number(total)}\n{name}_sum{labels} {_number(series[-1])}\n")


def render(families: Iterable[Family], accept: str | None) -> tuple[bytes, str]:
    """The exposition body of `families` and its content type, negotiated from `Accept`."""
    _, content_type = exposition.choose_encoder(accept or "")
    openmetrics = content_type.startswith(OPENMETRICS)
    out: list[str] = []
    for family in list(families):
        _family_lines(family, openmetrics, out)
    if openmetrics:
        out.append("# EOF\n")
    return "".join(out).encode(), content_type
