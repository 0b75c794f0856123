"""Skimming a lot of log at memory speed: keep only the lines a phase marker or a rule could match.

Two reads are too large to parse line by line in time: the part of an existing log before the
tail the ring keeps (attaching to a 1 GiB log: its phase lines still matter), and a burst that
outgrows the per-tick read (60 MB/s for 10 s: its failures and phase lines still matter). Every
phase marker needs its `needle` in the line, and every rule pattern one of its
`required_literals` (classify.regexcheck), so a line holding none of them can be dropped
unread. Searching each of hundreds of literals through 64 MiB costs seconds, though, so the
search runs over the line *shapes*: each line with its ASCII digits made `0` (one `bytes.translate`),
deduplicated (one `set`). A flood repeats a few shapes (`Prefill batch. #new-seq: 0, ...`), so the
literals are searched in kilobytes; a line is kept when its shape holds a literal (the literals'
digits made `0` too: a shape holding one is a superset test, never a miss). A traceback keeps the
lines after its first line (its frames and its exception), as parse.failures reads them.

When the shapes do not repeat (every line unique), skimming would cost what parsing does:
`skim` then returns None and the caller skips those bytes and says so (watch/livesources.py).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hangwatch.classify.language.regexcheck import fold, required_literals
from hangwatch.engines import engines
from hangwatch.engines.base import COMMON_MARKERS, holding_needles
from hangwatch.parse.shapes import shape, shape_bytes

__all__ = ["Skimmed", "phase_needles", "rule_needles", "skim", "needles_of"]

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_TRACEBACK = "traceback (most recent call last)"
TRACEBACK_LINES = 200  # lines kept after a traceback's first line: its frames and its exception
# the unique shapes may hold at most this share of the bytes skimmed: beyond, lines do not repeat
# and searching them costs as much as parsing them (the caller skips and says so)
MAX_SHAPE_SHARE = 0.125
MIN_SHAPE_BUDGET = 1 << 20


@dataclass(frozen=True)
class Skimmed:
    data: bytes  # the kept lines, each ending in "\n", in log order
    lines: int  # complete lines skimmed
    indices: tuple[int, ...]  # of the kept lines among them (0 = the first)
    kept: tuple[bytes, ...]  # the kept lines, without their "\n"


def _norm(literal: str) -> str:
    return shape(fold(literal))


def phase_needles() -> frozenset[str]:
    """Every registered engine's marker needles (the engine may not be known yet), normalised."""
    markers = [mk for engine in engines() for mk in engine.markers] + list(COMMON_MARKERS)
    return frozenset(_norm(mk.needle) for mk in markers)


def needles_of(patterns: Iterable[re.Pattern[str]]) -> tuple[frozenset[str], int]:
    """(normalised literals of `patterns`, how many patterns have none: those match lines unseen)."""
    found: set[str] = set()
    blind = 0
    for pattern in patterns:
        literals = required_literals(pattern.pattern, pattern.flags)
        # a literal of digits alone ("429" -> "000" once normalised) is in nearly every line: no needle
        if literals is None or not all(any(c.isalpha() for c in literal) for literal in literals):
            blind += 1
        else:
            found.update(_norm(lit) for lit in literals)
    return frozenset(found), blind


def rule_needles(rules: Iterable[object]) -> tuple[frozenset[str], int]:
    """The literals of every regex in the rules' conditions (log, error, stack patterns alike: a
    superset is only a larger skim), plus a traceback's first line."""
    found, blind = needles_of(_patterns(rules))
    return found | {_TRACEBACK}, blind


def _patterns(rules: Iterable[object]) -> list[re.Pattern[str]]:
    out: dict[re.Pattern[str], None] = {}

    def walk(value: object, depth: int) -> None:
        if depth > 16:
            return
        if isinstance(value, re.Pattern):
            out[value] = None
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                walk(item, depth + 1)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item, depth + 1)
        elif hasattr(value, "__dataclass_fields__"):
            for name in value.__dataclass_fields__:
                walk(getattr(value, name), depth + 1)

    for rule in rules:
        walk(getattr(rule, "when", None), 0)
    return list(out)


def skim(data: bytes, needles: frozenset[str], *, max_shape_bytes: int | None = None) -> Skimmed | None:
    """The complete lines of `data` (it ends in "\\n") whose shape holds one of `needles`, or None
    when the shapes do not repeat enough to search them cheaply (more than `max_shape_bytes`)."""
    # only the shapes are split: a kept line is cut from `data` by its offset (a shape has its
    # line's length), so the lines themselves are never split (a third of the time on 8 MiB)
    shapes = shape_bytes(data).split(b"\n")
    if shapes and shapes[-1] == b"":
        shapes.pop()
    unique = set(shapes)
    budget = max_shape_bytes if max_shape_bytes is not None else max(MIN_SHAPE_BUDGET, int(len(data) * MAX_SHAPE_SHARE))
    if sum(map(len, unique)) > budget:
        return None
    hit, traceback = _matching(list(unique), needles)
    kept = _kept_indices(shapes, hit, traceback) if hit else []
    if not kept:
        return Skimmed(b"", len(shapes), (), ())
    starts = [0, *itertools.accumulate(map(len, shapes))]  # line i begins at starts[i] + i (its "\n"s)
    chosen = tuple(data[starts[i] + i : starts[i + 1] + i] for i in kept)
    return Skimmed(b"".join(line + b"\n" for line in chosen), len(shapes), tuple(kept), chosen)


def _matching(unique: Sequence[bytes], needles: frozenset[str]) -> tuple[set[bytes], set[bytes]]:
    """(shapes holding some needle, shapes that start a traceback)."""
    texts = [fold(_ANSI.sub("", one.decode("utf-8", "replace"))) for one in unique]
    hit = holding_needles(texts, needles)
    traceback = {unique[i] for i in hit if _TRACEBACK in texts[i]}
    return {unique[i] for i in hit}, traceback


def _kept_indices(shapes: list[bytes], hit: set[bytes], traceback: set[bytes]) -> list[int]:
    kept = [i for i, shape in enumerate(shapes) if shape in hit]
    if not traceback:
        return kept
    out: set[int] = set(kept)
    for i in kept:
        if shapes[i] in traceback:
            out.update(range(i, min(i + TRACEBACK_LINES, len(shapes))))
    return sorted(out)
