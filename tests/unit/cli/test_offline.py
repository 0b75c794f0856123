"""The offline commands run as a user runs them: the installed `hangwatch` script in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from helpers.paths import FIXTURES

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
BAD_RULES = FIXTURES / "rules_bad"
RULES = """\
rules:
  - id: nccl-begin-only
    cause: nccl_init
    title: NCCL init never ends
    severity: critical
    confidence: 0.8
    when:
      all:
        - log.matches: 'Init torch distributed begin'
        - log.absent: 'Init torch distributed ends'
    message: "stuck in {phase}: {line}"
    remedy: NCCL_DEBUG=INFO
"""
HANG_LOG = "[2026-01-01 10:00:01 TP0] Init torch distributed begin.\n"
DONE_LOG = HANG_LOG + "[2026-01-01 10:00:02 TP0] Init torch distributed ends. mem usage=0.5 GB\n"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HANGWATCH, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def bundle(root: Path, log: str | None, expected: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "meta.json").write_text(json.dumps({"format": "hangwatch-bundle/1", "engine": "sglang"}))
    if log is not None:
        (root / "server.log").write_text(log)
    if expected is not None:
        (root / "expected.json").write_text(json.dumps(expected))
    return root


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "nccl.yaml").write_text(RULES)
    return tmp_path / "rules"


def assert_clean_error(result: subprocess.CompletedProcess[str], code: int = 2) -> None:
    assert result.returncode == code
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("hangwatch: error: ")


def test_diagnose_report(tmp_path: Path, rules_dir: Path) -> None:
    # GIVEN
    path = bundle(tmp_path / "b", HANG_LOG)
    # WHEN
    result = run("diagnose", str(path), "--no-builtin", "--rules", str(rules_dir))
    # THEN
    assert result.returncode == 0, result.stderr
    assert "STALLED  nccl_init  confidence 0.80 (high)" in result.stdout
    assert "stuck in dist_init: [2026-01-01 10:00:01 TP0] Init torch distributed begin." in result.stdout
    assert "server.log:1 (TP0)" in result.stdout
    assert "Remedy\n  NCCL_DEBUG=INFO" in result.stdout


def test_diagnose_json(tmp_path: Path, rules_dir: Path) -> None:
    path = bundle(tmp_path / "b", HANG_LOG)
    result = run("diagnose", str(path), "--json", "--no-builtin", "--rules", str(rules_dir))
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert {"state", "cause", "confidence", "evidence", "remedy", "missing", "phases", "runners_up"} <= verdict.keys()
    assert (verdict["state"], verdict["cause"], verdict["confidence"]) == ("stalled", "nccl_init", 0.8)
    assert verdict["evidence"][0] == {"text": "[2026-01-01 10:00:01 TP0] Init torch distributed begin.", "source": "server.log:1 (TP0)", "role": None}
    assert verdict["phases"] == {"TP0": "dist_init"}


def test_diagnose_tar_gz_with_shipped_rules(tmp_path: Path) -> None:
    path = bundle(tmp_path / "case", HANG_LOG)
    archive = tmp_path / "case.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(path, arcname="case")
    result = run("diagnose", str(archive), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["state"] == "stalled"


@pytest.mark.parametrize("what", ["missing", "no-meta", "file"])
def test_diagnose_bad_input_is_one_clean_error(tmp_path: Path, what: str) -> None:
    target = tmp_path / "x"
    if what == "no-meta":
        target.mkdir()
    elif what == "file":
        target.write_text("not a bundle")
    result = run("diagnose", str(target))
    assert_clean_error(result)
    assert result.stdout == ""


def test_diagnose_with_a_bad_rule_file_names_its_location(tmp_path: Path) -> None:
    path = bundle(tmp_path / "b", HANG_LOG)
    result = run("diagnose", str(path), "--rules", str(BAD_RULES / "unknown_atom.yaml"))
    assert_clean_error(result)
    assert f"{BAD_RULES / 'unknown_atom.yaml'}:9:11: unknown evidence 'gpu.utilisation'" in result.stderr


def test_eval_scores_a_corpus(tmp_path: Path, rules_dir: Path) -> None:
    # GIVEN one bundle the rule explains and one it does not
    corpus = tmp_path / "corpus"
    bundle(corpus / "hang", HANG_LOG, {"cause": "nccl_init", "state": "stalled"})
    bundle(corpus / "other", None, {"cause": "port_in_use", "state": "stalled", "evidence": "meta-only"})
    # WHEN
    result = run("eval", str(corpus), "--json", "--no-builtin", "--rules", str(rules_dir))
    # THEN
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["cases"], summary["cause_accuracy"], summary["state_accuracy"]) == (2, 0.5, 1.0)
    tiers = {name: {k: row[k] for k in ("cases", "correct", "accuracy")} for name, row in summary["by_tier"].items()}
    assert tiers == {
        "log": {"cases": 1, "correct": 1, "accuracy": 1.0},
        "meta-only": {"cases": 1, "correct": 0, "accuracy": 0.0},
    }
    assert summary["by_cause"]["port_in_use"]["cases"] == 1 and summary["by_cause"]["port_in_use"]["correct"] == 0
    # a cause with no determinable label is scored top-1; nothing here is confidently wrong
    assert summary["confidently_wrong"] == 0 and summary["yes_partly_cases"] == 0
    assert sum(row["cases"] for row in summary["reliability"]) == 2
    assert [(c["expected"], c["got"]) for c in summary["confusions"]] == [("port_in_use", "unknown")]


def test_eval_min_accuracy_and_report(tmp_path: Path, rules_dir: Path) -> None:
    corpus = tmp_path / "corpus"
    bundle(corpus / "hang", HANG_LOG, {"cause": "nccl_init"})
    bundle(corpus / "other", DONE_LOG, {"cause": "port_in_use"})
    result = run("eval", str(corpus), "--min-accuracy", "0.9", "--no-builtin", "--rules", str(rules_dir))
    assert result.returncode == 1
    assert "cause accuracy 50% of 2 bundles" in result.stdout
    assert "other: expected port_in_use" in result.stdout
    assert run("eval", str(corpus), "--min-accuracy", "0.5", "--no-builtin", "--rules", str(rules_dir)).returncode == 0


def test_eval_of_an_empty_folder(tmp_path: Path) -> None:
    assert_clean_error(run("eval", str(tmp_path)))


def test_rules_check(rules_dir: Path) -> None:
    good = run("rules", "check", str(rules_dir))
    assert (good.returncode, good.stdout.strip()) == (0, "1 rules valid, 0 errors")
    bad = run("rules", "check", str(BAD_RULES))
    assert bad.returncode == 1
    assert f"{BAD_RULES / 'duplicate_key.yaml'}:6:5: duplicate key 'title'" in bad.stderr.splitlines()
    assert "Traceback" not in bad.stderr


def test_rules_check_shipped() -> None:
    result = run("rules", "check")
    assert result.returncode == 0, result.stderr


def test_rules_test(tmp_path: Path, rules_dir: Path) -> None:
    # GIVEN a fires and a quiet bundle for the rule
    tests = tmp_path / "tests" / "rules"
    bundle(tests / "nccl-begin-only" / "fires" / "hang", HANG_LOG)
    bundle(tests / "nccl-begin-only" / "quiet" / "done", DONE_LOG)
    # WHEN
    result = run("rules", "test", "--rules", str(rules_dir), "--tests", str(tests))
    # THEN
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().endswith("1 rules: 2 bundles pass, 0 problems")
    # a quiet bundle that fires is a failure; the default tests dir is ./tests/rules
    bundle(tests / "nccl-begin-only" / "quiet" / "hang-too", HANG_LOG)
    failed = run("rules", "test", "--rules", str(rules_dir), cwd=tmp_path)
    assert failed.returncode == 1
    assert "FAIL     nccl-begin-only quiet/hang-too: the rule matched" in failed.stdout
