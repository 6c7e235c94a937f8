"""`GuardConfig`: every setting of a `ContextGuard` as one validated, frozen value.

The guard's constructor keywords are the convenient form of the same settings; either way they
are checked once, here, and a bad value is a one-line `ValueError` naming the setting and what it
accepts. The defaults and the reason for each are listed in the README ("Defaults").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .contraction import DetectorConfig
from .decision import enforcement_table
from .directives import DEFAULT_MARKERS
from .report import COMPACTION_KINDS

# What `resolve`/`apply` do with a rewrite that alters the consumed prefix (record 000 defers it):
#   auto              whole pairs for the kinds that shrink history (compact, prune), the queue otherwise
#   whole_pairs       turn it at once into whole-pair compaction, its new text in an elision marker
#                     (both: a pruning that only clears consumed tool results in place is applied as it is)
#   queue             keep the current context; apply the rewrite at the next session boundary
#   session_boundary  apply it whole as the start of a new session (a new episode); every check but
#                     prefix identity still applies
DEFERRAL_MODES: tuple[str, ...] = ("auto", "whole_pairs", "queue", "session_boundary")

# Rewrite passes in a row with no new turn in between (record 001's runaway: compaction after
# compaction with no new work). A healthy agent adds a turn between its compactions and never
# reaches it, however long it runs; a loop that rewrites its own output eight times over has
# stopped making progress.
DEFAULT_PASS_CAP = 8
ELISION_ROLES = ("user", "system", "developer")


# What a caller that hands its context to the guard does with a refused (abort, halt) rewrite: raise the
# record's typed error, or keep the guard's context and only report the refusal. `guarded` and every
# integration take this one option with these values.
ON_REFUSAL = ("raise", "keep")


def check_deferral(value: str) -> str:
    if value not in DEFERRAL_MODES:
        raise ValueError(f"deferral must be one of {', '.join(DEFERRAL_MODES)}; got {value!r}")
    return value


def check_on_refusal(value: object) -> str:
    """`value` if it is one of `ON_REFUSAL`, else a ValueError naming the choices."""
    if not isinstance(value, str) or value not in ON_REFUSAL:
        raise ValueError(f"on_refusal must be one of {', '.join(ON_REFUSAL)}; got {value!r}")
    return value


@dataclass(frozen=True)
class GuardConfig:
    """The settings of one guard (see the module docstring and the README's table of defaults).

    pass_cap: rewrite passes in a row without a new turn before the guard refuses with
      `PassCapReachedError` (None: no cap). budget: the context budget in characters, to report
      residual pressure at the cap. enforce: overrides of the enforcement table (one action per
      invariant). detector: the contraction alarm's configuration. directive_markers: phrases that
      identify a rewrite directive inside the buffer. deferral: one of `DEFERRAL_MODES`. shadow:
      report-only mode (never change or refuse anything; report and emit what would have been
      done). elision_role: the role of the guard's elision markers and pinned-reference notes.
    """

    pass_cap: int | None = DEFAULT_PASS_CAP
    budget: int | None = None
    enforce: Mapping[str, str] = field(default_factory=dict)
    detector: DetectorConfig = field(default_factory=DetectorConfig)
    directive_markers: Sequence[str] = DEFAULT_MARKERS
    deferral: str = "auto"
    shadow: bool = False
    elision_role: str = "user"

    def __post_init__(self) -> None:
        if self.pass_cap is not None and (isinstance(self.pass_cap, bool) or not isinstance(self.pass_cap, int)
                                          or self.pass_cap < 1):
            raise ValueError(f"pass_cap must be a positive number of passes or None, got {self.pass_cap!r}")
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(self.budget, int)
                                        or self.budget < 1):
            raise ValueError(f"budget must be a positive number of characters or None, got {self.budget!r}")
        check_deferral(self.deferral)
        if not isinstance(self.shadow, bool):
            raise ValueError(f"shadow must be True or False, got {self.shadow!r}")
        if self.elision_role not in ELISION_ROLES:
            raise ValueError(f"elision_role must be one of {', '.join(ELISION_ROLES)}; got {self.elision_role!r}")
        if not isinstance(self.detector, DetectorConfig):
            raise ValueError(f"detector must be a DetectorConfig, got {type(self.detector).__name__}")
        if not isinstance(self.enforce, Mapping):
            raise ValueError(f"enforce must be a mapping of invariant to action, got {type(self.enforce).__name__}")
        object.__setattr__(self, "enforce", MappingProxyType(enforcement_table(self.enforce)))
        object.__setattr__(self, "directive_markers", tuple(self.directive_markers))

    @property
    def tracks_literals(self) -> bool:
        """Whether per-literal counts are kept (upkeep for the checks that read them)."""
        return any(self.enforce[i] != "off" for i in ("literal_loss", "contraction"))

    @property
    def tracks_fingerprint(self) -> bool:
        return self.enforce["contraction"] != "off"

    def converts(self, deferral: str, kind: str) -> bool:
        """Whether a deferred rewrite of `kind` is turned into whole-pair compaction under `deferral`."""
        return deferral == "whole_pairs" or (deferral == "auto" and kind in COMPACTION_KINDS)
