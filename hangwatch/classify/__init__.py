"""Rules and the pure classifier: `classify(evidence, rules) -> Verdict`. Three subjects, one folder each:

    language/   the rule language: loading, validation, regex safety, conditions and atoms, rule tests
    verdict/    evidence + rules -> Verdict: matching, ranking, differential, wait-for graph, stack tree
    preflight/  the checks run before a launch, on the host's facts

`causes` is the cause catalogue all three name. Nothing here reads a bundle or a live source:
callers pass `Evidence` in (docs/architecture.md).
"""

from hangwatch.classify.causes import CAUSES
from hangwatch.classify.language.conditions import AtomResult
from hangwatch.classify.language.loader import RULES_DIR, load_rules
from hangwatch.classify.language.rule import Rule
from hangwatch.classify.verdict.classifier import (
    DEFAULT_BUDGETS,
    Match,
    classify,
    match_rule,
    rank_matches,
)
from hangwatch.classify.verdict.context import Context
from hangwatch.classify.verdict.memo import ScanMemo

__all__ = [
    "CAUSES",
    "DEFAULT_BUDGETS",
    "RULES_DIR",
    "AtomResult",
    "Context",
    "Match",
    "Rule",
    "ScanMemo",
    "classify",
    "load_rules",
    "match_rule",
    "rank_matches",
]
