"""read_failures with the caller's memo resumes where the last read stopped (probe L8): a tick costs
the new lines. Without a memo nothing is kept: every read is a fresh one."""

from __future__ import annotations

import pytest

from hangwatch.model import LogLine
from hangwatch.parse import failures
from hangwatch.parse.failures import FailureMemo, read_failures
from hangwatch.parse.logs import read_log_lines
from helpers.paths import DEV_CORPUS


def _logs() -> list[tuple[LogLine, ...]]:
    found = []
    for case in sorted(DEV_CORPUS.glob("*/server.log")):
        lines = read_log_lines(case.read_bytes())
        if any("Traceback" in line.text for line in lines):
            found.append(lines)
        if len(found) == 12:
            break
    return found


def _fresh(lines: tuple[LogLine, ...]) -> tuple[failures.Failure, ...]:
    return read_failures(lines)


@pytest.mark.skipif(not DEV_CORPUS.is_dir(), reason="the corpus is not here")
def test_a_log_read_as_it_grows_gives_what_one_read_of_the_whole_gives() -> None:
    logs = _logs()
    assert logs
    for lines in logs:
        whole = _fresh(lines)
        memo = FailureMemo()
        step = max(1, len(lines) // 37)  # odd steps: cuts fall inside tracebacks too
        for end in range(step, len(lines) + step, step):
            grown = read_failures(lines[:end], memo)
        assert grown == whole


def test_a_tick_reads_only_the_new_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    old = read_log_lines(f"[2026-12-01 00:00:00 TP0] server_args=ServerArgs({'x=1, ' * 800})\n".encode() * 5000)
    new = read_log_lines(b"[2026-12-01 00:00:01 TP0] RuntimeError: CUDA error: out of memory\n" * 10, 5001)
    memo = FailureMemo()
    read_failures(old, memo)
    seen: list[int] = []
    real = failures._body
    monkeypatch.setattr(failures, "_body", lambda line: seen.append(line.lineno) or real(line))
    found = read_failures(old + new, memo)
    assert found and found[-1].lineno > 5000
    assert min(seen) >= 5000, "lines read before were read again"
    assert len(seen) <= 3 * len(new) + 1


def test_a_different_log_is_read_from_its_start() -> None:
    a = read_log_lines(b"RuntimeError: first\n")
    b = read_log_lines(b"ValueError: second\nOSError: third\n")
    memo = FailureMemo()
    read_failures(a, memo)
    assert [f.text for f in read_failures(b, memo)] == [f.text for f in _fresh(b)]


def test_a_sliding_window_resumes_and_forgets_what_left_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the live loop hands the classifier its newest 5 000 lines: the front moves every tick of a flood
    text = b"".join(
        (f"[2026-12-01 00:00:00 TP0] RuntimeError: error number {n}\n" if n % 50 == 0 else
         f"[2026-12-01 00:00:00 TP0] server_args=ServerArgs(x={n}, {'y=1, ' * 200})\n").encode()
        for n in range(1, 3001)
    )  # fmt: skip
    log = read_log_lines(text)
    ends = range(1100, 3001, 100)
    expected = {end: [f.text for f in _fresh(log[end - 1000 : end])] for end in ends}
    memo = FailureMemo()
    read_failures(log[:1000], memo)
    seen: list[int] = []
    real = failures._body
    monkeypatch.setattr(failures, "_body", lambda line: seen.append(line.lineno) or real(line))
    for end in ends:
        seen.clear()
        found = read_failures(log[end - 1000 : end], memo)
        assert len(seen) <= 3 * 100 + 2, "a tick read more than the lines that arrived"
        assert [f.text for f in found] == expected[end]
        assert all(f.lineno > end - 1000 for f in found)


def test_an_unterminated_last_line_parsed_afresh_does_not_stop_resuming(monkeypatch: pytest.MonkeyPatch) -> None:
    log = read_log_lines(b"[2026-12-01 00:00:00 TP0] loading weights\n" * 2000)
    bar = read_log_lines(b"Loading safetensors checkpoint shards:  50% Completed | 1/2", 2001)
    memo = FailureMemo()
    read_failures(log + bar, memo)
    seen: list[int] = []
    real = failures._body
    monkeypatch.setattr(failures, "_body", lambda line: seen.append(line.lineno) or real(line))
    again = read_log_lines(b"Loading safetensors checkpoint shards: 100% Completed | 2/2", 2001)  # new objects
    read_failures(log + again, memo)
    assert seen and min(seen) >= 2000


def test_without_a_memo_every_read_is_a_whole_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # offline diagnose and the API classify one bundle: nothing is kept for the next call
    log = read_log_lines(b"[2026-12-01 00:00:00 TP0] loading weights\n" * 300 + b"RuntimeError: boom\n")
    first = read_failures(log)
    seen: list[int] = []
    real = failures._body
    monkeypatch.setattr(failures, "_body", lambda line: seen.append(line.lineno) or real(line))
    assert read_failures(log) == first
    assert min(seen) == 1 and len(set(seen)) == len(log), "a read without a memo resumed from an earlier one"


def test_two_memos_and_none_read_the_same() -> None:
    logs = _logs()[:4] if DEV_CORPUS.is_dir() else []
    logs.append(read_log_lines(b"Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nValueError: x\n"))
    one, two = FailureMemo(), FailureMemo()
    for lines in logs:
        half = lines[: len(lines) // 2]
        read_failures(half, one)  # `one` has seen this log grow, `two` only the other logs
        assert read_failures(lines, one) == read_failures(lines, two) == read_failures(lines)
