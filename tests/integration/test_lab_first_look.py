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
from pathlib import Path
from typing import Any

import pytest

from helpers.labrun import HELD_PREFIX, HeldScenarios
from helpers.paths import ROOT
from helpers.serve_support import Receiver
from lab.expected import is_right

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
LATE_S = float(os.environ.get("HANGWATCH_LATE_ATTACH_S", "60"))
TICKS_S = 15.0  # the restarted daemon's ticks watched after its first verdict (one a second)

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


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


@pytest.mark.xdist_group(HELD_PREFIX + "weights-fifo")
def test_lab_restart_mid_stall_sends_exactly_one_slack_message(held_lab: HeldScenarios, tmp_path: Path) -> None:
    # GIVEN a real stall (the held weights-fifo run, test_lab.py's too) watched by a
    # daemon that alerted Slack once (a real HTTP receiver)
    header, _ = held_lab.stuck("weights-fifo")
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
            # its start (slow under load) and first look, then ticks: a message it would send for the
            # stall goes out right after the verdict that opens it (the dispatcher's own thread)
            assert second.until(lambda v: True, 240), "the restarted daemon printed no verdict"
            second.until(lambda v: False, TICKS_S)
        finally:
            second.kill9()
        time.sleep(2.0)  # a message it queued would be posted by now
        # THEN no second message: not "resolved", not "stalled" again; it says stalled throughout
        assert len(slack.bodies) == 1, [b.get("text") for b in slack.bodies]
        assert second.lines and all(v["state"] == "stalled" for v in second.lines), [v["state"] for v in second.lines]
        assert {v["episode"]["id"] for v in second.lines} == {first.lines[-1]["episode"]["id"]}
    finally:
        slack.close()


@pytest.mark.xdist_group(HELD_PREFIX + "two-node-watchdog")
def test_lab_late_attach_is_stalled_from_its_first_verdict(held_lab: HeldScenarios) -> None:
    # GIVEN a two-node start stuck in the rendezvous whose soft watchdog repeats a line every 5 s
    # (the log file keeps being written: only its timestamps prove nothing new came); the held run,
    # test_lab.py's too
    header, onset = held_lab.stuck("two-node-watchdog")
    time.sleep(max(0.0, onset + LATE_S - time.time()))
    # WHEN hangwatch attaches LATE_S into the stall
    done = subprocess.run([HANGWATCH, "attach", str(header["pid"]), "--json", "--exit-on", "stalled,crashed,ready",
                           "--timeout", "120", "--no-learn"], capture_output=True, text=True, timeout=240)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    # THEN its first verdict is the stall, dated from the last progress the log proves
    assert lines, done.stderr
    assert is_right("two-node-watchdog", lines[0]), json.dumps(lines[0], indent=1)[:3000]
    assert lines[0]["since_s"] >= LATE_S - 5, lines[0]["since_s"]
