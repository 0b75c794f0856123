"""Processes for the page tests: hangwatch agents serving the page, the small test server, waits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hangwatch.cli.launch import signal_group

ROOT = Path(__file__).resolve().parents[2]
HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
PROGRAMS = ROOT / "tests" / "integration" / "programs"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str, token: str | None = None, timeout: float = 5.0) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.25,
               on_timeout: Callable[[], Any] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    more = f"; {on_timeout()!r}" if on_timeout else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}{more}"[:6000])


class Procs:
    """Processes started in their own sessions; `stop()` kills each whole group."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str], name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        path_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    **(env or {})}
        with open(self.tmp / f"{name}.out", "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=path_env)
        self.started.append(proc)
        return proc

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text(errors="replace")

    def agent(self, pid: int, name: str = "agent", *, log: str | None = None, token: str | None = None) -> str:
        """`hangwatch attach PID --serve` on a free port; returns its URL once /healthz answers."""
        argv = [HANGWATCH, "attach", str(pid), "--serve"]
        argv += ["--log", log] if log else []
        argv += ["--token", token] if token else []
        return self.serve(argv, name)

    def serve(self, argv: list[str], name: str, timeout: float = 60.0, started: tuple[subprocess.Popen[bytes], int] | None = None) -> str:
        """`argv --port PORT` on a free port (or the one `started` already runs on); its URL once
        /healthz answers. A port taken between the pick and the bind (bind(0) draws from the ephemeral
        range every client socket on the host draws from too) is picked again, up to 5 times."""
        for _ in range(5):
            proc, port = started or self.start_on_free_port(argv, name)
            started = None
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                with contextlib.suppress(OSError, ValueError):
                    if get_json(url + "/healthz")["status"] == "ok":
                        return url
                time.sleep(0.25)
            if proc.poll() is None:
                raise AssertionError(f"{name} did not serve on {url} within {timeout:.0f} s: {self.output(name)[-2000:]}")
            if "Address already in use" not in self.output(name):
                raise AssertionError(f"hangwatch exited {proc.returncode}: {self.output(name)[-2000:]}")
        raise AssertionError(f"{name}: five free ports were taken before it could bind one")

    def start_on_free_port(self, argv: list[str], name: str) -> tuple[subprocess.Popen[bytes], int]:
        port = free_port()
        return self.start([*argv, "--port", str(port)], name), port

    def stop(self) -> None:
        for proc in self.started:
            signal_group(proc, signal.SIGTERM if "lab/run.py" in " ".join(map(str, proc.args)) else signal.SIGKILL)
        for proc in self.started:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=10)


def start_test_server(procs: Procs, tmp_path: Path, mode: str, **env: str) -> subprocess.Popen[bytes]:
    """The small real test server (tests/integration/programs) in `mode`; its FIFO, when it needs one, in tmp_path."""
    fifo = tmp_path / "weights.fifo"
    if mode == "fifo_rank" and not fifo.exists():
        os.mkfifo(fifo)
    argv = [sys.executable, str(PROGRAMS / "sglang" / "launch_server.py"), "--model-path", "/models/tiny",
            "--tp-size", "2", "--port", str(free_port())]
    return procs.start(argv, "server", env={"HW_MODE": mode, "HW_FIFO": str(fifo), **env})
