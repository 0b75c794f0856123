"""Real processes for the live tests: the test server (programs/), and hangwatch itself.

Everything started here runs in its own session and is killed by process group at teardown,
every wait has a timeout, and the test server's ranks die with their launcher (PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hangwatch.cli.launch import signal_group
from hangwatch.sources.procs import start_time
from helpers.liveprocs import kill_group, started_at
from helpers.paths import PROGRAMS

LAUNCHER = PROGRAMS / "sglang" / "launch_server.py"
HANGWATCH = [str(Path(sys.executable).parent / "hangwatch")]  # the installed entry point


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_cmd(port: int) -> list[str]:
    return [sys.executable, str(LAUNCHER), "--model-path", "/models/tiny", "--tp-size", "2", "--port", str(port)]


class Procs:
    """Starts processes in new sessions; `stop()` kills each whole group."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []
        self.foreign: dict[int, float | None] = {}  # groups a child of ours started (leader pid -> its start)

    def adopt_group(self, leader: int) -> None:
        """Kill the group `leader` heads (started by a child of ours, e.g. `hangwatch run`'s server) at teardown."""
        self.foreign[leader] = start_time(leader)

    def server(self, mode: str, log: Path, **env: str) -> subprocess.Popen[bytes]:
        fh = open(log, "wb")
        try:
            proc = self.start(server_cmd(free_port()), stdout=fh, stderr=subprocess.STDOUT, env=_env(HW_MODE=mode, **env))
        finally:
            fh.close()
        return proc

    def hangwatch(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("env", _env())
        return self.start([*HANGWATCH, *args], **kwargs)

    def start(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(list(argv), start_new_session=True, **kwargs)
        self.started.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.started:
            signal_group(proc, signal.SIGKILL)
        for leader, started in self.foreign.items():
            kill_group(leader, started_at(started))
        for proc in self.started:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # py-spy of the venv
    env.pop("HANGWATCH_TOKEN", None)
    return env


def wait_for_text(path: Path, text: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path} after {timeout_s}s:\n{path.read_text(errors='replace') if path.exists() else '(none)'}")


def json_lines(proc: subprocess.Popen[bytes], timeout_s: float) -> Iterator[dict[str, Any]]:
    """Verdict lines of a running `hangwatch --json`, until it exits or `timeout_s` passes."""
    import selectors

    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    buffer = b""
    while time.monotonic() < deadline:
        if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)
    selector.close()


def finish(proc: subprocess.Popen[bytes], timeout_s: float) -> tuple[int, list[dict[str, Any]], str]:
    """Wait for a `hangwatch --json` run: (exit code, its verdict lines, its stderr)."""
    out, err = proc.communicate(timeout=timeout_s)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    return proc.returncode, lines, err.decode(errors="replace")
