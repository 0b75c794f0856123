"""The chunked, memoised log search gives exactly what a per-line search gives."""

from __future__ import annotations

import re

import pytest

from hangwatch.classify import logscan
from hangwatch.classify.context import Context
from hangwatch.classify.memo import ScanMemo
from hangwatch.model import Evidence, LogLine
from helpers.classify_builders import logs


def _per_line(pattern: re.Pattern[str], lines: tuple[LogLine, ...]) -> list[LogLine]:
    return [line for line in lines if pattern.search(line.text)]


LINES = logs(*[f"line {i} {'Load weight begin.' if i % 97 == 0 else 'noise'}" for i in range(1000)])


def test_same_hits_as_a_per_line_search() -> None:
    for regex in (r"Load weight", r"^line 3\d\b", r"noise$", r"\Aline 5\b", r"begin\.\Z", r"(?i)LOAD", r"noise\s+line"):
        pattern = re.compile(regex)
        assert Context(Evidence(log=LINES)).log_hits(pattern) == _per_line(pattern, LINES), regex


def test_a_match_across_lines_is_not_a_hit() -> None:
    lines = logs("ends with Load", "weight at the start")
    assert Context(Evidence(log=lines)).log_hits(re.compile(r"Load\sweight")) == []


def test_memo_is_per_line_objects_not_line_numbers() -> None:
    pattern = re.compile("marker")
    first = logs("marker here", "nothing")
    second = logs("nothing", "marker there")  # same line numbers, other lines
    memo = ScanMemo()
    assert Context(Evidence(log=first), memo).log_hits(pattern) == [first[0]]
    assert Context(Evidence(log=second), memo).log_hits(pattern) == [second[1]]


def test_chunks_follow_line_numbers_so_a_sliding_window_reuses_them() -> None:
    window = LINES[300:900]
    shifted = LINES[301:901]
    memo = logscan.ChunkMemo()
    before, after = logscan.chunks(window, memo), logscan.chunks(shifted, memo)
    assert [c.lines[0].lineno for c in before] == [301, 512, 768]
    assert after[1] is before[1]
    assert logscan.chunks(shifted)[1] is not after[1], "chunks without a memo came from one"


def test_a_pattern_that_can_match_a_newline_searches_one_line_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # `[^!]*!` over 256 joined lines of 1 KiB runs from every start to the chunk's end: 64 KiB took
    # 11 s. On its own line each search sees at most logs.MAX_TEXT characters.
    lines = logs(*["x" * 1000 for _ in range(300)], "tail!")
    seen: list[int] = []
    real = logscan._multiline
    monkeypatch.setattr(logscan, "_multiline", lambda p: seen.append(1) or real(p))
    for regex in (r"[^!]*!", r"\s+tail", r"x\Wtail", r"(?s)x.tail"):
        pattern = re.compile(regex)
        assert Context(Evidence(log=lines)).log_hits(pattern) == _per_line(pattern, lines), regex
    assert seen == [], "a pattern that can cross lines ran over a joined chunk"
    assert Context(Evidence(log=lines)).log_hits(re.compile(r"x+tail")) == []
    assert seen, "a single-line pattern still takes the joined search"


def test_a_tick_searches_only_the_lines_that_arrived(monkeypatch: pytest.MonkeyPatch) -> None:
    # the live loop hands the newest 5 000 lines: each tick the newest chunk grows at its end and
    # the oldest loses lines at its front (probe L8: 5 000 long lines cut ticks to 0.15/s)
    body = ", ".join(f"field_{i}={i * 7}" for i in range(150))
    log = logs(*[f"server_args=ServerArgs({body}) {'Load weight begin.' if i % 97 == 0 else ''}" for i in range(3000)])
    pattern = re.compile(r"Load weight")
    memo = ScanMemo()
    Context(Evidence(log=log[:1000]), memo).log_hits(pattern)
    scanned: list[int] = []
    real = logscan._scan
    monkeypatch.setattr(logscan, "_scan", lambda chunk, p: scanned.append(len(chunk.own)) or real(chunk, p))
    for end in range(1100, 3001, 100):
        scanned.clear()
        window = log[end - 1000 : end]
        assert Context(Evidence(log=window), memo).log_hits(pattern) == _per_line(pattern, window)
        assert sum(scanned) <= 100, f"searched {sum(scanned)} lines for 100 new ones"
    scanned.clear()
    window = log[2000:3000]
    assert Context(Evidence(log=window)).log_hits(pattern) == _per_line(pattern, window)
    assert sum(scanned) == 1000, "a search without a memo reused an earlier call's"
