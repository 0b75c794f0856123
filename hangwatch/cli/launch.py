"""`hangwatch run -- CMD`: start the server as our child, its output in a log file we also echo.

The server writes straight into the log file (not into a pipe we read): its output never depends
on hangwatch reading fast enough, and it keeps running with a working stdout after a readiness
gate (`--exit-on ready`) lets hangwatch exit. hangwatch copies new bytes of the file to the
terminal. The server runs in its own session, so the terminal's Ctrl-C reaches hangwatch only,
which forwards it to the server's whole process group (the launcher and every rank).
"""

from __future__ import annotations

import codecs
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Launched", "launch", "default_log_path"]

_CHUNK = 1 << 20


def default_log_path(now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return Path(f"hangwatch-run-{stamp}.log")


@dataclass
class Launched:
    popen: subprocess.Popen
    log_path: Path
    _offset: int = 0
    _decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    _signals_sent: int = 0
    stopped_by: int | None = None  # the first stop signal forwarded: the exit that follows is a stop
    on_stop: Callable[[int], None] | None = None  # told of each forwarded stop signal (the watcher)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def pump(self, echo: Callable[[str], None]) -> None:
        """Copy what the server wrote since the last call to `echo` (the terminal)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read(_CHUNK)
        except OSError:
            return
        self._offset += len(data)
        text = self._decoder.decode(data)
        if text:
            echo(text)

    def forward(self, signum: int, frame: object = None) -> None:
        """A signal handler: pass SIGINT/SIGTERM on to the server's group; the third one kills it."""
        self._signals_sent += 1
        self.stopped_by = self.stopped_by or signum
        if self.on_stop is not None:
            self.on_stop(signum)
        self._killpg(signal.SIGKILL if self._signals_sent >= 3 else signum)

    def install_forwarding(self) -> None:
        """Forward SIGINT, SIGTERM and SIGHUP, except one hangwatch was started ignoring: the server
        inherited it ignored too (`nohup`, a script's `cmd &`), as if started without hangwatch, and
        a forwarded one would do nothing but mark a stop that never comes."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, self.forward)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM to the group, SIGKILL after `grace_s`; returns the launcher's exit status."""
        if self.popen.poll() is None:
            self._killpg(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._killpg(signal.SIGKILL)
                self.popen.wait(timeout=grace_s)
        self.reap_group()
        return self.popen.returncode

    def reap_group(self) -> None:
        """Kill what is left of the server's group (ranks orphaned by a crashed launcher)."""
        self._killpg(signal.SIGKILL)

    def _killpg(self, signum: int) -> None:
        signal_group(self.popen, signum)


def signal_group(leader: subprocess.Popen[Any], signum: int) -> None:
    """Signal the process group `leader` heads (it was started in a new session).

    A group's id is its leader's pid. Once the leader is reaped, the kernel may give that number to a
    new process, but only when no member of the group still holds it: a process *at* that pid after
    the reap is a stranger (and our group is empty), so nothing is sent. A stranger heading its own
    session would otherwise lose its whole group (a parallel test run did, on a 32768-pid host).
    """
    if leader.returncode is not None and os.path.exists(f"/proc/{leader.pid}"):
        return
    try:
        os.killpg(leader.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def launch(cmd: Sequence[str], log_path: Path, *, env: dict[str, str] | None = None) -> Launched:
    """Start `cmd` in a new session with stdout+stderr appended to `log_path`."""
    env = dict(os.environ if env is None else env)
    # a Python server writing to a file block-buffers print(): the log would lag by kilobytes
    env.setdefault("PYTHONUNBUFFERED", "1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    offset = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            list(cmd), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    return Launched(popen, log_path, _offset=offset)
