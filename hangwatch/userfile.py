"""One file the user names (rules, --gpus-from recordings, token files, expected.json), read safely.

It sits below every layer: the rule loader (classify/), the CLI and the sinks all read such files,
and none of them should reach into another's package for it (a bundle, many files at once, is
hangwatch.bundle.archive's).
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["read_user_file"]


def read_user_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a file the user named, at most `limit` of them. A FIFO would block `open()` and
    `read()` for ever and /dev/zero never ends: it is opened without blocking and must be a regular
    file; a larger one is refused, not cut (a cut JSON or token is a worse error). Raises OSError,
    whose strerror says why, so every caller's own `except OSError` names the file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket)")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // 1024} KiB")
    return data
