"""Rule tests as data: `tests/rules/<rule-id>/fires/*` must match the rule, `quiet/*` must not.

A fires bundle only has to produce a match of its rule, not to win: another rule may be more
specific for that bundle, and the classifier's choice is scored by `hangwatch eval`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from hangwatch.classify.language.rule import Rule
from hangwatch.classify.verdict.classifier import match_rule
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.pasted import with_pasted
from hangwatch.errors import HangwatchError
from hangwatch.model import Evidence

Reader = Callable[[Path], Evidence]
KINDS = ("fires", "quiet")


@dataclass(frozen=True)
class RuleTestResult:
    rule: str
    status: str  # pass / fail / error (unreadable bundle) / untested / orphan (tests of a rule not loaded)
    kind: str | None = None  # fires / quiet
    bundle: str | None = None
    detail: str = ""

    @property
    def failed(self) -> bool:
        # An orphan folder is reported, not failed: `--rules DIR` may load a subset on purpose.
        return self.status in ("fail", "error", "untested")


def _bundles(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() or p.name.endswith((".tar.gz", ".tgz")))


def _check(rule: Rule, kind: str, bundle: Path, read: Reader) -> RuleTestResult:
    try:
        evidence = read(bundle)
    except HangwatchError as exc:
        return RuleTestResult(rule.id, "error", kind, str(bundle), str(exc))
    match = match_rule(rule, Context(with_pasted(evidence)))
    if (match is not None) == (kind == "fires"):
        return RuleTestResult(rule.id, "pass", kind, str(bundle))
    if match is None:
        return RuleTestResult(rule.id, "fail", kind, str(bundle), "the rule did not match")
    facts = "; ".join(fact.text for fact in match.facts[:3])
    return RuleTestResult(rule.id, "fail", kind, str(bundle), f"the rule matched: {facts}")


def check_rule(rule: Rule, tests_dir: Path, read: Reader) -> list[RuleTestResult]:
    folders = {kind: _bundles(tests_dir / rule.id / kind) for kind in KINDS}
    results = [_check(rule, kind, bundle, read) for kind in KINDS for bundle in folders[kind]]
    absent = [kind for kind in KINDS if not folders[kind]]
    if absent:
        where = " and ".join(f"{tests_dir / rule.id / kind}/*" for kind in absent)
        results.append(RuleTestResult(rule.id, "untested", detail=f"no bundles in {where}"))
    return results


def _orphans(rules: Sequence[Rule], tests_dir: Path) -> list[RuleTestResult]:
    ids = {rule.id for rule in rules}
    folders = sorted(p for p in tests_dir.iterdir() if p.is_dir()) if tests_dir.is_dir() else []
    orphans = [p for p in folders if p.name not in ids]
    return [RuleTestResult(p.name, "orphan", detail=f"{p}: no loaded rule has this id") for p in orphans]


def run_rule_tests(rules: Sequence[Rule], tests_dir: Path, read: Reader) -> list[RuleTestResult]:
    """Every rule's fires/quiet bundles, rules without tests, and test folders without a rule; `read`
    turns one bundle path into `Evidence` (the CLI passes `hangwatch.bundle.read_bundle`: the
    classifier reads no bundles of its own)."""
    results = [result for rule in rules for result in check_rule(rule, Path(tests_dir), read)]
    return results + _orphans(rules, Path(tests_dir))
