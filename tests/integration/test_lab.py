"""`hangwatch attach` on the real SGLang server (CPU) in each lab scenario: state and cause.

Runs when HANGWATCH_LAB_PYTHON is set or the lab venv (.lab-venv) exists; `python lab/run.py
SCENARIO` starts the scenario and prints {"pid", "log", "port"}. A scenario that fails to start
fails its test. Slow: a TP=2 start takes 30-60 s on two shared cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.labrun import HELD_PREFIX, HeldScenarios, Start, lab_runs
from helpers.paths import ROOT
from lab.expected import EXPECTED, is_right

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
START_TIMEOUT_S = 300  # lab.scenarios.ONSET_TIMEOUT_S: a TP=2 start on 2 shared cores

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]

# Scenarios whose very start another test already watches to the same verdict: a start costs 30-60 s
# of both cores, so each is started once in CI
WATCHED_ELSEWHERE = {
    "healthy": "test_lab_pipes.py (attach to TP=2 behind tee, and to TP=1 without a log) and "
               "test_engine_words_lab.py (run, to ready)",
    "two-node-missing": "test_lab_stops.py's joined-title launcher (the same start, stalled multinode_rendezvous)",
    "hs-dump-patch": "test_remedy_lab.py's user patch (the same patch, stalled patch_or_user_code)",
    "healthy-tp2": "test_lab_pipes.py",
}
# Each ends on one verdict hangwatch gates on; two-node-late (stalls, then resolves) and kv-slow
# (slow, never stalled) have tests of their own
ONE_VERDICT = sorted(name for name in EXPECTED if not name.startswith("vllm-")
                     and name not in ("two-node-late", "kv-slow", *WATCHED_ELSEWHERE))
RECOVERING = ("kv-slow",)
# hangs for good that other tests watch too (test_lab_first_look.py, the page and fleet tests): one
# held run each. tp2-one-rank-loading's hang (node 1's TP1 opening a FIFO) begins at its onset, which
# a held run waits for: before it, on busy cores, node 0 may rightly be stalled in the rendezvous
HELD = ("two-node-watchdog", "weights-fifo", "tp2-one-rank-loading")


def _param(scenario: str) -> Any:
    if scenario in HELD:
        return pytest.param(scenario, marks=pytest.mark.xdist_group(HELD_PREFIX + scenario))
    return scenario


@pytest.fixture
def lab() -> Iterator[Start]:
    with lab_runs({"HANGWATCH_LAB_PYTHON": LAB_PYTHON}, hold_s=900) as start:
        yield start


def _attach(pid: int, exit_on: str) -> list[dict[str, Any]]:
    done = subprocess.run([HANGWATCH, "attach", str(pid), "--json", "--exit-on", exit_on, "--timeout", str(START_TIMEOUT_S)],
                          capture_output=True, text=True, timeout=START_TIMEOUT_S + 60)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr
    return lines


@pytest.mark.parametrize("scenario", [_param(name) for name in ONE_VERDICT])
def test_lab_scenario(lab: Any, held_lab: HeldScenarios, scenario: str) -> None:
    # GIVEN a real SGLang start in this scenario (a hang for good may have begun before this test)
    header = held_lab.stuck(scenario)[0] if scenario in HELD else lab(scenario)
    # WHEN hangwatch gates on it
    verdict = _attach(header["pid"], "stalled,crashed,ready")[-1]
    # THEN it ends on the right state and cause (lab/expected.py), naming the culprit ranks
    want = EXPECTED[scenario]
    assert is_right(scenario, verdict), json.dumps(verdict, indent=1)[:3000]
    assert set(want.culprits) <= set(verdict["ranks"]), json.dumps(verdict, indent=1)[:3000]
    if want.blocker:
        # e.g. tp2-one-rank-loading: node 1's TP1 (another launcher on this host, same
        # --dist-init-addr) holds TP0 in the post-load barrier while it reads weights from a FIFO
        blocker = verdict["blocker"]
        assert blocker is not None and blocker["rank"] == want.blocker, json.dumps(verdict, indent=1)[:3000]
        assert "FIFO" in blocker["waits_on"] or "pipe" in blocker["waits_on"], blocker


@pytest.mark.parametrize("scenario", sorted(RECOVERING))
def test_lab_slow_start_is_never_called_stalled(lab: Any, scenario: str) -> None:
    header = lab(scenario)
    lines = _attach(header["pid"], "ready,crashed")
    assert lines[-1]["state"] == "ready", json.dumps(lines[-1], indent=1)[:3000]
    assert [v for v in lines if v["state"] == "stalled"] == []


def test_lab_late_node_is_a_stall_that_resolves(lab: Any) -> None:
    # GIVEN node 1 joins 25 s after node 0 began waiting for it in the rendezvous
    header = lab("two-node-late")
    lines = _attach(header["pid"], "ready,crashed")
    # THEN stalled on the rendezvous while it waits, ready once it came
    assert any((v["state"], v["cause"]) == ("stalled", "multinode_rendezvous") for v in lines)
    assert lines[-1]["state"] == "ready"
