"""`hangwatch attach PID` with no --log on the real SGLang server (CPU) whose output goes into a
pipe: behind `| tee LOG` it finds tee's file and gives the same verdicts as with --log; behind a
wrapper that holds no file open it finds no log and takes `ready` from SGLang's own /ready.

(The server writing its log itself, as with a shell's `> LOG 2>&1`, is test_lab.py's `healthy`.)
Slow: a TP=2 start takes 60-150 s on two shared cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.labrun import lab_runs

ROOT = Path(__file__).resolve().parents[2]
HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
START_TIMEOUT_S = 400

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


@pytest.fixture
def lab() -> Iterator[Callable[[str, str], dict[str, Any]]]:
    with lab_runs({"HANGWATCH_LAB_PYTHON": LAB_PYTHON}) as start:
        yield lambda name, output: start(name, "--output", output)


def _attach(pid: int, *extra: str) -> list[dict[str, Any]]:
    argv = [HANGWATCH, "attach", str(pid), "--json", "--exit-on", "ready,stalled,crashed", "--timeout", str(START_TIMEOUT_S), *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S + 60, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr
    return lines


def _sources(verdict: dict[str, Any]) -> set[str]:
    return {m["source"] for m in verdict["missing"]}


def test_behind_tee_the_log_is_found_and_verdicts_match_with_log(lab: Any) -> None:
    # GIVEN the real server, TP=2, started as `python -m sglang.launch_server ... 2>&1 | tee -a LOG`
    header = lab("healthy-tp2", "tee")
    # WHEN two hangwatches watch it at once, one finding the log itself, one told --log
    with_log: list[list[dict[str, Any]]] = []
    other = threading.Thread(target=lambda: with_log.append(_attach(header["pid"], "--log", header["log"])))
    other.start()
    found = _attach(header["pid"])
    other.join(timeout=START_TIMEOUT_S + 90)
    given = with_log[0]
    # THEN both end ready with each rank's phases, and neither misses the log
    end_found, end_given = found[-1], given[-1]
    assert end_found["state"] == "ready", json.dumps(end_found, indent=1)[:3000]
    assert {"TP0", "TP1"} <= set(end_found["phases"]), end_found["phases"]
    assert "log" not in _sources(end_found)
    # the same verdicts: the same ending, phases and cause; a healthy start is never called stalled
    keys = ("state", "cause", "phase", "phases")
    assert {k: end_found[k] for k in keys} == {k: end_given[k] for k in keys}
    for run in (found, given):
        assert [v for v in run if v["state"] in ("stalled", "crashed")] == []
    assert [v["state"] for v in found][-1:] == [v["state"] for v in given][-1:]


def test_without_a_readable_log_ready_comes_from_the_engines_endpoint(lab: Any) -> None:
    # GIVEN the real server behind a shell loop that appends each line and holds no file open
    header = lab("healthy", "line-loop")
    # WHEN hangwatch attaches with no --log
    lines = _attach(header["pid"])
    # THEN it says what it tried for the log, is not ready while the server starts, and is
    # ready once SGLang's /ready answers 200 (after the warm-up request, not when the port opens)
    first, last = lines[0], lines[-1]
    assert first["state"] != "ready"
    log_missing = [m for m in last["missing"] if m["source"] == "log"]
    assert log_missing and "writes no regular file" in log_missing[0]["reason"], last["missing"]
    assert last["state"] == "ready", json.dumps(last, indent=1)[:3000]
    assert last["evidence"][0]["text"] == f"GET http://127.0.0.1:{header['port']}/ready answered 200 OK"
    assert last["evidence"][0]["source"].startswith("endpoint")
