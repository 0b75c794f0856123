"""Start lab scenarios (`lab/run.py`) from a test and stop every one of them at teardown."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, Protocol

from helpers.paths import ROOT


class Start(Protocol):
    def __call__(self, name: str, *args: str) -> dict[str, Any]: ...


@contextlib.contextmanager
def lab_runs(env: dict[str, str], hold_s: int = 900) -> Iterator[Start]:
    """`start(name, *run_py_args)` runs one scenario in its own session and returns its first event
    (`{"pid", "log", ...}`); on exit each is stopped by its process group (lab/run.py stops what
    it started: SIGTERM, then SIGKILL for what is left)."""
    started: list[subprocess.Popen[str]] = []

    def start(name: str, *args: str) -> dict[str, Any]:
        proc = subprocess.Popen([sys.executable, str(ROOT / "lab" / "run.py"), name, "--hold", str(hold_s), *args],
                                stdout=subprocess.PIPE, text=True, env={**os.environ, **env}, start_new_session=True)
        started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"lab scenario {name} did not start (exit {proc.wait(timeout=30)})"
        return json.loads(line)

    try:
        yield start
    finally:
        for proc in started:
            _stop(proc)


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # already gone with its whole group
        pass
    if proc.stdout is not None:
        proc.stdout.close()
