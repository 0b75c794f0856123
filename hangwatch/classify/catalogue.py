"""The cause catalogue with what the rules say of each cause: its states, its rules, its checks.

Pure: rules in, entries out. `hangwatch causes` prints it and docs/causes.md is it in Markdown
(sinks/catalogue.py renders both).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hangwatch.classify.causes import CATALOGUE, Cause
from hangwatch.classify.language.rule import Rule
from hangwatch.model import State

__all__ = ["CauseEntry", "catalogue"]


@dataclass(frozen=True)
class CauseEntry:
    cause: Cause
    states: tuple[str, ...]  # the states the rules of this cause decide ("stalled", "progressing")
    rules: tuple[str, ...]  # ids of the rules that diagnose it
    checks: tuple[str, ...] = ()  # ids of the preflight checks that predict it


def catalogue(rules: Sequence[Rule], checks: Sequence[Rule] = ()) -> tuple[CauseEntry, ...]:
    """One entry per cause, in the catalogue's order."""
    return tuple(_entry(cause, rules, checks) for cause in CATALOGUE)


def _entry(cause: Cause, rules: Sequence[Rule], checks: Sequence[Rule]) -> CauseEntry:
    mine = [rule for rule in rules if rule.cause == cause.id]
    # a rule without its own state decides a stall once it holds (classify/verdict/classifier.py)
    states = {(rule.state or State.STALLED).value for rule in mine}
    if cause.id == "unknown":
        states.update((State.STALLED.value, State.UNKNOWN.value))  # nothing explains a stall; nothing to go on
    order = [state.value for state in State]
    return CauseEntry(
        cause=cause,
        states=tuple(sorted(states, key=order.index)),
        rules=tuple(sorted(rule.id for rule in mine)),
        checks=tuple(sorted(check.id for check in checks if check.cause == cause.id)),
    )
