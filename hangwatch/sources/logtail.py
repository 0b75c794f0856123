"""Follow a server log: new complete lines since the last call, like `tail -F`.

Starting on a large existing log seeks to its last few MiB (never reads the whole file); a
rotated log (new inode at the path) is read from its start after the old file is drained; a
truncated log (copytruncate, `> server.log`) is read again from offset 0, also when the new
content outgrew the old offset within one tick (the file's first bytes changed).

The path is not trusted: whoever can write the log's folder could swap the log for a link to a
file only hangwatch may read (it then serves the log on /bundle), or for a FIFO that blocks
`open()` for ever. So the path is resolved once, at the first open; every later open is
`O_NOFOLLOW | O_NONBLOCK` on that resolved path, and only a regular file owned by the first
file's owner is read. Anything else is reported as unavailable, and the loop goes on.

A path that discovery found (the watched side named it: a tee's argument, a runtime's flag) comes
with a `LogGuard` and is not even followed once: the first open is as guarded as every re-open,
and the file must be one the server's own user may read (or a verified runtime's root-owned log).
A /proc/PID/fd/N path is never resolved to its link text (that text, `x.log (deleted)`, is a name
anyone may have created since): the kernel's link is opened as it is, and fstat is checked.
"""

from __future__ import annotations

import os
import re
import stat
from typing import TYPE_CHECKING, BinaryIO

from hangwatch.errors import SourceUnavailable

if TYPE_CHECKING:
    from hangwatch.sources.logfind import LogGuard

__all__ = ["LogTail"]

_MAX_READ = 256 * 2**10  # bytes per call: the watch loop reads a flood in steps and stops at its per-tick budget
_MAX_PENDING = 1 * 2**20  # a "line" without "\n" this long is returned anyway (a stuck tqdm bar)
_HEAD = 1024  # bytes of the file's start kept as its fingerprint (truncated and regrown within a tick)
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_FD_LINK = re.compile(r"(?:^|/)proc/\d+/fd/\d+$")  # /proc/PID/fd/N (or /host/proc/…): the kernel's own link


class LogTail:
    """New complete bytes of a log file per `read_new()` call.

    `start_tail_bytes`: on the first open, start this many bytes before the end, moved forward
    to the next line start. Bytes after the last "\\n" wait for the next call, so a caller never
    sees half a line; `bytes_seen` counts them at once (a tqdm bar redrawn with "\\r" only is
    progress even before its line ends).
    """

    def __init__(self, path: str | os.PathLike[str], *, start_tail_bytes: int = 2 * 2**20, max_read_bytes: int = _MAX_READ,
                 guard: LogGuard | None = None):
        self.path = os.fspath(path)
        self.guard = guard
        self.start_tail_bytes = start_tail_bytes
        self.max_read_bytes = max_read_bytes
        self._start_end = 0  # where the file ended when first opened: up to there is the start tail
        self._start_at = 0  # where the start tail began (0: the whole file is read)
        self.bytes_seen = 0  # bytes read from the log(s) so far, complete lines or not
        self.rotations = 0
        self._fh: BinaryIO | None = None
        self._pos = 0
        self._pending = b""
        self._skip_to_newline = False  # after a mid-file start: drop the partial first line
        self._first_open = True
        self._owner: int | None = None  # uid of the first file opened: a swapped-in file must have it too
        self._head = b""
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

    @property
    def start_offset(self) -> int:
        """Where the first read began in the file opened first: 0 unless a start tail was cut."""
        return self._start_at

    def read_at(self, offset: int, size: int) -> bytes:
        """`size` bytes of the file held from `offset` (pread: the read position is untouched);
        the part of a big log before its start tail is searched this way (watch/livesources.py)."""
        if self._fh is None or size <= 0:
            return b""
        return os.pread(self._fh.fileno(), size, offset)

    @property
    def offset(self) -> int:
        """The read position in the held file."""
        return self._pos

    def backlog(self) -> int:
        """Bytes the held file has that were not read yet (a burst outgrowing the reads)."""
        if self._fh is None:
            return 0
        return max(0, os.fstat(self._fh.fileno()).st_size - self._pos)

    def skip(self, size: int) -> int:
        """Drop the next `size` unread bytes of the held file, unread, up to the next line start;
        returns the bytes dropped (counted in `bytes_seen`: the log did grow)."""
        if self._fh is None or size <= 0:
            return 0
        # stop one byte early: if that byte is "\n" the next read starts on a line start
        size = min(size, self.backlog()) - 1
        if size <= 0:
            return 0
        self._pos += size
        self.bytes_seen += size
        self._pending, self._skip_to_newline = b"", True
        return size

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
        fh = self._open_file()
        if fh is None:
            return False
        self._fh, self._head = fh, b""
        self._pos, self._pending = 0, b""
        if self._first_open:
            self._first_open = False
            self._seek_tail()
        return True

    def _open_file(self) -> BinaryIO | None:
        """The log opened safely, or None when it does not exist (yet); SourceUnavailable when refused."""
        fd_link = _FD_LINK.search(self.path) is not None
        if self._owner is None and self.guard is None and not fd_link:
            self.path = os.path.realpath(self.path)  # a link given by the user is followed once, here
        try:
            fd = os.open(self.path, _OPEN_FLAGS & ~os.O_NOFOLLOW if fd_link else _OPEN_FLAGS)
        except FileNotFoundError:
            return None  # not written yet: the server has not started logging
        except OSError as exc:
            why = "it is now a symbolic link" if exc.errno == 40 else exc.strerror or str(exc)  # ELOOP
            raise SourceUnavailable("log", f"cannot read {self.path}: {why}", "run hangwatch as the server's user, or pass --log") from exc
        st = os.fstat(fd)
        problem = _refusal(st, self._owner) or _not_theirs(st, self.guard)
        if problem:
            os.close(fd)
            raise SourceUnavailable("log", f"refusing to read {self.path}: {problem}", "pass --log PATH to read a log the watched side did not choose")
        self._owner = st.st_uid
        return os.fdopen(fd, "rb")

    def _seek_tail(self) -> None:
        assert self._fh is not None
        size = os.fstat(self._fh.fileno()).st_size
        self._start_end = size
        if size > self.start_tail_bytes:
            # start one byte early: if that byte is "\n" the tail starts on a line start
            self._pos = self._start_at = size - self.start_tail_bytes - 1
            self._skip_to_newline = True

    def _read_current(self) -> bytes:
        assert self._fh is not None
        size = os.fstat(self._fh.fileno()).st_size
        if size < self._pos or not self._same_head():  # truncated in place (and maybe regrown since)
            self._pos, self._pending, self._skip_to_newline, self._head = 0, b"", False, b""
        if size == self._pos:
            return b""
        self._fh.seek(self._pos)
        # the start tail comes whole (a verdict at attach needs it); a flood afterwards in steps
        limit = max(self.max_read_bytes, self._start_end - self._pos)
        data = self._fh.read(min(size - self._pos, limit))
        self._pos += len(data)
        self.bytes_seen += len(data)
        return data

    def _same_head(self) -> bool:
        """The file still starts with the bytes it started with; the fingerprint grows up to _HEAD."""
        assert self._fh is not None
        fd = self._fh.fileno()
        if self._head and os.pread(fd, len(self._head), 0) != self._head:
            return False
        if len(self._head) < _HEAD:
            self._head = os.pread(fd, _HEAD, 0)
        return True

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
        try:
            fresh = self._open_file()  # before closing the old one: a refused swap keeps what we had
        except SourceUnavailable:
            return False
        if fresh is None:
            return False
        self.close()
        self.rotations += 1
        self._fh, self._head, self._pos, self._pending = fresh, b"", 0, b""
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


def _refusal(st: os.stat_result, owner: int | None) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a FIFO, device or socket would block or never end)"
    if owner is not None and st.st_uid != owner:
        return f"owned by uid {st.st_uid}, not by uid {owner} like the log it replaced"
    return None


def _not_theirs(st: os.stat_result, guard: LogGuard | None) -> str | None:
    """Why the server's own user could not read this file (so neither may the API), or None."""
    if guard is None or guard.uid == 0 or (guard.runtime and st.st_uid == 0):
        return None
    if st.st_uid == guard.uid and st.st_mode & stat.S_IRUSR:
        return None
    if st.st_uid != guard.uid and st.st_gid in guard.gids and st.st_mode & stat.S_IRGRP:
        return None
    if st.st_uid != guard.uid and st.st_gid not in guard.gids and st.st_mode & stat.S_IROTH:
        return None
    who = f"uid {guard.uid}" if guard.uid >= 0 else "an unknown user"
    return f"the server's user ({who}) could not read it (owner uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})"
