"""Loading rules: every problem is a RuleError with file, line and column, equal as a value."""

from __future__ import annotations

from pathlib import Path

import pytest

from hangwatch.classify import RULES_DIR, load_rules
from hangwatch.classify.causes import CAUSES
from hangwatch.classify.language.loader import load_text
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import State
from helpers.classify_builders import rule
from helpers.paths import FIXTURES

BAD = FIXTURES / "rules_bad"
CAUSE_LIST = ", ".join(CAUSES)


def _errors(path: Path) -> list[RuleError]:
    return load_rules([path], collect_errors=True)[1]


def _at(name: str, line: int, column: int) -> RuleLocation:
    return RuleLocation(str(BAD / name), line, column)


@pytest.mark.parametrize(
    ("name", "reason", "line", "column"),
    [
        ("duplicate_key.yaml", "duplicate key 'title'", 6, 5),
        ("missing_key.yaml", "rule needs 'remedy'", 2, 5),
        ("unknown_key.yaml", "unknown key 'severty' (did you mean 'severity'?)", 5, 5),
        ("bad_cause.yaml", f"bad cause 'nccl_hang' (expected one of {CAUSE_LIST})", 3, 12),
        ("unknown_atom.yaml", "unknown evidence 'gpu.utilisation' (did you mean 'gpu.util'?)", 9, 11),
        ("bad_regex.yaml", "bad regex 'Init (parallel': missing ), unterminated subpattern at position 5", 8, 24),
        ("bad_comparison.yaml", "unknown comparison 'greater' (expected one of eq, in, gt, gte, lt, lte, matches, present)", 7, 18),
        ("bad_duration.yaml", "bad duration '10 minutes' (expected a number and a unit: '10s', '2m', '1h')", 6, 10),
        ("bad_placeholder.yaml", "unknown placeholder '{gpu.model}' in message (known: gpu.name, gpu.compute_capability, "
         "phase, ranks, line, frame, quiet_s, flag.NAME, env.NAME, meta.FIELD)", 8, 14),
        ("bad_phase.yaml", "bad phase 'loading' (expected one of launch, dist_init, weight_load, kv_cache, "
         "attn_backend, cuda_graph, http_up, warmup, ready)", 7, 25),
        ("yaml_syntax.yaml", "YAML: mapping values are not allowed here", 4, 13),
    ],
)  # fmt: skip
def test_bad_file_gives_one_located_error(name: str, reason: str, line: int, column: int) -> None:
    assert _errors(BAD / name) == [RuleError(reason, _at(name, line, column))]


def test_first_error_is_raised_without_collect_mode() -> None:
    with pytest.raises(RuleError) as caught:
        load_rules([BAD / "duplicate_key.yaml"])
    assert str(caught.value) == f"{BAD / 'duplicate_key.yaml'}:6:5: duplicate key 'title'"


def test_duplicate_ids_across_files() -> None:
    rules, errors = load_rules([BAD / "duplicate_id"], collect_errors=True)
    assert [r.title for r in rules] == ["one"]
    first = _at("duplicate_id/a.yaml", 2, 5)
    assert errors == [RuleError(f"duplicate rule id 'same-id' (first defined at {first})", _at("duplicate_id/b.yaml", 3, 5))]


def test_collect_mode_lists_every_error_of_a_rule_and_keeps_good_rules() -> None:
    rules, errors = load_rules([BAD / "several.yaml"], collect_errors=True)
    assert [r.id for r in rules] == ["fine-rule"]
    assert errors == [
        RuleError("bad rule id 'Bad_Id' (lowercase letters, digits and '-')", _at("several.yaml", 2, 9)),
        RuleError("bad severity 'fatal' (expected one of info, warning, critical)", _at("several.yaml", 5, 15)),
        RuleError("confidence must be a number from 0 to 1, got 1.5", _at("several.yaml", 6, 17)),
        RuleError("bad rank quantifier 'most' (expected one of any, all, none, outlier)", _at("several.yaml", 9, 44)),
        RuleError(
            "bad roles 'gpu' (expected one of launcher, scheduler, detokenizer, tokenizer, dp_controller, "
            "engine_core, worker, compiler, other)",
            _at("several.yaml", 10, 36),
        ),
    ]


def test_a_directory_is_loaded_recursively_and_errors_name_each_file() -> None:
    rules, errors = load_rules([BAD], collect_errors=True)
    assert {str(e.location.path) for e in errors if e.location} >= {str(BAD / "bad_cause.yaml"), str(BAD / "duplicate_id/b.yaml")}
    assert "fine-rule" in [r.id for r in rules]


def test_missing_path() -> None:
    assert _errors(BAD / "nope") == [RuleError("no such rule file or directory", RuleLocation(str(BAD / "nope")))]


def test_file_shape_errors(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- id: x\n")
    (tmp_path / "extra.yaml").write_text("rules: []\nversion: 2\n")
    (tmp_path / "empty.yml").write_text("")
    rules, errors = load_rules([tmp_path], collect_errors=True)
    assert rules == []
    assert errors == [
        RuleError("unknown key 'version' (a rule file holds 'rules:' and 'preflight:')", RuleLocation(str(tmp_path / "extra.yaml"), 2, 1)),
        RuleError("a rule file is a mapping with a list under 'rules:'", RuleLocation(str(tmp_path / "list.yaml"), 1, 1)),
    ]


@pytest.mark.parametrize(
    ("condition", "reason"),
    [
        ("{log.matches: a, log.absent: b}", "a condition is a mapping with one key: all, any, not, or an evidence atom"),
        ("{all: []}", "'all' needs a non-empty list of conditions"),
        ("{log.tail: {matches: x, lines: 0}}", "'lines' needs a positive whole number, got 0"),
        ("{log.tail: {match: x}}", "unknown key 'match' in 'log.tail' (expected matches, lines)"),
        ("{gpu.util: {gte: high}}", "'gte' needs a number, got 'high'"),
        ("{gpu.memory: up}", "bad memory trend 'up' (expected one of rising, flat, falling)"),
        ("{stack.dumped: yes please}", "'stack.dumped' needs true or false, got 'yes please'"),
        ("{flag.tp: [1, 2]}", "'flag.tp' needs a value or a comparison mapping, got [1, 2]"),
        ("{engine: tgi}", "bad engine 'tgi' (expected one of sglang, vllm)"),
        ("{stack.origin: {in: [kernel]}}", "bad origin 'kernel' (expected one of engine, torch, library, user, native)"),
        ("{nccl.init: true}", "unknown evidence 'nccl.init' (or flag.NAME, env.NAME, meta.FIELD)"),
    ],
)
def test_bad_conditions(condition: str, reason: str) -> None:
    with pytest.raises(RuleError) as caught:
        rule(condition)
    assert caught.value.reason == reason


def test_rule_fields_and_defaults() -> None:
    r = rule(
        "{log.matches: x}",
        engines="[sglang]",
        confidence="0.9",
        state="progressing",
        immediate="true",
        references="[https://example.org/1]",
        message="'{line} on {ranks}'",
        **{"for": "2m"},
    )
    assert (r.id, r.cause, r.severity, r.engines, r.confidence) == ("r", "nccl_init", "warning", ("sglang",), 0.9)
    assert (r.state, r.hold_s, r.immediate, r.references) == (State.PROGRESSING, 120.0, True, ("https://example.org/1",))
    assert r.atoms == frozenset({"log.matches"})
    plain = rule("{log.matches: x}")
    assert (plain.confidence, plain.state, plain.hold_s, plain.immediate, plain.engines) == (0.5, None, 0.0, False, ())


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("2m", 120.0), ("1h", 3600.0), ("500ms", 0.5), ("0", 0.0)])
def test_durations(text: str, seconds: float) -> None:
    assert rule("{log.matches: x}", **{"for": text}).hold_s == seconds


def test_duplicate_ids_in_one_text() -> None:
    text = "rules:\n" + "".join(
        "  - {id: a, cause: unknown, title: t, severity: info, when: {log.matches: x}, remedy: r}\n" for _ in range(2)
    )
    with pytest.raises(RuleError) as caught:
        load_text(text, "x.yaml")
    assert caught.value == RuleError("duplicate rule id 'a' (first defined at x.yaml:2:5)", RuleLocation("x.yaml", 3, 5))


def test_shipped_rules_load() -> None:
    rules, errors = load_rules(collect_errors=True)
    assert errors == []
    assert rules and all(r.location.path.startswith(str(RULES_DIR)) for r in rules)
