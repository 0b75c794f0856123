"""A rule, compiled: the condition is a node tree built once at load time."""

from __future__ import annotations

from dataclasses import dataclass, field

from hangwatch.classify.causes import SEVERITIES
from hangwatch.classify.language.conditions import Node
from hangwatch.errors import RuleLocation
from hangwatch.model import State

DEFAULT_CONFIDENCE = 0.5


@dataclass(frozen=True)
class Rule:
    id: str
    cause: str
    title: str
    severity: str  # info / warning / critical
    when: Node = field(compare=False)
    remedy: str
    message: str | None = None
    engines: tuple[str, ...] = ()  # empty: every engine
    confidence: float = DEFAULT_CONFIDENCE
    state: State | None = None  # State.PROGRESSING for slow-but-alive causes
    hold_s: float = 0.0  # `for:` — quiet this long before the match decides the state
    immediate: bool = False  # the evidence proves a wait that cannot end by itself
    references: tuple[str, ...] = ()
    location: RuleLocation = RuleLocation("?")
    # the one check that tells this cause from the next candidate (a command or flag to try)
    check: str | None = None

    @property
    def severity_rank(self) -> int:
        return SEVERITIES.index(self.severity)

    @property
    def atoms(self) -> frozenset[str]:
        return self.when.atom_names()

    def fits_engine(self, engine: str | None) -> bool:
        """An unknown engine is always eligible: a pasted report may not say which server it was."""
        return not self.engines or engine is None or engine in self.engines
