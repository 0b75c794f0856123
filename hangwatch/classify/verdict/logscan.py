"""Which log lines a regex matches, fast enough for a watch loop that classifies every second.

Python's `re` costs about 0.1 s per pattern on a 20 000-line log, and the rules hold some 70
log patterns. The log is split into chunks aligned on line numbers; each chunk is searched as
one string (one C-level scan instead of a Python loop per line) and its hits are memoised. A chunk
that holds none of the literal texts a pattern's every match needs is not searched at all.
The live history hands the same `LogLine` objects to every tick, so with a `ChunkMemo` (the
caller's: the watcher keeps one per watched server) only the chunk that grew is searched again.
A memo entry is reused only when it holds the very same line objects, so a different log (another
bundle) never sees another's results; without a memo nothing outlives the call.
"""

from __future__ import annotations

import bisect
import functools
import operator
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from hangwatch.classify.language.regexcheck import UnsafeRegex, can_match_newline, fold, required_literals
from hangwatch.model import LogLine
from hangwatch.parse.shapes import shape

CHUNK_LINES = 256
MAX_CHUNKS = 1536  # three keys per chunk: about 130 000 lines of memo
_ANCHORED = re.compile(r"\\[AZ]")  # \A and \Z mean a line's ends per line, the chunk's ends when joined


@dataclass
class Chunk:
    lines: tuple[LogLine, ...]
    text: str  # the `own` lines joined: only those are searched for this chunk
    starts: list[int]
    hits: dict[re.Pattern[str], list[LogLine]] = field(default_factory=dict)
    own: tuple[LogLine, ...] = ()
    before: Chunk | None = None  # the chunk these lines grew from (the log's end): its hits hold
    within: Chunk | None = None  # a chunk these lines are the end of (the window's front moved on)
    folded: str | None = None  # `text` as required_literals compares it, made on first use
    shapes: str | None = None  # its distinct line shapes (`_shapes`), made on first use

    def may_hold(self, pattern: re.Pattern[str]) -> bool:
        """False when no line here holds any text every match of `pattern` needs (then it is not searched)."""
        needed = required_literals(pattern.pattern, pattern.flags)
        if needed is None:
            return True
        if self.folded is None:
            self.folded = fold(self.text)
        if any("\n" in literal for literal in needed):  # spans lines: only the text in order can say
            return any(literal in self.folded for literal in needed)
        if self.shapes is None:
            self.shapes = _shapes(self.folded)
        return any(_shape(literal) in self.shapes for literal in needed)


def _shapes(folded: str) -> str:
    """The distinct line shapes of `folded` (parse/shapes.py): some 300 literals are searched in a
    few lines, not in 256, and no chunk that holds one is missed."""
    return "\n".join(set(shape(folded).split("\n")))


_shape = functools.lru_cache(maxsize=4096)(shape)  # the rules' literals, the same few hundred each tick


Key = tuple[object, ...]


class ChunkMemo:
    """The chunks (and their hits) of the log one caller classifies tick after tick."""

    def __init__(self, max_chunks: int = MAX_CHUNKS) -> None:
        self.max_chunks = max_chunks
        self.entries: OrderedDict[Key, Chunk] = OrderedDict()
        self.lock = threading.Lock()  # a caller may share it between threads


def _new_chunk(lines: tuple[LogLine, ...], before: Chunk | None = None, within: Chunk | None = None) -> Chunk:
    own = () if within is not None else lines[len(before.lines):] if before is not None else lines
    starts, offset = [], 0
    for line in own:
        starts.append(offset)
        offset += len(line.text) + 1
    return Chunk(lines, "\n".join(line.text for line in own), starts, own=own, before=before, within=within)


def _same(a: Sequence[LogLine], b: Sequence[LogLine]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _chunk(lines: tuple[LogLine, ...], memo: ChunkMemo) -> Chunk:
    """The memoised chunk of `lines`. A tick of the live loop changes a chunk at either end only:
    the newest grows (only its new lines are searched) and the oldest loses lines as the window
    of the newest lines slides (its hits are the larger chunk's, filtered): probe L8."""
    key: Key = (id(lines[0]), id(lines[-1]), len(lines))
    entries = memo.entries
    with memo.lock:
        found = entries.get(key)
        if found is not None and _same(found.lines, lines):
            entries.move_to_end(key)
            return found
        within = entries.get(("end", id(lines[-1])))
        if within is not None and not (len(within.lines) > len(lines) and _same(within.lines[-len(lines):], lines)):
            within = None
        before = entries.get(("start", id(lines[0]))) if within is None else None
        if before is not None and not (len(before.lines) < len(lines) and _same(before.lines, lines[: len(before.lines)])):
            before = None
        chunk = entries[key] = _new_chunk(lines, before, within)
        if within is None:
            entries[("end", id(lines[-1]))] = chunk
            entries[("start", id(lines[0]))] = chunk
        while len(entries) > memo.max_chunks:
            entries.popitem(last=False)
    return chunk


def chunks(log: Sequence[LogLine], memo: ChunkMemo | None = None) -> list[Chunk]:
    """The log in runs of lines whose numbers share `lineno // CHUNK_LINES`; with `memo`, the
    chunks (and hits) of earlier calls on the same line objects are reused."""
    runs: list[list[LogLine]] = []
    for line in log:
        if runs and runs[-1][-1].lineno // CHUNK_LINES == line.lineno // CHUNK_LINES:
            runs[-1].append(line)
        else:
            runs.append([line])
    if memo is None:
        return [_new_chunk(tuple(run)) for run in runs]
    return [_chunk(tuple(run), memo) for run in runs]


@functools.lru_cache(maxsize=1024)
def _multiline(pattern: re.Pattern[str]) -> re.Pattern[str]:
    return re.compile(pattern.pattern, pattern.flags | re.MULTILINE)


@functools.lru_cache(maxsize=1024)
def _line_by_line(pattern: re.Pattern[str]) -> bool:
    """\\A/\\Z anchor a line, not the chunk; and a pattern that can match a newline (`[^!]*!`,
    `\\s+`) would run over the whole joined chunk (256 lines) from every start: quadratic in 256 KiB,
    minutes, where on its own line each search sees at most logs.MAX_TEXT characters."""
    if _ANCHORED.search(pattern.pattern):
        return True
    try:
        return can_match_newline(pattern.pattern, pattern.flags)
    except UnsafeRegex:
        return True


def _scan(chunk: Chunk, pattern: re.Pattern[str]) -> list[LogLine]:
    if not chunk.may_hold(pattern):
        return []
    if _line_by_line(pattern):
        return [line for line in chunk.own if pattern.search(line.text)]
    wide, hits, pos = _multiline(pattern), [], 0
    while (found := wide.search(chunk.text, pos)) is not None:
        index = bisect.bisect_right(chunk.starts, found.start()) - 1
        # the joined search may match across a newline: confirm on the line itself
        if pattern.search(chunk.own[index].text):
            hits.append(chunk.own[index])
        if index + 1 == len(chunk.own):
            break
        pos = chunk.starts[index + 1]  # one hit per line: go on from the next line
    return hits


def hits(chunk: Chunk, pattern: re.Pattern[str]) -> list[LogLine]:
    found = chunk.hits.get(pattern)
    if found is None:
        if chunk.within is not None:
            first = chunk.lines[0].lineno
            found = [line for line in hits(chunk.within, pattern) if line.lineno >= first]
        elif chunk.before is not None:
            found = hits(chunk.before, pattern) + _scan(chunk, pattern)
        else:
            found = _scan(chunk, pattern)
        chunk.hits[pattern] = found
    return found
