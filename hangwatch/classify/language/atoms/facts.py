"""Building blocks shared by the atoms: facts with sources, rank lists, quantifiers."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hangwatch.classify.language.conditions import AtomResult
from hangwatch.model import Fact, LogLine, Source

NO = AtomResult(False)
MAX_FACT_CHARS = 240  # a fact quotes a line; a 10 kB line would drown the report


def clip(text: str) -> str:
    return text if len(text) <= MAX_FACT_CHARS else text[: MAX_FACT_CHARS - 1] + "…"


def log_fact(line: LogLine, others: int = 0) -> Fact:
    text = clip(line.text) + (f"  (+{others} more matching lines)" if others else "")
    return Fact(text, Source("server.log", line.lineno, line.rank))


def ranks_text(labels: Sequence[str]) -> str:
    if len(labels) <= 4:
        return ", ".join(labels)
    return f"{', '.join(labels[:3])} and {len(labels) - 3} more"


# A quantifier: (labels where the test held, the whole population) -> (held, culprits).
Quantifier = Callable[[Sequence[str], Sequence[str]], tuple[bool, tuple[str, ...]]]


def _any(hits: Sequence[str], population: Sequence[str]) -> tuple[bool, tuple[str, ...]]:
    return bool(hits), ()


def _all(hits: Sequence[str], population: Sequence[str]) -> tuple[bool, tuple[str, ...]]:
    return bool(population) and len(hits) == len(population), ()


def _none(hits: Sequence[str], population: Sequence[str]) -> tuple[bool, tuple[str, ...]]:
    # Nothing dumped is no evidence that no rank is there.
    return bool(population) and not hits, ()


def _outlier(hits: Sequence[str], population: Sequence[str]) -> tuple[bool, tuple[str, ...]]:
    # A strict minority stands apart; with two ranks neither can be called the odd one.
    held = bool(hits) and 2 * len(hits) < len(population)
    return held, tuple(hits) if held else ()


QUANTIFIERS: dict[str, Quantifier] = {"any": _any, "all": _all, "none": _none, "outlier": _outlier}
