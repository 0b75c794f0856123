"""Every shipped rule against its own bundles: `tests/rules/<id>/fires/*` must match the rule,
`quiet/*` must not (the same check as `hangwatch rules test`, one test per rule so a failure names it)."""

from __future__ import annotations

import pytest

from hangwatch.bundle import read_bundle
from hangwatch.classify.language.loader import load_rules
from hangwatch.classify.language.rule import Rule
from hangwatch.classify.language.ruletest import check_rule, run_rule_tests
from helpers.paths import RULE_BUNDLES

SHIPPED = load_rules()


@pytest.mark.parametrize("rule", SHIPPED, ids=[rule.id for rule in SHIPPED])
def test_shipped_rule_bundles(rule: Rule) -> None:
    results = check_rule(rule, RULE_BUNDLES, read_bundle)
    failed = [f"{r.status} {r.kind or ''} {r.bundle or ''}: {r.detail}" for r in results if r.failed]
    assert not failed, "\n".join(failed)
    assert any(r.kind == "fires" for r in results) and any(r.kind == "quiet" for r in results)


def test_every_rule_bundle_folder_belongs_to_a_shipped_rule() -> None:
    orphans = [r.detail for r in run_rule_tests(SHIPPED, RULE_BUNDLES, read_bundle) if r.status == "orphan"]
    assert not orphans, "\n".join(orphans)
