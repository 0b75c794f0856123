"""Rule loading under hostile input (probe R1, R3, R4, R8) and shipped regexes that stay linear (R2)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.classify.language.regexcheck import UnsafeRegex, check_linear
from hangwatch.errors import RuleError

RULE = "rules:\n  - {{id: r, cause: unknown, title: t, severity: info, remedy: r, when: {{log.matches: '{rx}'}}}}\n"


# Known ReDoS shapes: nested repeats, overlapping or empty alternatives under a repeat, an optional
# part that can start like what follows it, a repeat of something that can match nothing.
REDOS = [
    "(a+)+$", "(a*)*b", "(\\w+\\s?)*$", "(x+x+)+y", "(.*a){20}", "(a)\\1", "([a-z]+)*", "(\\s*,)*$",
    "(a|aa)+", "(a|aa)+$", "(a|a?)+", "(\\w|\\d)+$", "(a|ab)+c", "(ab|a)*c", "(\\d|[0-9])+x", "(.|\\s)*x",
    "(?:a|b|ab)*x", "(x|\\w)+y", "(?i)(A|a)+$", "(\\w\\d?)+$", "(a?){30}a{30}", "(?:foo|foobar)+!",
    "(\\S|[^ ])+$", "(?:[a-c]|b)+$", "^(\\w|_)+@",
]  # fmt: skip


@pytest.mark.parametrize("rx", REDOS)
def test_exponential_regexes_are_refused_with_file_and_line(tmp_path: Path, rx: str) -> None:
    path = tmp_path / "redos.yaml"
    path.write_text(RULE.format(rx=rx))
    with pytest.raises(RuleError, match=r"redos\.yaml:2:.*bad regex"):
        load_rules([path])


@pytest.mark.parametrize("rx", ["a+b+c+", "(?:ab)+", "(a|b)+", "Init torch distributed begin", "^(?:(?!x).)*x.*y",
                                "(ab?)+", "(?:foo|bar)+", "(?:\\d+\\.)?\\d+ ?s", "(?:[a-z]|\\d)+"])
def test_ordinary_regexes_load(rx: str) -> None:
    check_linear(rx)


def _shipped_patterns() -> list[str]:
    found: list[str] = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(v, str) and ("matches" in str(k) or k in ("match", "log.absent")):
                    found.append(v)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for path in sorted(Path(RULES_DIR).glob("*.yaml")):
        walk(yaml.safe_load(path.read_text()))
    return found


def test_every_shipped_regex_passes_the_check() -> None:
    patterns = _shipped_patterns()
    assert len(patterns) > 100
    for rx in patterns:
        check_linear(rx)


def test_the_autotune_rule_scans_a_line_once_per_line_not_once_per_occurrence() -> None:
    # the old `autotun.*(?:cache hit|...)` restarted its `.*` at every "autotun" of a line: quadratic.
    # Anchored with a prefix that stops at the first occurrence, a failing search is one pass.
    rx = next(p for p in _shipped_patterns() if "cache hit" in p)
    assert rx.startswith("(?i)^(?:(?!autotun).)*autotun")


def _bomb(levels: int, where: str) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    body = "\n".join(lines)
    if where == "when":
        return body + f"\nrules:\n  - {{id: r, cause: unknown, title: t, severity: info, remedy: r, when: {{any: *a{levels - 1}}}}}\n"
    return body + f"\nrules:\n  - {{id: r, cause: unknown, title: t, severity: info, remedy: r, when: {{log.matches: x}}, references: *a{levels - 1}}}\n"


@pytest.mark.parametrize("where", ["when", "references"])
def test_yaml_alias_bombs_are_refused(tmp_path: Path, where: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(9, where))
    with pytest.raises(RuleError, match="expands to more than"):
        load_rules([path])


def test_a_deeply_nested_document_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("rules: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(RuleError, match="nested more than"):
        load_rules([path])


def test_unsafe_regex_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        check_linear("(a+)+")
    assert issubclass(UnsafeRegex, ValueError)


@pytest.mark.parametrize("rx", ["(a|aa)+", "(\\w|\\d)+$", "(a|a?)+"])  # the CLI path; load_rules above has them all
def test_rules_check_refuses_each_redos_shape_with_file_and_line(tmp_path: Path, rx: str) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("# my rules\n" + RULE.format(rx=rx.replace("'", "''")))
    done = subprocess.run([sys.executable, "-m", "hangwatch", "rules", "check", str(path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert f"{path}:3:" in done.stdout + done.stderr


def test_every_shipped_rule_file_still_loads() -> None:
    rules = load_rules(sorted(Path(RULES_DIR).glob("*.yaml")))
    assert len(rules) > 100


def test_the_check_reads_alternatives_as_written() -> None:
    # re's own parser folds `a|aa` into `a(?:|a)` and `\w|\d` into `[\w\d]`; the check must not be fooled,
    # and must not change what `re` itself compiles.
    for rx in ("(a|aa)+", "(\\w|\\d)+"):
        with pytest.raises(UnsafeRegex, match="alternation"):
            check_linear(rx)
    assert re.compile("(a|aa)+").fullmatch("aaa")
