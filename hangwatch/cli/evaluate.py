"""Score the classifier on a corpus: bundles with an `expected.json` ({"cause", "state", "evidence",
"determinable"}) beside their meta.json, or beside a `bundle/` folder (a recorded live run: the
GPU fixtures keep their verdict stream and native dumps next to the bundle).

The dev corpus index (../shared/corpus/dev/INDEX.md) defines the score: where the bundle decides the cause (`determinable:
yes`) the verdict's cause must be it (top-1); where it narrows it to two or three (`partly`) the
cause must be among the verdict's top 3 candidates; where only the discussion knew (`no`) the right
answer is the cause or an honest one: `unknown`, or a confidence under CONFIDENT. Everywhere, a
wrong cause at CONFIDENT or more is "confidently wrong". The reliability table bins verdicts by
confidence and shows how often each bin was right: calibrated figures are right about as often as
they claim.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hangwatch.classify import Rule, classify
from hangwatch.errors import HangwatchError
from hangwatch.model import Evidence, State, Verdict
from hangwatch.redact import terminal_text

TIERS = ("log+stacks", "log", "stacks", "meta-only")
TOP_N = 3  # "top-3": the expected cause is among the verdict's first three candidates
CONFIDENT = 0.6  # a verdict at or above this claims to be right; wrong there is "confidently wrong"
BINS = ((0.0, 0.3), (0.3, 0.45), (0.45, 0.6), (0.6, 0.75), (0.75, 0.9), (0.9, 1.01))


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
    determinable: str | None = None  # yes / partly / no, from expected.json
    top: tuple[str | None, ...] = ()

    @property
    def cause_ok(self) -> bool:
        return self.error is None and self.cause == self.expected_cause

    @property
    def confidently_wrong(self) -> bool:
        return self.error is None and not self.cause_ok and self.confidence >= CONFIDENT - 1e-9

    @property
    def honest(self) -> bool:
        """Right, or says it does not know (`unknown` or under CONFIDENT): the answer on `no`."""
        return self.cause_ok or (self.error is None and (self.cause in (None, "unknown") or self.confidence < CONFIDENT))

    @property
    def scored_ok(self) -> bool:
        """The dev corpus index's score (../shared/corpus/dev/INDEX.md): top-1 on `yes`, top-3 on `partly`, honest on `no` (top-1 elsewhere)."""
        if self.determinable == "partly":
            return self.in_top
        if self.determinable == "no":
            return self.honest
        return self.cause_ok

    @property
    def state_ok(self) -> bool | None:
        """None where there is no label, or where the verdict said there is not enough evidence to say."""
        if self.expected_state is None or self.state == State.UNKNOWN.value:
            return None
        return self.state == self.expected_state


def find_cases(root: Path) -> list[Path]:
    """Every directory at or under `root` holding an expected.json."""
    return sorted(p.parent for p in Path(root).rglob("expected.json"))


def evidence_tier(evidence: Evidence) -> str:
    if evidence.log and evidence.stacks:
        return "log+stacks"
    return "log" if evidence.log else ("stacks" if evidence.stacks else "meta-only")


def _expected(case: Path) -> dict[str, Any]:
    from hangwatch.userfile import read_user_file

    try:
        data = json.loads(read_user_file(case / "expected.json", 1 << 20).decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise HangwatchError(f"{case / 'expected.json'}: {exc}") from exc
    return data if isinstance(data, dict) else {}


def _top(verdict: Verdict) -> list[str | None]:
    """The verdict's cause, then the differential's other candidates, then the runners-up. An
    `unknown` verdict names no cause: its three places go to the candidates (priors included)."""
    out: list[str | None] = [] if verdict.cause in (None, "unknown") and verdict.candidates else [verdict.cause]
    for cause in (*(c.cause for c in verdict.candidates), *(r.cause for r in verdict.runners_up)):
        if cause not in out:
            out.append(cause)
    return out[:TOP_N]


def _bundle_of(case: Path) -> Path:
    if not (case / "meta.json").exists() and (case / "bundle" / "meta.json").exists():
        return case / "bundle"
    return case


def score_case(case: Path, rules: Sequence[Rule], read: Callable[[Path], Evidence]) -> CaseResult:
    expected = _expected(case)
    cause, state = expected.get("cause"), expected.get("state")
    try:
        evidence = read(_bundle_of(case))
    except HangwatchError as exc:
        tier = expected.get("evidence") or "meta-only"
        return CaseResult(str(case), tier, cause, state, error=str(exc), determinable=expected.get("determinable"))
    tier = expected.get("evidence") or evidence_tier(evidence)
    verdict = classify(evidence, rules)
    top = _top(verdict)
    return CaseResult(
        str(case), tier, cause, state, verdict.cause, verdict.state.value, verdict.confidence, verdict.rule,
        cause in top, determinable=expected.get("determinable"), top=tuple(top),
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
    top = sum(r.in_top for r in group)
    return {
        "cases": len(group), "correct": correct, "accuracy": _ratio(correct, len(group)),
        "top3": top, "top3_accuracy": _ratio(top, len(group)),
        "scored": sum(r.scored_ok for r in group), "confidently_wrong": sum(r.confidently_wrong for r in group),
    }  # fmt: skip


def reliability(results: Sequence[CaseResult]) -> list[dict[str, Any]]:
    """Verdicts binned by confidence: how many, how many right, the mean confidence claimed."""
    rows = []
    for low, high in BINS:
        group = [r for r in results if r.error is None and low <= r.confidence < high]
        right = sum(r.cause_ok for r in group)
        mean = sum(r.confidence for r in group) / len(group) if group else None
        rows.append({
            "bin": f"{low:.2f}-{min(high, 1.0):.2f}", "cases": len(group), "correct": right,
            "accuracy": _ratio(right, len(group)), "mean_confidence": None if mean is None else round(mean, 3),
        })  # fmt: skip
    return rows


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    stated = [r for r in results if r.state_ok is not None]
    labelled = [r for r in results if r.determinable in ("yes", "partly")]
    confident = [r for r in results if r.error is None and r.confidence >= CONFIDENT - 1e-9]
    return {
        "cases": len(results),
        "cause_accuracy": _ratio(sum(r.cause_ok for r in results), len(results)),
        "top3_accuracy": _ratio(sum(r.in_top for r in results), len(results)),
        "state_accuracy": _ratio(sum(bool(r.state_ok) for r in stated), len(stated)),
        "state_cases": len(stated),
        "state_unsaid": sum(r.expected_state is not None and r.state == State.UNKNOWN.value for r in results),
        "top3_yes_partly": _ratio(sum(r.in_top for r in labelled), len(labelled)),
        "yes_partly_cases": len(labelled),
        "confidently_wrong": sum(r.confidently_wrong for r in results),
        "confidently_wrong_rate": _ratio(sum(r.confidently_wrong for r in results), len(results)),
        "confident_precision": _ratio(sum(r.cause_ok for r in confident), len(confident)),
        "confident_cases": len(confident),
        "scored_accuracy": _ratio(sum(r.scored_ok for r in results), len(results)),
        "by_determinable": _groups([r for r in results if r.determinable], lambda r: r.determinable),
        "reliability": reliability(results),
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
    for column in (title.split()[-1], "cases", "top-1", "accuracy", "top-3", "conf. wrong"):
        table.add_column(column, justify="left" if column == title.split()[-1] else "right")
    for name, row in groups.items():
        table.add_row(
            Text(terminal_text(name)), str(row["cases"]), str(row["correct"]), _percent(row["accuracy"]),
            _percent(row["top3_accuracy"]), str(row["confidently_wrong"]),
        )  # fmt: skip
    return table


def _determinable_table(groups: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="Score by determinable (yes: top-1, partly: top-3, no: right or honest)", title_justify="left")
    for column in ("determinable", "cases", "top-1", "top-3", "scored", "score", "conf. wrong"):
        table.add_column(column, justify="left" if column == "determinable" else "right")
    for name in ("yes", "partly", "no"):
        row = groups.get(name)
        if row:
            table.add_row(
                name, str(row["cases"]), f"{row['correct']} ({_percent(row['accuracy'])})",
                f"{row['top3']} ({_percent(row['top3_accuracy'])})", str(row["scored"]),
                _percent(_ratio(row["scored"], row["cases"])), str(row["confidently_wrong"]),
            )  # fmt: skip
    return table


def _reliability_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="Reliability (calibration): verdicts by confidence", title_justify="left")
    for column in ("confidence", "verdicts", "right", "accuracy", "mean confidence"):
        table.add_column(column, justify="left" if column == "confidence" else "right")
    for row in rows:
        mean = "—" if row["mean_confidence"] is None else f"{row['mean_confidence']:.2f}"
        table.add_row(row["bin"], str(row["cases"]), str(row["correct"]), _percent(row["accuracy"]), mean)
    return table


def _by(rule: str | None) -> str:
    return f"rule {rule}" if rule else "no rule matched"


def print_summary(summary: dict[str, Any], console: Console) -> None:
    console.print(_table("Accuracy by cause", summary["by_cause"]))
    console.print(_table("Accuracy by tier", summary["by_tier"]))
    if summary["by_determinable"]:
        console.print(_determinable_table(summary["by_determinable"]))
    console.print(_reliability_table(summary["reliability"]))
    if summary["confusions"]:
        console.print("Confusions", style="bold underline")
    for wrong in summary["confusions"]:
        got = f"error: {wrong['error']}" if wrong["error"] else f"{wrong['got']} ({_by(wrong['rule'])})"
        text = f"  {Path(wrong['bundle']).name}: expected {wrong['expected']}, got {got}"
        console.print(terminal_text(text), markup=False, highlight=False)  # names and errors come from the bundles
    console.print(
        f"cause accuracy {_percent(summary['cause_accuracy'])} of {summary['cases']} bundles, "
        f"top-{TOP_N} {_percent(summary['top3_accuracy'])}, "
        f"state accuracy {_percent(summary['state_accuracy'])} of {summary['state_cases']}"
        + (f" ({summary['state_unsaid']} with too little evidence to say)" if summary["state_unsaid"] else ""),
        style="bold", highlight=False,
    )  # fmt: skip
    yes_partly = (
        f"top-{TOP_N} on yes+partly {_percent(summary['top3_yes_partly'])} of {summary['yes_partly_cases']}, "
        if summary["yes_partly_cases"] else ""
    )
    console.print(
        f"{yes_partly}confidently wrong (≥ {CONFIDENT}) {summary['confidently_wrong']} of {summary['cases']} "
        f"({_percent(summary['confidently_wrong_rate'])}), right at ≥ {CONFIDENT}: "
        f"{_percent(summary['confident_precision'])} of {summary['confident_cases']}",
        style="bold", highlight=False,
    )  # fmt: skip
