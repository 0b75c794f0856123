"""Rules (load, validate, match) and the pure classifier: `classify(evidence, rules) -> Verdict`."""

from hangwatch.classify.causes import CAUSES
from hangwatch.classify.classifier import (
    DEFAULT_BUDGETS,
    Match,
    classify,
    match_rule,
    rank_matches,
)
from hangwatch.classify.conditions import AtomResult
from hangwatch.classify.context import Context
from hangwatch.classify.loader import RULES_DIR, load_rules
from hangwatch.classify.memo import ScanMemo
from hangwatch.classify.rule import Rule

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
