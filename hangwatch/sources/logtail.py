"""Follow a server log: new complete lines since the last call, like `tail -F`.

Starting on a large existing log seeks to its last few MiB (never reads the whole file); a
rotated log (new inode at the path) is read from its start after the old file is drained; a
truncated log (copytruncate, `> server.log`) is read again from offset 0.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from hangwatch.errors import SourceUnavailable

__all__ = ["LogTail"]

_MAX_READ = 4 * 2**20  # bytes per call: one tick must stay cheap even when the log floods
_MAX_PENDING = 1 * 2**20  # a "line" without "\n" this long is returned anyway (a stuck tqdm bar)


class LogTail:
    """New complete bytes of a log file per `read_new()` call.

    `start_tail_bytes`: on the first open, start this many bytes before the end, moved forward
    to the next line start. Bytes after the last "\\n" wait for the next call, so a caller never
    sees half a line; `bytes_seen` counts them at once (a tqdm bar redrawn with "\\r" only is
    progress even before its line ends).
    """

    def __init__(self, path: str | os.PathLike[str], *, start_tail_bytes: int = 2 * 2**20, max_read_bytes: int = _MAX_READ):
        self.path = os.fspath(path)
        self.start_tail_bytes = start_tail_bytes
        self.max_read_bytes = max_read_bytes
        self.bytes_seen = 0  # bytes read from the log(s) so far, complete lines or not
        self.rotations = 0
        self._fh: BinaryIO | None = None
        self._pos = 0
        self._pending = b""
        self._skip_to_newline = False  # after a mid-file start: drop the partial first line
        self._first_open = True
        self._open_at_start()

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def read_new(self) -> bytes:
        """Complete new bytes (ending in "\\n"), at most about `max_read_bytes` per call."""
        if self._fh is None and not self._open():
            return b""
        data = self._read_current()
        if not data and self._rotated():
            data = self._read_current()  # the old file is drained; continue in the new one
        return self._complete_lines(data)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> LogTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals

    def _open_at_start(self) -> None:
        """The start position is the end of the log as it is now, not at the first read."""
        try:
            self._open()
        except SourceUnavailable:
            pass  # read_new() raises it again, where the caller records it as Missing
        if self._fh is None:
            self._first_open = False  # a log created after we started is read from its start

    def _open(self) -> bool:
        try:
            self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open across calls, closed in close()
        except FileNotFoundError:
            return False  # not written yet: the server has not started logging
        except OSError as exc:
            raise SourceUnavailable("log", f"cannot read {self.path}: {exc.strerror or exc}", "run hangwatch as the server's user, or pass --log") from exc
        self._pos, self._pending = 0, b""
        if self._first_open:
            self._first_open = False
            self._seek_tail()
        return True

    def _seek_tail(self) -> None:
        assert self._fh is not None
        size = os.fstat(self._fh.fileno()).st_size
        if size > self.start_tail_bytes:
            # start one byte early: if that byte is "\n" the tail starts on a line start
            self._pos = size - self.start_tail_bytes - 1
            self._skip_to_newline = True

    def _read_current(self) -> bytes:
        assert self._fh is not None
        size = os.fstat(self._fh.fileno()).st_size
        if size < self._pos:  # truncated in place
            self._pos, self._pending, self._skip_to_newline = 0, b"", False
        if size == self._pos:
            return b""
        self._fh.seek(self._pos)
        data = self._fh.read(min(size - self._pos, self.max_read_bytes))
        self._pos += len(data)
        self.bytes_seen += len(data)
        return data

    def _rotated(self) -> bool:
        """True (and reopened) when the path now names another file than the one we read."""
        assert self._fh is not None
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            return False  # renamed away, the new one not created yet: keep the old handle
        except OSError:
            return False
        held = os.fstat(self._fh.fileno())
        if (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev):
            return False
        tail = self._pending
        self.close()
        self.rotations += 1
        if not self._open():
            return False
        # the old file's unfinished last line ended with that file: flush it as a line of its own
        self._pending = tail + b"\n" if tail else b""
        return True

    def _complete_lines(self, data: bytes) -> bytes:
        data = self._pending + data
        if self._skip_to_newline:
            cut = data.find(b"\n")
            if cut < 0:
                self._pending = b""
                return b""
            data, self._skip_to_newline = data[cut + 1 :], False
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) >= _MAX_PENDING:
            end = len(data)  # a line that never ends must not grow without bound
        self._pending = data[end:]
        return data[:end]
