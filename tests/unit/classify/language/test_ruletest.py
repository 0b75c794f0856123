"""`run_rule_tests`: fires bundles must match their rule, quiet ones must not; gaps are reported."""

from __future__ import annotations

from pathlib import Path

from hangwatch.classify.language.ruletest import RuleTestResult, run_rule_tests
from hangwatch.errors import BundleError
from hangwatch.model import Evidence
from helpers.classify_builders import logs, rule

NCCL = rule("{log.matches: 'Init torch distributed begin'}", id="nccl")
BUNDLES = {
    "hang": Evidence(log=logs("Init torch distributed begin.")),
    "healthy": Evidence(log=logs("Init torch distributed begin.", "Init torch distributed ends.")),
    "other": Evidence(log=logs("Load weight begin.")),
}


def _read(path: Path) -> Evidence:
    if path.name not in BUNDLES:
        raise BundleError(f"bundle not found: {path}")
    return BUNDLES[path.name]


def _layout(root: Path, files: dict[str, list[str]]) -> Path:
    for folder, names in files.items():
        for name in names:
            (root / folder / name).mkdir(parents=True)
    return root


def test_pass_fail_error_untested_orphan(tmp_path: Path) -> None:
    # GIVEN
    tests = _layout(
        tmp_path,
        {"nccl/fires": ["hang", "other", "broken"], "nccl/quiet": ["healthy", "hang"], "gone-rule/fires": ["hang"]},
    )
    lonely = rule("{log.matches: x}", id="lonely")
    # WHEN
    results = run_rule_tests([NCCL, lonely], tests, read=_read)
    # THEN
    at = str(tests / "nccl")
    assert results == [
        RuleTestResult("nccl", "error", "fires", f"{at}/fires/broken", f"bundle not found: {at}/fires/broken"),
        RuleTestResult("nccl", "pass", "fires", f"{at}/fires/hang"),
        RuleTestResult("nccl", "fail", "fires", f"{at}/fires/other", "the rule did not match"),
        RuleTestResult("nccl", "fail", "quiet", f"{at}/quiet/hang", "the rule matched: Init torch distributed begin."),
        RuleTestResult("nccl", "fail", "quiet", f"{at}/quiet/healthy", "the rule matched: Init torch distributed begin."),
        RuleTestResult("lonely", "untested", detail=f"no bundles in {tests}/lonely/fires/* and {tests}/lonely/quiet/*"),
        RuleTestResult("gone-rule", "orphan", detail=f"{tests}/gone-rule: no loaded rule has this id"),
    ]
    assert [r.failed for r in results] == [True, False, True, True, True, True, False]


def test_a_fires_bundle_need_not_win(tmp_path: Path) -> None:
    stronger = rule("{log.matches: 'Init'}", id="stronger", confidence="0.99")
    tests = _layout(tmp_path, {"nccl/fires": ["hang"], "nccl/quiet": ["other"]})
    results = run_rule_tests([NCCL, stronger], tests, read=_read)
    assert [r.status for r in results if r.rule == "nccl"] == ["pass", "pass"]
