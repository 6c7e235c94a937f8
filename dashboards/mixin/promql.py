"""PromQL selectors built from label matchers, so every expression of the mixin is balanced by construction.

`Selector` is a set of matchers several expressions share (a dashboard's template variables, one job);
calling it with a metric name, and more matchers, writes `metric{label=~"$var", ..., extra="value"}`.
A value wrapped in `Regex` matches with `=~`, in `Not` with `!=`, in `NotRegex` with `!~`.
"""

from __future__ import annotations

from typing import NamedTuple


class Regex(str):
    """A matcher value that is a regular expression (`=~`)."""


class Not(str):
    """A matcher value the label must not equal (`!=`)."""


class NotRegex(str):
    """A matcher value that is a regular expression the label must not match (`!~`)."""


def _matcher(label: str, value: str) -> str:
    op = {Regex: "=~", Not: "!=", NotRegex: "!~"}.get(type(value), "=")
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'{label}{op}"{escaped}"'


class Selector(NamedTuple):
    """Label matchers, in order; `Selector(job=Regex("$job"))("up")` is `up{job=~"$job"}`."""

    matchers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, **matchers: str) -> Selector:
        return cls(tuple(matchers.items()))

    def and_(self, **matchers: str) -> Selector:
        """These matchers and more."""
        return Selector((*self.matchers, *matchers.items()))

    def __call__(self, metric: str = "", **matchers: str) -> str:
        """`metric` selected by these matchers and `matchers` (a bare `{...}` without a metric)."""
        pairs = [*self.matchers, *matchers.items()]
        return metric + ("{" + ", ".join(_matcher(k, v) for k, v in pairs) + "}" if pairs else "")


ANY = Selector()
