"""LogTail under a hostile log folder (probe L2, L6, L7): real files, links and FIFOs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from hangwatch.errors import SourceUnavailable
from hangwatch.sources.logtail import LogTail


def _read_in_thread(tail: LogTail | Path) -> bytes | BaseException:
    """read_new() (a LogTail made from a path first) in a thread: a blocking open fails the test, not the suite."""
    out: list[bytes | BaseException] = []

    def run() -> None:
        try:
            out.append((tail if isinstance(tail, LogTail) else LogTail(tail)).read_new())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    assert out, "read_new() blocked"
    return out[0]


def test_log_swapped_for_a_link_to_a_private_file_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret_root_only.txt"
    secret.write_text("ROOT-ONLY-SECRET\n")
    log = tmp_path / "server.log"
    log.write_text("line 1\n")
    tail = LogTail(log, start_tail_bytes=0)
    assert tail.read_new() == b""  # started at the end
    log.rename(tmp_path / "server.log.1")
    log.symlink_to(secret)
    for _ in range(3):
        got = _read_in_thread(tail)
        assert not isinstance(got, BaseException) and b"ROOT-ONLY" not in got


def test_log_swapped_for_a_fifo_neither_blocks_nor_reads(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("line 1\n")
    tail = LogTail(log, start_tail_bytes=0)
    log.unlink()
    os.mkfifo(log)
    got = _read_in_thread(tail)
    assert got == b""
    assert isinstance(_read_in_thread(log), SourceUnavailable)  # a FIFO from the start: refused, not opened for ever


def test_a_link_given_by_the_user_is_followed_once(tmp_path: Path) -> None:
    real = tmp_path / "run-3.log"
    real.write_text("")
    link = tmp_path / "latest.log"
    link.symlink_to(real)
    tail = LogTail(link)
    with real.open("a") as fh:
        fh.write("Load weight begin\n")
    assert tail.read_new() == b"Load weight begin\n"


def test_truncated_and_regrown_within_a_tick_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"crash log of the last run\n" * 400)  # ~10 KB
    tail = LogTail(log)
    assert tail.read_new().count(b"\n") == 400
    new_run = b"".join(b"[2026] TP0 line %d Init torch distributed begin\n" % i for i in range(600))  # ~25 KB
    with log.open("wb") as fh:  # `> server.log`, then the new run writes more than before, all within a tick
        fh.write(new_run)
    assert tail.read_new() == new_run


def test_truncate_then_a_slightly_longer_write_is_seen(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"a" * 44 + b"\n")
    tail = LogTail(log)
    tail.read_new()
    log.write_bytes(b"b" * 46 + b"\n")
    assert tail.read_new() == b"b" * 46 + b"\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_file_of_another_owner_swapped_in_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("x\n")
    os.chown(log, 65534, 65534)
    tail = LogTail(log)
    tail.read_new()
    log.rename(tmp_path / "server.log.1")
    log.write_text("ROOT-OWNED\n")  # created by root: not the server's user
    assert b"ROOT-OWNED" not in tail.read_new()
