"""Score the classifier on a corpus: bundles with an `expected.json` ({"cause", "state", "evidence"})."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from rich.console import Console
from rich.table import Table

from hangwatch.classify import Rule, classify
from hangwatch.errors import HangwatchError
from hangwatch.model import Evidence, Verdict

TIERS = ("log+stacks", "log", "stacks", "meta-only")
TOP_N = 3  # "top-3": the expected cause is the winner or among the first runners-up


@dataclass(frozen=True)
class CaseResult:
    bundle: str
    tier: str
    expected_cause: str | None
    expected_state: str | None
    cause: str | None = None
    state: str | None = None
    confidence: float = 0.0
    rule: str | None = None
    in_top: bool = False
    error: str | None = None

    @property
    def cause_ok(self) -> bool:
        return self.error is None and self.cause == self.expected_cause

    @property
    def state_ok(self) -> bool | None:
        return None if self.expected_state is None else self.state == self.expected_state


def find_cases(root: Path) -> list[Path]:
    """Every directory at or under `root` holding an expected.json."""
    return sorted(p.parent for p in Path(root).rglob("expected.json"))


def evidence_tier(evidence: Evidence) -> str:
    if evidence.log and evidence.stacks:
        return "log+stacks"
    return "log" if evidence.log else ("stacks" if evidence.stacks else "meta-only")


def _expected(case: Path) -> dict[str, Any]:
    try:
        data = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HangwatchError(f"{case / 'expected.json'}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _top(verdict: Verdict) -> list[str | None]:
    return [verdict.cause, *(other.cause for other in verdict.runners_up)][:TOP_N]


def score_case(case: Path, rules: Sequence[Rule], read: Callable[[Path], Evidence]) -> CaseResult:
    expected = _expected(case)
    cause, state = expected.get("cause"), expected.get("state")
    try:
        evidence = read(case)
    except HangwatchError as exc:
        return CaseResult(str(case), expected.get("evidence") or "meta-only", cause, state, error=str(exc))
    tier = expected.get("evidence") or evidence_tier(evidence)
    verdict = classify(evidence, rules)
    return CaseResult(
        str(case), tier, cause, state, verdict.cause, verdict.state.value, verdict.confidence, verdict.rule,
        cause in _top(verdict),
    )  # fmt: skip


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 3) if total else None


def _groups(results: Iterable[CaseResult], key: Callable[[CaseResult], Any]) -> dict[str, dict[str, Any]]:
    buckets: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        buckets[str(key(result))].append(result)
    return {name: _tally(group) for name, group in sorted(buckets.items())}


def _tally(group: Sequence[CaseResult]) -> dict[str, Any]:
    correct = sum(r.cause_ok for r in group)
    return {"cases": len(group), "correct": correct, "accuracy": _ratio(correct, len(group))}


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    stated = [r for r in results if r.state_ok is not None]
    return {
        "cases": len(results),
        "cause_accuracy": _ratio(sum(r.cause_ok for r in results), len(results)),
        "top3_accuracy": _ratio(sum(r.in_top for r in results), len(results)),
        "state_accuracy": _ratio(sum(bool(r.state_ok) for r in stated), len(stated)),
        "state_cases": len(stated),
        "by_cause": _groups(results, lambda r: r.expected_cause),
        "by_tier": _groups(results, lambda r: r.tier),
        "confusions": [
            {"bundle": r.bundle, "expected": r.expected_cause, "got": r.cause, "rule": r.rule, "error": r.error}
            for r in results if not r.cause_ok
        ],
        "results": [asdict(r) for r in results],
    }  # fmt: skip


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def _table(title: str, groups: dict[str, dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in (title.split()[-1], "cases", "correct", "accuracy"):
        table.add_column(column, justify="left" if column == title.split()[-1] else "right")
    for name, row in groups.items():
        table.add_row(name, str(row["cases"]), str(row["correct"]), _percent(row["accuracy"]))
    return table


def _by(rule: str | None) -> str:
    return f"rule {rule}" if rule else "no rule matched"


def print_summary(summary: dict[str, Any], console: Console) -> None:
    console.print(_table("Accuracy by cause", summary["by_cause"]))
    console.print(_table("Accuracy by tier", summary["by_tier"]))
    if summary["confusions"]:
        console.print("Confusions", style="bold underline")
    for wrong in summary["confusions"]:
        got = f"error: {wrong['error']}" if wrong["error"] else f"{wrong['got']} ({_by(wrong['rule'])})"
        text = f"  {Path(wrong['bundle']).name}: expected {wrong['expected']}, got {got}"
        console.print(text, markup=False, highlight=False)
    console.print(
        f"cause accuracy {_percent(summary['cause_accuracy'])} of {summary['cases']} bundles, "
        f"top-{TOP_N} {_percent(summary['top3_accuracy'])}, "
        f"state accuracy {_percent(summary['state_accuracy'])} of {summary['state_cases']}",
        style="bold", highlight=False,
    )  # fmt: skip
