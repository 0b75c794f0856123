"""Atoms over the host facts of a preflight (`host.NAME`) and over a preflight's findings
(`preflight.finding`), so that live rules can lean on what the preflight predicted.

    host.NAME: value / true / comparison     a host fact (Evidence.host), e.g. host.shm_mib: {lt: 256}
    preflight.finding: CAUSE | {in: [..], severity: warning}
                                             the preflight before this launch found this cause
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hangwatch.classify.causes import CAUSES, SEVERITIES
from hangwatch.classify.language.atoms.facts import NO
from hangwatch.classify.language.conditions import AtomFn, AtomResult
from hangwatch.classify.language.values import (
    ArgParser,
    Site,
    ValueSpec,
    check_keys,
    holds,
    parse_choice,
    parse_names,
    parse_value,
)
from hangwatch.classify.verdict.context import Context
from hangwatch.errors import RuleError
from hangwatch.model import Fact, Source

__all__ = ["ARGS", "ATOMS", "PREFIXES"]

PREFIXES = ("host.",)


@dataclass(frozen=True)
class HostArg:
    name: str
    spec: ValueSpec


@dataclass(frozen=True)
class FindingArg:
    causes: frozenset[str]
    severity: str = "warning"  # the least severity that counts


def _host_arg(raw: Any, site: Site) -> HostArg:
    name = site.name.split(".", 1)[1]
    if not name:
        raise RuleError(f"'{site.name}' needs a fact name after the dot", site.loc)
    return HostArg(name, parse_value(raw, site))


def _finding_arg(raw: Any, site: Site) -> FindingArg:
    if isinstance(raw, dict):
        check_keys(raw, site, ("in", "severity"), required=("in",))
        severity = parse_choice(raw.get("severity", "warning"), SEVERITIES, "severity", site.value("severity"))
        return FindingArg(parse_names(raw["in"], "in", site.value("in"), CAUSES), severity)
    return FindingArg(frozenset([parse_choice(raw, CAUSES, "cause", site.loc)]))


def host_fact(arg: HostArg, ctx: Context) -> AtomResult:
    fact = ctx.evidence.host.get(arg.name)
    if fact is None or not holds(arg.spec, fact.value):
        return NO
    return AtomResult(True, [Fact(fact.text, Source(fact.source))], values={f"host.{arg.name}": fact.value})


def preflight_finding(arg: FindingArg, ctx: Context) -> AtomResult:
    least = SEVERITIES.index(arg.severity)
    found = [f for f in ctx.evidence.preflight if f.cause in arg.causes and SEVERITIES.index(f.severity) >= least]
    if not found:
        return NO
    facts = [Fact(f"before the launch, preflight warned ({f.severity}): {f.title}", Source("preflight.json", detail=f.check))
             for f in found[:2]]  # fmt: skip
    facts += [fact for f in found[:1] for fact in f.evidence[:2]]
    return AtomResult(True, facts)


ATOMS: dict[str, AtomFn] = {"host.*": host_fact, "preflight.finding": preflight_finding}
ARGS: dict[str, ArgParser] = {"host.*": _host_arg, "preflight.finding": _finding_arg}
