"""Which log lines a regex matches, fast enough for a watch loop that classifies every second.

Python's `re` costs about 0.1 s per pattern on a 20 000-line log, and the rules hold some 70
log patterns. The log is split into chunks aligned on line numbers; each chunk is searched as
one string (one C-level scan instead of a Python loop per line) and its hits are memoised.
The live history hands the same `LogLine` objects to every tick, so only the chunk that grew is
searched again. A memo entry is reused only when it holds the very same line objects, so a
different log (another bundle) never sees another's results: this stays a pure function.
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

from hangwatch.classify.regexcheck import UnsafeRegex, can_match_newline
from hangwatch.model import LogLine

CHUNK_LINES = 256
MAX_CHUNKS = 512  # about 130 000 lines of memo
_ANCHORED = re.compile(r"\\[AZ]")  # \A and \Z mean a line's ends per line, the chunk's ends when joined


@dataclass
class Chunk:
    lines: tuple[LogLine, ...]
    text: str
    starts: list[int]
    hits: dict[re.Pattern[str], list[LogLine]] = field(default_factory=dict)


_memo: OrderedDict[tuple[int, int, int], Chunk] = OrderedDict()
_lock = threading.Lock()  # the API may classify while the watch loop does


def _new_chunk(lines: tuple[LogLine, ...]) -> Chunk:
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line.text) + 1
    return Chunk(lines, "\n".join(line.text for line in lines), starts)


def _chunk(lines: tuple[LogLine, ...]) -> Chunk:
    key = (id(lines[0]), id(lines[-1]), len(lines))
    with _lock:
        found = _memo.get(key)
        if found is not None and all(map(operator.is_, found.lines, lines)):
            _memo.move_to_end(key)
            return found
        chunk = _memo[key] = _new_chunk(lines)
        while len(_memo) > MAX_CHUNKS:
            _memo.popitem(last=False)
    return chunk


def chunks(log: Sequence[LogLine]) -> list[Chunk]:
    """The log in runs of lines whose numbers share `lineno // CHUNK_LINES`."""
    runs: list[list[LogLine]] = []
    for line in log:
        if runs and runs[-1][-1].lineno // CHUNK_LINES == line.lineno // CHUNK_LINES:
            runs[-1].append(line)
        else:
            runs.append([line])
    return [_chunk(tuple(run)) for run in runs]


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
    if _line_by_line(pattern):
        return [line for line in chunk.lines if pattern.search(line.text)]
    wide, hits, pos = _multiline(pattern), [], 0
    while (found := wide.search(chunk.text, pos)) is not None:
        index = bisect.bisect_right(chunk.starts, found.start()) - 1
        # the joined search may match across a newline: confirm on the line itself
        if pattern.search(chunk.lines[index].text):
            hits.append(chunk.lines[index])
        if index + 1 == len(chunk.lines):
            break
        pos = chunk.starts[index + 1]  # one hit per line: go on from the next line
    return hits


def hits(chunk: Chunk, pattern: re.Pattern[str]) -> list[LogLine]:
    found = chunk.hits.get(pattern)
    if found is None:
        found = chunk.hits[pattern] = _scan(chunk, pattern)
    return found
