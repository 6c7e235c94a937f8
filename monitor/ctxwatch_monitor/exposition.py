"""The Prometheus text (0.0.4) and OpenMetrics (1.0) exposition of the monitor's families.

The samples are what prometheus_client's own encoders write for the same families (the tests
parse both and compare), but each series' label text is formatted once and kept on its family
(`Family.label_text`), so a render is string joins over a snapshot of the values: at the default
series budget it stays within the 50 ms a scrape may take. Content negotiation is
prometheus_client's (`choose_encoder`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import exposition
from prometheus_client.utils import floatToGoString

if TYPE_CHECKING:
    from .metric_store import Family, Key

OPENMETRICS = "application/openmetrics-text"


_EXACT = 2**53  # integers up to this are written without prometheus_client's float formatting


def _number(value: float) -> str:
    """A sample value as prometheus_client writes it (OverflowError for an integer too large for a float)."""
    return f"{value}.0" if value.__class__ is int and -_EXACT < value < _EXACT else floatToGoString(value)


def _help(doc: str, openmetrics: bool) -> str:
    text = doc.replace("\\", r"\\").replace("\n", r"\n")
    return text.replace('"', r"\"") if openmetrics else text


def _scalar_text(family: Family, key: Key, value: Any) -> str:
    return f"{family.name}{family.label_text(key)} {_number(value)}\n"


def _histogram_text(family: Family, key: Key, series: Any) -> str:
    buckets, count, total_sum = family.prefixes(key)  # type: ignore[attr-defined]
    series = list(series)  # one consistent copy of this series
    lines, total = [], 0
    for prefix, n in zip(buckets, series, strict=False):
        total += n
        lines.append(prefix + _number(total))
    lines.append(f"{count}{_number(total)}\n{total_sum}{_number(series[-1])}\n")
    return "\n".join(lines)


def _family_text(family: Family, openmetrics: bool, careful: bool) -> tuple[str, int]:
    """The family's HELP, TYPE and samples; with `careful`, without the series that cannot be written
    (returned: the text and how many series were left out)."""
    name, kind = family.name, family.kind
    declared = name[:-len("_total")] if kind == "counter" and openmetrics and name.endswith("_total") else name
    parts = [f"# HELP {declared} {_help(family.doc, openmetrics)}\n# TYPE {declared} {kind}\n"]
    series_text = _histogram_text if kind == "histogram" else _scalar_text
    items = list(family.values.items()) if kind == "histogram" else family.items()
    left_out = 0
    for key, value in items:
        if not careful:
            parts.append(series_text(family, key, value))
            continue
        try:
            text = series_text(family, key, value)
            text.encode()
        except (UnicodeEncodeError, OverflowError, ValueError, TypeError):
            left_out += 1
            continue
        parts.append(text)
    return "".join(parts), left_out


def _body(families: list[Family], openmetrics: bool, careful: bool) -> tuple[bytes, int]:
    texts = [_family_text(family, openmetrics, careful) for family in families]
    body = "".join(text for text, _ in texts) + ("# EOF\n" if openmetrics else "")
    return body.encode(), sum(left_out for _, left_out in texts)


def render(families: Iterable[Family], accept: str | None,
           left_out: Callable[[int], None] = lambda count: None) -> tuple[bytes, str]:
    """The exposition body of `families` and its content type, negotiated from `Accept`.

    Ingest validation keeps unwritable values out; should one get in anyway (a label value that is not
    UTF-8, an integer too large for a float), the render is done again without the series holding it,
    and `left_out(count)` is told how many: /metrics never fails because of one value. The normal path
    pays nothing for this (the careful render runs only after the fast one failed)."""
    _, content_type = exposition.choose_encoder(accept or "")
    openmetrics, snapshot = content_type.startswith(OPENMETRICS), list(families)
    try:
        body, _ = _body(snapshot, openmetrics, careful=False)
    except (UnicodeEncodeError, OverflowError, ValueError, TypeError):
        body, count = _body(snapshot, openmetrics, careful=True)
        left_out(count)
    return body, content_type
