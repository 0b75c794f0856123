"""LogTail on real files: growth, partial lines, a large start, rotation, truncation, caps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.sources.logtail import LogTail


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_new_complete_lines_only(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"one\ntw")
    tail = LogTail(log)
    assert tail.read_new() == b"one\n"
    assert tail.read_new() == b""
    append(log, b"o\nthree")
    assert tail.read_new() == b"two\n"
    assert tail.bytes_seen == len(b"one\ntwo\nthree")  # the unfinished line counts as progress
    append(log, b"\n")
    assert tail.read_new() == b"three\n"


def test_a_log_that_does_not_exist_yet(tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    tail = LogTail(log, start_tail_bytes=4)
    assert tail.read_new() == b"" and not tail.exists
    log.write_bytes(b"first line of a new log\n")
    # created after we started: read from its start, not from its tail
    assert tail.read_new() == b"first line of a new log\n"


def test_a_large_existing_log_starts_at_its_tail_on_a_line_start(tmp_path: Path) -> None:
    # GIVEN a 1 GiB log (sparse: made in no time) whose last lines are real
    log = tmp_path / "big.log"
    lines = b"".join(b"line %06d of the tail\n" % i for i in range(200_000))  # ~4.6 MiB
    with open(log, "wb") as fh:
        fh.truncate(2**30 - len(lines) - 1)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + lines)
    assert log.stat().st_size == 2**30
    # WHEN
    tail = LogTail(log, start_tail_bytes=2 * 2**20)
    data = tail.read_new()
    # THEN only the last 2 MiB were read, beginning at a whole line (bench/bench_live.py times it)
    assert tail.bytes_seen <= 2 * 2**20 + 1
    assert data.startswith(b"line ") and data.endswith(b"line 199999 of the tail\n")
    assert lines.endswith(data) and 2 * 2**20 - 30 <= len(data) <= 2 * 2**20


def test_the_tail_start_on_an_exact_line_boundary_keeps_that_line(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_bytes(b"aaaa\nbbbb\ncccc\n")
    assert LogTail(log, start_tail_bytes=10).read_new() == b"bbbb\ncccc\n"
    assert LogTail(log, start_tail_bytes=9).read_new() == b"cccc\n"


def test_rotation_drains_the_old_file_then_reads_the_new_one_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"old 1\n")
    tail = LogTail(log)
    assert tail.read_new() == b"old 1\n"
    # the writer adds to the old file, then it is renamed away and a new one takes its name
    append(log, b"old 2\nold partial")
    log.rename(tmp_path / "server.log.1")
    log.write_bytes(b"new 1\n")
    assert tail.read_new() == b"old 2\n"
    assert tail.read_new() == b"old partial\nnew 1\n"  # the cut line ends with its file
    assert tail.rotations == 1
    append(log, b"new 2\n")
    assert tail.read_new() == b"new 2\n"


def test_rotation_while_the_new_file_is_not_created_yet(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a\n")
    tail = LogTail(log)
    tail.read_new()
    log.rename(tmp_path / "server.log.1")
    assert tail.read_new() == b""
    log.write_bytes(b"b\n")
    assert tail.read_new() == b"b\n"


def test_truncation_reads_again_from_zero(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a long first life of the log\n")
    tail = LogTail(log)
    tail.read_new()
    # copytruncate / `> server.log`: same inode, smaller size
    with open(log, "r+b") as fh:
        fh.truncate(0)
    append(log, b"short\n")
    assert tail.read_new() == b"short\n"
    assert tail.rotations == 0


def test_a_flood_is_read_in_capped_pieces(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    tail = LogTail(log, max_read_bytes=2**20)
    append(log, b"x" * 99 + b"\n" * 1 + (b"y" * 99 + b"\n") * 50_000)  # 5 MB
    pieces = [tail.read_new() for _ in range(8)]
    assert all(len(p) <= 2**20 + 100 for p in pieces)  # a read is capped; the held-back line joins it
    assert b"".join(pieces) == log.read_bytes()
    assert pieces[-1] == b""


def test_a_line_that_never_ends_is_returned_once_it_is_huge(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    tail = LogTail(log, max_read_bytes=4 * 2**20)  # all of it in one read: the pending cap is what is tested
    append(log, b"\r 50%|#####     |" * 100_000)  # a tqdm bar redrawn with \r only, > 1 MiB
    assert len(tail.read_new()) == 1_700_000


def test_an_unreadable_log_is_source_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable) as err:
        LogTail(tmp_path).read_new()  # a directory: open() fails with EISDIR
    assert err.value.source == "log" and "--log" in (err.value.hint or "")
