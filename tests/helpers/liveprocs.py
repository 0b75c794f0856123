"""Real child processes for source and discovery tests: started, waited for, always stopped.

`Spawner` starts children and kills whatever is left at teardown (each wait has a timeout);
`start_fake_server` runs a fake launcher from tests/data/fake_servers (see its README).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hangwatch.cli.launch import signal_group
from hangwatch.sources.procs import start_time
from helpers.paths import DATA

FAKE_SERVERS = DATA / "fake_servers"
MODULES = {"sglang": "sglang.launch_server", "vllm": "vllm.entrypoints.openai.api_server", "tinyserve": "tinyserve.serve"}


class Spawner:
    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.titled: dict[int, tuple[str, float | None]] = {}  # grandchildren (fake ranks): pid -> (title, start)

    def start(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        # its own session: stop() kills the whole group, grandchildren (a shell's children) too
        proc = subprocess.Popen(list(argv), start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def python(self, code: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        return self.start([sys.executable, "-c", code], **kwargs)

    def ready(self, code: str, ready_file: Path, timeout_s: float = 10.0, **kwargs: Any) -> tuple[subprocess.Popen[bytes], Any]:
        """Run `code` with HW_READY=ready_file in its env; wait until it writes that JSON file."""
        env = {**os.environ, **kwargs.pop("env", {}), "HW_READY": str(ready_file)}
        proc = self.python(code, env=env, **kwargs)
        return proc, wait_json(ready_file, proc, timeout_s)

    def adopt(self, pid: int, title: str) -> None:
        """Kill `pid` (started by a child of ours, carrying `title`) at teardown if it is still that process."""
        self.titled[pid] = (title, start_time(pid))

    def stop(self) -> None:
        for pid, (title, started) in self.titled.items():
            _kill_titled(pid, title, started)
        for proc in self.procs:
            signal_group(proc, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def wait_json(path: Path, proc: subprocess.Popen[bytes] | None, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return json.loads(path.read_text())
            except ValueError:
                pass  # caught mid-write: read again
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"child exited with {proc.returncode} before it was ready")
        time.sleep(0.02)
    raise TimeoutError(f"{path} not written within {timeout_s} s")


def wait_until(predicate: Any, timeout_s: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("condition not met in time")


def start_fake_server(
    spawner: Spawner, tmp: Path, engine: str = "sglang", args: Sequence[str] = (), *,
    log: Path | None = None, env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """A fake launcher (python -m sglang.launch_server ARGS); returns it and {"pid", "children"}."""
    ready = tmp / f"ready-{engine}-{len(spawner.procs)}.json"
    full_env = {**os.environ, "PYTHONPATH": str(FAKE_SERVERS), "HW_READY": str(ready), **(env or {})}
    out = open(log, "ab") if log else subprocess.DEVNULL
    try:
        proc = spawner.start([sys.executable, "-m", MODULES[engine], *args], env=full_env, stdout=out, stderr=out)
    finally:
        if log:
            out.close()
    info = wait_json(ready, proc, 15.0)
    for title, pid in info["children"].items():
        spawner.adopt(pid, title)
    return proc, info


def _kill_titled(pid: int, title: str, started: float | None) -> None:
    """Kill a fake rank that outlived its launcher, only if the pid is still that process (a test
    running beside this one may have been given the number, and the same title)."""
    try:
        if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(title.encode()):
            return
    except OSError:
        return
    if started is None or start_time(pid) != started:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
