"""What model a server loads, as an identity that two starts of the same setup share and two
different setups do not: the key of the learned budgets (watch.budgets.SetupKey).

    model_identity("models/llama", pid=1234) -> "/srv/app/models/llama#cfg:3f2a9c0d1e4b"

`--model-path models/llama` is text: relative to the server's working directory, and the same
text in another directory is another model. A path is resolved the way the server resolves it
(against /proc/PID/cwd, inside its root: /proc/PID/root, so a container's paths work from the
host); the key is that absolute path plus a hash of its config.json content, so a checkpoint
swapped under the same path is another setup. A hub id (`Qwen/Qwen3-8B`) that is no path there
is its own identity. Never raises: a path hangwatch cannot read keeps its resolved text.
"""

from __future__ import annotations

import hashlib
import os
import posixpath

__all__ = ["model_identity"]

_CONFIG_BYTES = 1 << 20  # a config.json is a few KB; a huge one is not read whole


def model_identity(model: str, pid: int | None, *, proc_root: str = "/proc") -> str:
    if not model or pid is None:
        return model
    cwd = _readlink(f"{proc_root}/{pid}/cwd")
    absolute = model if model.startswith("/") else posixpath.join(cwd, model) if cwd else None
    if absolute is None:
        return model
    absolute = posixpath.normpath(absolute)
    here = f"{proc_root}/{pid}/root{absolute}"  # the server's view of the file system, from here
    if not os.path.exists(here):
        # not a path the server can see: a hub id, or a path given relative that it does not hold
        return model if not model.startswith((".", "/")) else absolute
    digest = _config_digest(here)
    return f"{absolute}#cfg:{digest}" if digest else absolute


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _config_digest(directory: str) -> str | None:
    try:
        with open(os.path.join(directory, "config.json"), "rb") as fh:
            return hashlib.sha256(fh.read(_CONFIG_BYTES)).hexdigest()[:12]
    except OSError:
        return None
