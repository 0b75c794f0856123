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

from helpers.labrun import Start, lab_runs
from helpers.paths import ROOT

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
START_TIMEOUT_S = 300  # lab.scenarios.ONSET_TIMEOUT_S: a TP=2 start on 2 shared cores

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]

# scenario -> (the state hangwatch ends on, its cause, culprit ranks or None when not asserted)
EXPECTED: dict[str, tuple[str, str | None, list[str] | None]] = {
    "healthy": ("ready", None, None),
    "two-node-missing": ("stalled", "multinode_rendezvous", None),
    "weights-fifo": ("stalled", "weight_loading_io", None),
    "tp2-one-rank-loading": ("stalled", "weight_loading_io", None),
    # node 1's rank is not in node 0's tree, but node 1's launcher is a peer on this host
    # (sources/peers.py): its SIGKILLed TP1 is seen exiting, and a rank that exited is a crash
    "rank-killed": ("crashed", "dead_rank", ["TP1"]),
    "hs-dump-patch": ("stalled", "patch_or_user_code", None),
    "port-taken": ("stalled", "port_in_use", None),  # the holder is seen before uvicorn fails to bind
}
# Slow but alive: never `stalled`, then ready.
RECOVERING = ("kv-slow",)


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


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_lab_scenario(lab: Any, scenario: str) -> None:
    # GIVEN a real SGLang start in this scenario
    header = lab(scenario)
    # WHEN hangwatch gates on it
    verdict = _attach(header["pid"], "stalled,crashed,ready")[-1]
    # THEN it ends on the expected state and cause
    state, cause, ranks = EXPECTED[scenario]
    assert (verdict["state"], verdict["cause"]) == (state, cause), json.dumps(verdict, indent=1)[:3000]
    if ranks is not None:
        assert verdict["ranks"] == ranks
    if scenario == "tp2-one-rank-loading":
        # node 1's TP1 (another launcher on this host, same --dist-init-addr) holds TP0 in the
        # post-load barrier while it reads weights from a FIFO: the final blocker names it
        blocker = verdict["blocker"]
        assert blocker is not None and blocker["rank"] == "TP1", json.dumps(verdict, indent=1)[:3000]
        assert "FIFO" in blocker["waits_on"] or "pipe" in blocker["waits_on"], blocker


@pytest.mark.parametrize("scenario", sorted(RECOVERING))
def test_lab_slow_start_is_never_called_stalled(lab: Any, scenario: str) -> None:
    header = lab(scenario)
    lines = _attach(header["pid"], "ready,crashed")
    assert lines[-1]["state"] == "ready", json.dumps(lines[-1], indent=1)[:3000]
    assert [v for v in lines if v["state"] == "stalled"] == []


def test_lab_killed_rank_in_the_watched_tree_is_named(lab: Any) -> None:
    # GIVEN one node with --tp 2 whose scheduler TP1 is SIGKILLed while loading
    header = lab("rank-killed-one-node")
    verdict = _attach(header["pid"], "stalled,crashed")[-1]
    # THEN the dead rank is the cause and TP1 among the culprits: on CPU, TP0 fails on the reset
    # gloo socket and SGLang takes the whole tree down within half a second (less than a tick), so
    # TP0 may be named too; with NCCL the survivor waits (tests/fixtures/gpu/dead-rank)
    assert verdict["state"] in ("stalled", "crashed"), json.dumps(verdict, indent=1)[:3000]
    assert verdict["cause"] == "dead_rank" and "TP1" in verdict["ranks"], json.dumps(verdict, indent=1)[:3000]


def test_lab_late_node_is_a_stall_that_resolves(lab: Any) -> None:
    # GIVEN node 1 joins 25 s after node 0 began waiting for it in the rendezvous
    header = lab("two-node-late")
    lines = _attach(header["pid"], "ready,crashed")
    # THEN stalled on the rendezvous while it waits, ready once it came
    assert any((v["state"], v["cause"]) == ("stalled", "multinode_rendezvous") for v in lines)
    assert lines[-1]["state"] == "ready"
