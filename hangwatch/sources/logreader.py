"""Open a `LogLocation` as a reader of the server's own output, whatever holds it.

* a file (plain, CRI, Docker json-file): `LogTail` (rotation, truncation, a bounded start)
  and the format's decoder from `parse.runtimelog`;
* the journal: `journalctl MATCH -o cat --follow`, read without blocking; journalctl is started
  with a bounded history (`--lines`) and is stopped (SIGTERM, then SIGKILL) on close.

Every reader has `read_new() -> bytes` (complete lines), `bytes_seen`, `path` and `close()`.
"""

from __future__ import annotations

import os
import subprocess
from typing import Protocol

from hangwatch.errors import SourceUnavailable
from hangwatch.parse.runtimelog import decoder_for
from hangwatch.sources.logfind import LogLocation
from hangwatch.sources.logtail import LogTail

__all__ = ["DecodedTail", "JournalTail", "LogReader", "open_log"]

_JOURNAL_LINES = 20_000  # history handed over at start: a server start's log, not a host's
_JOURNAL_READ = 256 << 10  # per call, like LogTail: the watch loop stops at its per-tick budget
_STOP_TIMEOUT_S = 2.0


class LogReader(Protocol):
    @property
    def path(self) -> str | None: ...

    @property
    def bytes_seen(self) -> int: ...

    def read_new(self) -> bytes: ...

    def close(self) -> None: ...


class DecodedTail:
    """A LogTail of a runtime's log file, decoded to the server's lines."""

    def __init__(self, location: LogLocation, *, start_tail_bytes: int):
        assert location.path is not None
        self.path: str | None = location.path
        self._tail = LogTail(location.path, start_tail_bytes=start_tail_bytes, guard=location.guard)
        self._format = location.format
        self._decoder = decoder_for(location.format)
        self._rotations = 0

    @property
    def bytes_seen(self) -> int:
        return self._tail.bytes_seen

    def read_new(self) -> bytes:
        data = self._tail.read_new()
        ended = b""
        if self._tail.rotations != self._rotations:
            # a new file (the data, if any, is its start): the old file's unfinished line is over
            self._rotations = self._tail.rotations
            ended = self._decoder.flush()
        return ended + self._decoder.feed(data) if data else ended

    def close(self) -> None:
        self._tail.close()


class JournalTail:
    """`journalctl MATCH... -o cat --follow`: the journal's lines of one process or container."""

    def __init__(self, location: LogLocation, *, journalctl: str = "journalctl", lines: int = _JOURNAL_LINES):
        self.path: str | None = None
        self.bytes_seen = 0
        self.argv = [journalctl, *location.journal_args, "-o", "cat", "--follow", "--no-pager", f"--lines={lines}"]
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise SourceUnavailable("log", f"cannot run {journalctl}: {exc.strerror or exc}", "install systemd's journalctl, or pass --log") from exc
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdout.fileno(), False)  # a tick never waits on the journal
        self._pending = b""

    def read_new(self) -> bytes:
        if self._proc is None:
            return b""
        data = self._read_available()
        if not data and self._proc.poll() is not None:
            raise SourceUnavailable("log", self._failure(), "check `journalctl " + " ".join(self.argv[1:-4]) + "` by hand")
        self.bytes_seen += len(data)
        data = self._pending + data
        end = data.rfind(b"\n") + 1
        self._pending = data[end:]
        return data[:end]

    def _read_available(self) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            return self._proc.stdout.read(_JOURNAL_READ) or b""
        except BlockingIOError:
            return b""

    def _failure(self) -> str:
        assert self._proc is not None and self._proc.stderr is not None
        err = self._proc.stderr.read(4096).decode("utf-8", "replace").strip().splitlines()
        return f"journalctl exited with status {self._proc.returncode}" + (f": {err[-1]}" if err else "")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=_STOP_TIMEOUT_S)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def open_log(location: LogLocation, *, start_tail_bytes: int = 8 << 20, journalctl: str = "journalctl") -> LogReader:
    if location.format == "journald":
        return JournalTail(location, journalctl=journalctl)
    if location.path is None:
        raise ValueError(f"a {location.format} log needs a path")
    if location.format == "plain":
        return LogTail(location.path, start_tail_bytes=start_tail_bytes, guard=location.guard)
    return DecodedTail(location, start_tail_bytes=start_tail_bytes)
