"""Offline commands: `diagnose` a bundle, `eval` a corpus, `rules check` and `rules test`.

Errors are raised as `HangwatchError`s; `hangwatch.cli.main` prints them in one line and exits 2.
"""

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from hangwatch.classify import RULES_DIR, Rule, classify, load_rules
from hangwatch.classify.language.ruletest import RuleTestResult, run_rule_tests
from hangwatch.cli.evaluate import find_cases, print_summary, score_case, summarize
from hangwatch.errors import HangwatchError
from hangwatch.model import Evidence
from hangwatch.redact import redact_obj, terminal_safe
from hangwatch.sinks.report import print_verdict

RulesOption = Annotated[
    list[Path] | None,
    typer.Option("--rules", help="Extra rule file or directory (repeatable); added to the shipped rules."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of the report.")]
BuiltinOption = Annotated[bool, typer.Option("--builtin/--no-builtin", help="Include the shipped rules.")]


def _console() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _rules(extra: list[Path] | None, builtin: bool = True) -> list[Rule]:
    paths = ([RULES_DIR] if builtin else []) + list(extra or [])
    return load_rules(paths)


def _read_bundle() -> Callable[[Path], Evidence]:
    from hangwatch.bundle import (
        read_bundle,  # imported late: `rules check` needs no bundle reader
    )

    return read_bundle


def _print_json(data: object) -> None:
    print(json.dumps(redact_obj(data), indent=2))  # ensure_ascii: escapes, never raw control bytes


def diagnose(
    path: Annotated[Path, typer.Argument(help="A bundle directory or .tar.gz (see docs/bundle-format.md).")],
    json_out: JsonOption = False,
    rules: RulesOption = None,
    builtin: BuiltinOption = True,
    html: Annotated[Path | None, typer.Option(
        "--html", help="Also write the page (timeline, stack tree, GPUs, evidence) as one self-contained HTML file.")] = None,
) -> None:
    """Say why the server in a bundle is stuck: state, cause, evidence, remedy."""
    if html is not None:
        from hangwatch.sinks.web.report import write_report  # the page's code loads only when asked for

        verdict = write_report(path, html, _rules(rules, builtin))
        print(f"hangwatch: wrote the report to {html}", file=sys.stderr)  # stderr: --json stays one document
    else:
        verdict = classify(_read_bundle()(path), _rules(rules, builtin))
    if json_out:
        _print_json(verdict.to_dict())
    else:
        print_verdict(verdict, _console())


def evaluate(
    directory: Annotated[Path, typer.Argument(help="A folder of bundles, each with an expected.json.")],
    json_out: JsonOption = False,
    min_accuracy: Annotated[
        float | None, typer.Option("--min-accuracy", help="Exit 1 when cause accuracy (0..1) is below this.")
    ] = None,
    rules: RulesOption = None,
    builtin: BuiltinOption = True,
) -> None:
    """Diagnose every bundle of a corpus and score causes and states against expected.json."""
    cases = find_cases(directory)
    if not cases:
        raise HangwatchError(f"{directory}: no bundle with an expected.json")
    rule_set, read = _rules(rules, builtin), _read_bundle()
    summary = summarize([score_case(case, rule_set, read) for case in cases])
    if json_out:
        _print_json(summary)
    else:
        print_summary(summary, _console())
    if min_accuracy is not None and (summary["cause_accuracy"] or 0.0) < min_accuracy:
        raise typer.Exit(1)


def rules_check(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Rule files or directories (default: the shipped rules).")
    ] = None,
) -> None:
    """Validate rule files; print every problem as file:line:column: reason."""
    from hangwatch.classify.preflight.checks import load_checks
    from hangwatch.classify.preflight.versions import load_tables
    from hangwatch.classify.verdict.priors import load_priors
    from hangwatch.errors import RuleError

    rules, errors = load_rules(paths or None, collect_errors=True)
    checks, check_errors = load_checks(paths or None, collect_errors=True)
    errors += check_errors
    if not paths:  # the shipped tables: known-bad releases (preflight), phase priors (the differential)
        for load in (load_tables, load_priors):
            try:
                load()
            except RuleError as exc:
                errors.append(exc)
    for error in errors:
        print(terminal_safe(str(error)), file=sys.stderr)  # a rule file's text may hold escapes
    extra = f", {len(checks)} preflight checks valid" if checks else ""
    print(f"{len(rules)} rules valid{extra}, {len(errors)} errors")
    if errors:
        raise typer.Exit(1)


def _default_tests_dir() -> Path:
    here = Path("tests/rules")
    return here if here.is_dir() else RULES_DIR.parent.parent / "tests" / "rules"


def _print_test_result(result: RuleTestResult) -> None:
    where = f" {result.kind}/{Path(result.bundle).name}" if result.bundle else ""
    detail = f": {result.detail}" if result.detail else ""
    print(terminal_safe(f"{result.status.upper():8} {result.rule}{where}{detail}"))  # facts quote the bundles


def rules_test(
    rules: Annotated[
        list[Path] | None,
        typer.Option("--rules", help="Rule files or directories to test (default: the shipped rules)."),
    ] = None,
    tests: Annotated[Path | None, typer.Option("--tests", help="Test folder (default: tests/rules).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List passing bundles too.")] = False,
) -> None:
    """Run each rule on its tests/rules/<id>/fires and quiet bundles."""
    rule_set = load_rules(rules or None)
    results = run_rule_tests(rule_set, tests or _default_tests_dir(), _read_bundle())
    for result in results:
        if verbose or result.status != "pass":
            _print_test_result(result)
    failed = sum(result.failed for result in results)
    passed = sum(result.status == "pass" for result in results)
    print(f"{len(rule_set)} rules: {passed} bundles pass, {failed} problems")
    if failed:
        raise typer.Exit(1)
