"""Record 000, schema versioning: the tools the model may call now versus the tools old calls used.

The registry keeps two views. The *active* set is what the model is offered; the *historical*
set keeps every version ever offered, so a tool removed from the active set still resolves for
the calls made with it. Each call is stamped with the schema version active when it was first
seen. A schema change that removes or changes a tool while one of its calls is still awaiting
its result would hand the model a result for a tool it no longer has: that is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..model import ToolSchema
from ..report import Finding
from .pairing import PairIndex


class SchemaRegistry:
    """Active and historical tool schemas, and the version each seen call was made against."""

    def __init__(self, tools: Iterable[ToolSchema] = ()) -> None:
        self._active: dict[str, ToolSchema] = {}
        self._history: dict[tuple[str, str], ToolSchema] = {}
        self._call_versions: dict[str, tuple[str, str | None]] = {}
        self.declared = False
        self.activate(tools)

    @property
    def active(self) -> Mapping[str, ToolSchema]:
        return dict(self._active)

    def activate(self, tools: Iterable[ToolSchema]) -> None:
        """Make `tools` the active set; every earlier version stays resolvable."""
        tools = list(tools)
        if not tools and not self.declared:
            return
        self.declared = True
        self._active = {t.name: t for t in tools}
        for t in tools:
            self._history[(t.name, t.version)] = t

    def changes(self, tools: Iterable[ToolSchema]) -> bool:
        """Whether making `tools` active would change the active set (names or versions)."""
        proposed = {t.name: t.version for t in tools}  # as `activate` would hold them: the last one per name
        return proposed != {name: t.version for name, t in self._active.items()}

    def resolves(self, name: str, version: str | None) -> bool:
        if version is None:
            return name in self._active or any(n == name for n, _ in self._history)
        return (name, version) in self._history

    def version_of_call(self, call_id: str) -> tuple[str, str | None] | None:
        """(tool name, schema version) the call was stamped with, if it has been seen."""
        return self._call_versions.get(call_id)

    def stamp(self, index: PairIndex) -> None:
        """Record the active version for each call not seen before (called when a context is accepted)."""
        for cid, name in index.call_names.items():
            if cid not in self._call_versions:
                active = self._active.get(name)
                self._call_versions[cid] = (name, active.version if active else None)

    def forget_calls(self, keep: Iterable[str]) -> None:
        """Drop stamps of calls no longer in the context (bounded memory over long loops)."""
        keep = set(keep)
        for cid in [c for c in self._call_versions if c not in keep]:
            del self._call_versions[cid]


def check_schemas(registry: SchemaRegistry, proposed_tools: list[ToolSchema] | None,
                  after: PairIndex) -> list[Finding]:
    """Findings for calls whose schema would no longer resolve under the proposal."""
    if not registry.declared and proposed_tools is None:
        return []
    active = registry.active if proposed_tools is None else {t.name: t for t in proposed_tools}
    findings: list[Finding] = []
    dropped_pending = []
    unresolved = []
    unknown_new = []
    for cid, name in after.call_names.items():
        stamped = registry.version_of_call(cid)
        if cid in after.pending:
            version = stamped[1] if stamped else (active[name].version if name in active else None)
            now = active.get(name)
            if now is None or (version is not None and now.version != version):
                dropped_pending.append((cid, name, version))
        elif stamped is not None:
            if stamped[1] is not None and not registry.resolves(name, stamped[1]):
                unresolved.append((cid, name, stamped[1]))
        elif name not in active and not registry.resolves(name, None):
            unknown_new.append((cid, name))
    if dropped_pending:
        findings.append(Finding(
            "schema_version",
            "the schema change removes or changes tools whose calls are still awaiting results: "
            + ", ".join(f"{cid} ({name}@{v})" for cid, name, v in dropped_pending)
            + ". Keep those schemas active until their results are in, then retire them "
            "(they stay resolvable as historical versions).",
            details={"pending_calls": [c for c, _, _ in dropped_pending],
                     "tools": sorted({n for _, n, _ in dropped_pending})},
        ))
    if unresolved:
        findings.append(Finding(
            "schema_version",
            "calls in the context reference schema versions the registry cannot resolve: "
            + ", ".join(f"{cid} ({name}@{v})" for cid, name, v in unresolved),
            details={"calls": [c for c, _, _ in unresolved]},
        ))
    if unknown_new:
        findings.append(Finding(
            "schema_version",
            "calls to tools never offered to the model: "
            + ", ".join(f"{cid} ({name})" for cid, name in unknown_new),
            action="warn",
            details={"calls": [c for c, _ in unknown_new]},
        ))
    return findings
