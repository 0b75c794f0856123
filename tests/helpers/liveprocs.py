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
from collections.abc import Callable, Sequence
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


def comm(pid: int) -> str:
    """The process's name as the kernel keeps it (its program's, 15 bytes at most); "" once gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def pipe_reader(pid: int) -> int:
    """The process reading the pipe that `pid`'s stderr goes into (waited for: a pipeline starts its
    members at once)."""
    from hangwatch.sources.logfind import pipe_readers

    link = os.readlink(f"/proc/{pid}/fd/2")
    return int(wait_until(lambda: pipe_readers(link, exclude=pid))[0])


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


def kill_group(leader: int, still_ours: Callable[[int], bool]) -> None:
    """SIGKILL the group `leader` headed, a session one of our children started (`hangwatch run`'s
    server) and so never reaped by us. A process at that pid now must pass `still_ours`; with none
    there, no stranger holds the id either (the kernel reuses a pid only once no group holds it), so
    what is left of the group (orphaned ranks) is ours."""
    if os.path.exists(f"/proc/{leader}") and not still_ours(leader):
        return
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def started_at(started: float | None) -> Callable[[int], bool]:
    """`still_ours` for a leader whose start was read while it ran."""
    return lambda pid: started is not None and start_time(pid) == started


def running(*words: str) -> Callable[[int], bool]:
    """`still_ours` for a leader known only afterwards (a pid in the output): its command line holds
    `words`, one after another (a test's own `--port N`)."""
    needle = b"\0".join(word.encode() for word in words) + b"\0"

    def check(pid: int) -> bool:
        try:
            return needle in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False

    return check
