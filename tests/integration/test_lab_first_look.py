"""First look on the real SGLang server (CPU lab, issue 26): a daemon restarted mid-stall sends no
message at all, and an attach minutes into a stall is `stalled` from its first verdict.

Runs like test_lab.py (HANGWATCH_LAB_PYTHON or .lab-venv). HANGWATCH_LATE_ATTACH_S sets how long
after the onset the late attach comes (default 60 s here; bench/bench_first_look.py uses 300).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.labrun import Start, lab_runs
from helpers.paths import ROOT
from helpers.serve_support import Receiver
from lab.expected import is_right

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
ONSET_TIMEOUT_S = 600  # a start on 2 shared cores under load
LATE_S = float(os.environ.get("HANGWATCH_LATE_ATTACH_S", "60"))

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


@pytest.fixture
def lab() -> Iterator[Start]:
    with lab_runs({"HANGWATCH_LAB_PYTHON": LAB_PYTHON}, hold_s=1200) as start:
        yield start


def _stuck(lab: Start, scenario: str, tmp: Path) -> tuple[dict[str, Any], float]:
    """Start the scenario and wait for its onset; (header, onset epoch)."""
    onset = tmp / "onset.json"
    header = lab(scenario, "--onset-file", str(onset))
    deadline = time.monotonic() + ONSET_TIMEOUT_S
    while not onset.exists() and time.monotonic() < deadline:
        time.sleep(1.0)
    assert onset.exists(), f"{scenario} never reached its onset"
    return header, float(json.loads(onset.read_text())["t"])


class _Watch:
    """`hangwatch attach --json` read line by line in the background."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.lines: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip():
                self.lines.append(json.loads(line))

    def until(self, test: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if any(test(v) for v in self.lines):
                return True
            time.sleep(0.5)
        return any(test(v) for v in self.lines)

    def kill9(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self._thread.join(5)


def test_lab_restart_mid_stall_sends_exactly_one_slack_message(lab: Start, tmp_path: Path) -> None:
    # GIVEN a real stall watched by a daemon that alerted Slack once (a real HTTP receiver)
    header, _ = _stuck(lab, "weights-fifo", tmp_path)
    slack = Receiver()
    env = {**os.environ, "HANGWATCH_SLACK_WEBHOOK": slack.url}
    args = [HANGWATCH, "attach", str(header["pid"]), "--json", "--history", str(tmp_path / "history.sqlite")]
    try:
        first = _Watch(args, env)
        try:
            assert first.until(lambda v: v["state"] == "stalled", 240), first.lines
            assert slack.wait_for(1, 60), "no Slack message for the stall"
        finally:
            first.kill9()
        # WHEN the daemon is killed with -9 and restarted on the same history, mid-stall
        second = _Watch(args, env)
        try:
            second.until(lambda v: False, 60)  # its start (slow under load), first look and ticks
        finally:
            second.kill9()
        time.sleep(2.0)  # a message it queued would be posted by now
        # THEN no second message: not "resolved", not "stalled" again; it says stalled throughout
        assert len(slack.bodies) == 1, [b.get("text") for b in slack.bodies]
        assert second.lines and all(v["state"] == "stalled" for v in second.lines), [v["state"] for v in second.lines]
        assert {v["episode"]["id"] for v in second.lines} == {first.lines[-1]["episode"]["id"]}
    finally:
        slack.close()


def test_lab_late_attach_is_stalled_from_its_first_verdict(lab: Start, tmp_path: Path) -> None:
    # GIVEN a two-node start stuck in the rendezvous whose soft watchdog repeats a line every 5 s
    # (the log file keeps being written: only its timestamps prove nothing new came)
    header, onset = _stuck(lab, "two-node-watchdog", tmp_path)
    time.sleep(max(0.0, onset + LATE_S - time.time()))
    # WHEN hangwatch attaches LATE_S into the stall
    done = subprocess.run([HANGWATCH, "attach", str(header["pid"]), "--json", "--exit-on", "stalled,crashed,ready",
                           "--timeout", "120", "--no-learn"], capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    # THEN its first verdict is the stall, dated from the last progress the log proves
    assert lines, done.stderr
    assert is_right("two-node-watchdog", lines[0]), json.dumps(lines[0], indent=1)[:3000]
    assert lines[0]["since_s"] >= LATE_S - 5, lines[0]["since_s"]
