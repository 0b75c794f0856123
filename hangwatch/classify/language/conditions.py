"""Condition trees compiled at load time: `all` / `any` / `not` nodes over atoms.

Evaluation returns an `Outcome`: whether the node held and, when it did, the facts, culprit
ranks and template values its atoms contributed, and how many atoms held (the specificity).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from hangwatch.errors import RuleLocation
from hangwatch.model import Fact

if TYPE_CHECKING:
    from hangwatch.classify.verdict.context import Context


@dataclass(frozen=True)
class AtomResult:
    """What one atom says about the evidence."""

    held: bool
    facts: list[Fact] = field(default_factory=list)
    culprits: tuple[str, ...] = ()
    values: dict[str, Any] = field(default_factory=dict)


AtomFn = Callable[[Any, "Context"], AtomResult]


@dataclass(frozen=True)
class Outcome:
    held: bool
    facts: tuple[Fact, ...] = ()
    culprits: tuple[str, ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    atoms: int = 0  # atoms that held: the specificity of a match


NOT_HELD = Outcome(False)


class Node(Protocol):
    @property
    def location(self) -> RuleLocation: ...  # read-only: nodes are frozen dataclasses

    def evaluate(self, ctx: Context) -> Outcome: ...

    def atom_names(self) -> frozenset[str]: ...


def _unique(items: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(items))


def merge(outcomes: Sequence[Outcome]) -> Outcome:
    """Combine held outcomes; the first atom to give a template value keeps it."""
    values: dict[str, Any] = {}
    for outcome in outcomes:
        for key, value in outcome.values.items():
            values.setdefault(key, value)
    return Outcome(
        held=True,
        facts=_unique([fact for o in outcomes for fact in o.facts]),
        culprits=_unique([rank for o in outcomes for rank in o.culprits]),
        values=values,
        atoms=sum(o.atoms for o in outcomes),
    )


@dataclass(frozen=True)
class AtomNode:
    name: str  # as written: "flag.tp", "env.NCCL_*"
    arg: Any  # compiled argument
    check: AtomFn = field(repr=False, compare=False)
    location: RuleLocation = RuleLocation("?")

    def evaluate(self, ctx: Context) -> Outcome:
        result = self.check(self.arg, ctx)
        if not result.held:
            return NOT_HELD
        return Outcome(True, tuple(result.facts), result.culprits, result.values, 1)

    def atom_names(self) -> frozenset[str]:
        return frozenset([self.name])


@dataclass(frozen=True)
class AllNode:
    children: tuple[Node, ...]
    location: RuleLocation = RuleLocation("?")

    def evaluate(self, ctx: Context) -> Outcome:
        outcomes = []
        for child in self.children:
            outcome = child.evaluate(ctx)
            if not outcome.held:
                return NOT_HELD
            outcomes.append(outcome)
        return merge(outcomes)

    def atom_names(self) -> frozenset[str]:
        return frozenset().union(*(child.atom_names() for child in self.children))


@dataclass(frozen=True)
class AnyNode:
    children: tuple[Node, ...]
    location: RuleLocation = RuleLocation("?")

    def evaluate(self, ctx: Context) -> Outcome:
        # Every alternative is evaluated: each one that holds adds evidence and specificity.
        held = [outcome for outcome in (child.evaluate(ctx) for child in self.children) if outcome.held]
        return merge(held) if held else NOT_HELD

    def atom_names(self) -> frozenset[str]:
        return frozenset().union(*(child.atom_names() for child in self.children))


@dataclass(frozen=True)
class NotNode:
    child: Node
    location: RuleLocation = RuleLocation("?")

    def evaluate(self, ctx: Context) -> Outcome:
        return NOT_HELD if self.child.evaluate(ctx).held else Outcome(True, atoms=1)

    def atom_names(self) -> frozenset[str]:
        return self.child.atom_names()
