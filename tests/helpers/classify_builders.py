"""Builders for classifier tests: inline conditions and rules, hand-built evidence."""

from __future__ import annotations

from hangwatch.classify.language.conditions import Node, Outcome
from hangwatch.classify.language.loader import compile_condition, load_text, site_of
from hangwatch.classify.language.rule import Rule
from hangwatch.classify.verdict.context import Context
from hangwatch.errors import RuleError, RuleLocation
from hangwatch.model import (
    Evidence,
    Frame,
    LogLine,
    Origin,
    Phase,
    PhaseEvent,
    ProcessStack,
    Source,
    ThreadStack,
)
from hangwatch.parse.positioned_yaml import parse_yaml

PATH = "<test>"


def when(text: str) -> Node:
    """Compile one condition written in YAML (`log.matches: x`); raise its first error."""
    raw = parse_yaml(text, PATH)
    errors: list[RuleError] = []
    node = compile_condition(raw, site_of(raw, RuleLocation(PATH, 1, 1)), errors)
    if errors:
        raise errors[0]
    assert node is not None
    return node


def check(text: str, evidence: Evidence) -> Outcome:
    return when(text).evaluate(Context(evidence))


def rule(condition: str, **fields: object) -> Rule:
    """One rule with defaults for the required fields; `condition` is the YAML under `when:`."""
    body = {"id": "r", "cause": "nccl_init", "title": "t", "severity": "warning", "remedy": "fix", **fields}
    lines = [f"  - {key}: {value}" if i == 0 else f"    {key}: {value}" for i, (key, value) in enumerate(body.items())]
    indented = "\n".join("      " + line for line in condition.strip().splitlines())
    return load_text("rules:\n" + "\n".join(lines) + "\n    when:\n" + indented + "\n")[0]


def logs(*texts: str, rank: str | None = None, start: int = 1) -> tuple[LogLine, ...]:
    return tuple(LogLine(start + i, text, rank=rank) for i, text in enumerate(texts))


def event(phase: Phase, rank: str | None, lineno: int, end: bool = False, text: str = "") -> PhaseEvent:
    return PhaseEvent(phase, rank, lineno, text or f"{phase.value} {'end' if end else 'begin'}", end=end)


def frame(qualname: str, file: str = "sglang/srt/x.py", origin: Origin = Origin.ENGINE, line: int | None = None) -> Frame:
    return Frame(qualname.rsplit(".", 1)[-1], qualname, file, line, origin)


def stack(label: str, *frames: Frame, pid: int | None = None, extra: tuple[ThreadStack, ...] = (), sample: int = 0) -> ProcessStack:
    main = ThreadStack("MainThread", 1, frames)
    return ProcessStack(label, pid, (main, *extra), Source(f"stacks/{label}.json"), sample=sample)
