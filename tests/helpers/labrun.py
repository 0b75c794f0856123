"""Start lab scenarios (`lab/run.py`) from a test and stop every one of them at teardown."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

from hangwatch.cli.launch import signal_group
from helpers.paths import ROOT

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
ONSET_TIMEOUT_S = 600  # a start on 2 shared cores under load
HELD_PREFIX = "lab-held-"  # xdist_group of the tests that watch one held run of a scenario


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


class HeldScenarios:
    """Lab scenarios that hang for good (no timeout ends them), each started once and watched by
    every test that only observes it: one real start instead of one per test (a start costs 20-60 s
    of both cores). A test that uses one is marked `pytest.mark.xdist_group("lab-held-SCENARIO")`,
    so that under xdist (`--dist loadgroup`) all of them run on the worker that holds it; the run is
    stopped after the last of them (`release`)."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self._runs: dict[str, tuple[subprocess.Popen[str], dict[str, Any], float]] = {}
        self._events: dict[str, list[dict[str, Any]]] = {}

    def stuck(self, scenario: str) -> tuple[dict[str, Any], float]:
        """(header, onset epoch) of the scenario's held run, started (and waited into its hang)
        on first use; a run that has since exited fails the test that asks for it."""
        if scenario not in self._runs:
            onset = self._tmp / f"{scenario}.onset.json"
            proc = subprocess.Popen([sys.executable, str(ROOT / "lab" / "run.py"), scenario, "--hold", "7200",
                                     "--onset-file", str(onset)], stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "HANGWATCH_LAB_PYTHON": LAB_PYTHON}, start_new_session=True)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                _stop(proc)
                raise AssertionError(f"lab scenario {scenario} did not start (exit {proc.returncode})")
            self._runs[scenario] = proc, json.loads(line), _onset(onset, proc, scenario)
        proc, header, at = self._runs[scenario]
        assert proc.poll() is None, f"the held {scenario} run (lab/run.py pid {proc.pid}) has exited"
        return header, at

    def events(self, scenario: str) -> list[dict[str, Any]]:
        """The events the held run printed up to its onset (lab/run.py prints one JSON line each, and
        the onset's before it writes the onset file): e.g. each node's `launched`, with its pid and log."""
        assert scenario in self._runs, f"{scenario} is not held"
        proc = self._runs[scenario][0]
        assert proc.stdout is not None
        seen = self._events.setdefault(scenario, [])
        while not any(event.get("event") == "onset" for event in seen):
            line = proc.stdout.readline()
            assert line, f"the held {scenario} run ended before its onset was read (exit {proc.poll()})"
            seen.append(json.loads(line))
        return seen

    def alive(self, scenario: str) -> bool:
        return scenario in self._runs and self._runs[scenario][0].poll() is None

    def release(self, still_needed: Iterable[str]) -> None:
        """Stop the held runs no test to come asks for."""
        needed = set(still_needed)
        for scenario in [s for s in self._runs if s not in needed]:
            _stop(self._runs.pop(scenario)[0])

    def close(self) -> None:
        self.release(())


def wait_onset(path: Path, alive: Callable[[], bool] = lambda: True) -> float | None:
    """The onset epoch lab/run.py writes to its --onset-file `path` when the hang begins (read once
    it parses); None if the run ends or ONSET_TIMEOUT_S passes first."""
    deadline = time.monotonic() + ONSET_TIMEOUT_S
    while time.monotonic() < deadline and alive():
        with contextlib.suppress(OSError, ValueError, KeyError):
            return float(json.loads(path.read_text())["t"])
        time.sleep(0.5)
    return None


def _onset(path: Path, proc: subprocess.Popen[str], scenario: str) -> float:
    at = wait_onset(path, lambda: proc.poll() is None)
    if at is None:
        _stop(proc)
        raise AssertionError(f"{scenario} never reached its onset (lab/run.py exit {proc.returncode})")
    return at


def held_groups(items: Iterable[Any]) -> set[str]:
    """The held scenarios the test items ask for, by their `xdist_group` marks."""
    groups = set()
    for item in items:
        for mark in item.iter_markers("xdist_group"):
            name = mark.args[0] if mark.args else mark.kwargs.get("name", "")
            if name.startswith(HELD_PREFIX):
                groups.add(name.removeprefix(HELD_PREFIX))
    return groups


def _stop(proc: subprocess.Popen[str]) -> None:
    signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        signal_group(proc, signal.SIGKILL)
    if proc.stdout is not None:
        proc.stdout.close()
