"""Preflight checks: rules under `preflight:` in the rule files, evaluated once, before a launch,
over the launch command, the environment and the host facts. Pure: no I/O but loading the files.

    load_checks(paths=None, collect_errors=False) -> [Rule]
    evaluate(checks, evidence) -> Report          findings, what was checked, what was skipped and why

A check is a rule in the same language as the live rules (docs/rules.md) with `host.NAME` atoms
for host facts; `for`, `state`, `immediate` and `confidence` mean nothing before a launch and are
refused. A check that reads a fact the host could not give is *skipped*, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from hangwatch.classify.causes import SEVERITIES
from hangwatch.classify.language.loader import RULES_DIR, compile_rule, rule_files
from hangwatch.classify.language.rule import Rule
from hangwatch.classify.language.template import render
from hangwatch.classify.verdict.context import Context
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import Evidence, Finding, HostFact
from hangwatch.parse.positioned_yaml import PositionedList, PositionedMap, location, parse_yaml

__all__ = ["Report", "Skipped", "evaluate", "load_checks"]

_LIVE_ONLY = ("for", "state", "immediate", "confidence")
_SECTION = re.compile(r"^preflight\s*:", re.MULTILINE)


@dataclass(frozen=True)
class Skipped:
    check: str
    why: str


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]
    checked: tuple[str, ...]
    skipped: tuple[Skipped, ...]
    facts: tuple[tuple[str, HostFact], ...] = ()

    @property
    def critical(self) -> bool:
        return any(f.severity == "critical" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "checked": list(self.checked),
            "skipped": [{"check": s.check, "why": s.why} for s in self.skipped],
            "facts": {name: {"value": f.value, "text": f.text, "source": f.source} for name, f in self.facts},
        }


# ---------------------------------------------------------------- loading


def compile_checks(data: Any, path: str) -> tuple[list[Rule], list[RuleError]]:
    """The checks under `preflight:` of one parsed rule file, and every error in them."""
    if not isinstance(data, PositionedMap) or "preflight" not in data:
        return [], []
    items, errors = data["preflight"], []
    if items is None:
        return [], []
    if not isinstance(items, PositionedList):
        return [], [RuleError("'preflight' needs a list of checks", location(path, data.value_marks["preflight"]))]
    checks = []
    for item, mark in zip(items, items.marks, strict=True):
        where = location(path, mark)
        for key in _LIVE_ONLY:
            if isinstance(item, PositionedMap) and key in item:
                errors.append(RuleError(f"'{key}' has no meaning in a preflight check", location(path, item.key_marks[key])))
        rule = compile_rule(item, where, errors)
        if rule is not None:
            checks.append(rule)
    return checks, errors


Loaded = tuple[list[Rule], list[RuleError]]


@overload
def load_checks(paths: Iterable[Path | str] | None = None, collect_errors: Literal[False] = False) -> list[Rule]: ...
@overload
def load_checks(paths: Iterable[Path | str] | None, collect_errors: Literal[True]) -> Loaded: ...


def load_checks(paths: Iterable[Path | str] | None = None, collect_errors: bool = False) -> Any:
    files, errors = rule_files([RULES_DIR] if paths is None else paths)
    checks: list[Rule] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
            if not _SECTION.search(text):
                continue  # parsing YAML is the cost here: only files with a preflight section
            data = parse_yaml(text, str(path))
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(RuleError(f"cannot read the file: {exc}", RuleLocation(str(path))))
            continue
        except RuleError as exc:
            errors.append(exc)
            continue
        found, problems = compile_checks(data, str(path))
        checks.extend(found)
        errors.extend(problems)
    seen: dict[str, Rule] = {}
    for check in checks:
        if check.id in seen:
            errors.append(RuleError(f"duplicate check id '{check.id}' (first defined at {seen[check.id].location})", check.location))
        seen.setdefault(check.id, check)
    if collect_errors:
        return list(seen.values()), errors
    if errors:
        raise errors[0]
    return list(seen.values())


# ---------------------------------------------------------------- evaluating


def _why_skipped(check: Rule, evidence: Evidence) -> str | None:
    """Why a check that did not fire could not have: a fact it reads was not readable."""
    by_reason: dict[str, list[str]] = {}
    for atom in sorted(check.atoms):
        prefix, _, name = atom.partition(".")
        if prefix == "host" and name in evidence.host_unknown:
            by_reason.setdefault(evidence.host_unknown[name], []).append(name)
        elif prefix == "gpu" and not evidence.gpus:
            by_reason.setdefault(evidence.host_unknown.get("gpus", "no GPU information"), []).append("GPUs")
    return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items()) or None


def _finding(check: Rule, evidence: Evidence, ctx: Context) -> Finding | None:
    outcome = check.when.evaluate(ctx)
    if not outcome.held:
        return None
    message = render(check.message, outcome.values, ctx, outcome.culprits) if check.message else None
    return Finding(check=check.id, cause=check.cause, severity=check.severity, title=check.title,
                   evidence=outcome.facts, remedy=check.remedy, message=message, references=check.references)  # fmt: skip


def evaluate(checks: Sequence[Rule], evidence: Evidence) -> Report:
    ctx = Context(evidence)
    findings, checked, skipped = [], [], []
    for check in checks:
        if not check.fits_engine(evidence.engine):
            continue
        finding = _finding(check, evidence, ctx)
        why = None if finding else _why_skipped(check, evidence)
        if finding:
            findings.append(finding)
        if why:
            skipped.append(Skipped(check.id, why))
        else:
            checked.append(check.id)
    findings.sort(key=lambda f: -SEVERITIES.index(f.severity))
    return Report(tuple(findings), tuple(checked), tuple(skipped), tuple(sorted(evidence.host.items())))
