"""History and alert dedupe survive kill -9: a real daemon process, a real SQLite file, a real receiver."""

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from helpers.paths import TESTS


def start(db: Path, url: str, state: str) -> tuple[subprocess.Popen, str]:
    # The daemon imports the same helpers the tests do: run it as a module with tests/ as its cwd.
    proc = subprocess.Popen([sys.executable, "-m", "helpers.alerting_daemon", str(db), url, state],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=TESTS)
    line = proc.stdout.readline()  # bounded: the daemon flushes within seconds or exits
    if not line.startswith("ready"):
        proc.kill()
        pytest.fail(f"daemon did not start: {line!r} {proc.stderr.read()}")
    return proc, line.split()[1]


def kill9(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL


def history(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/history", timeout=5) as response:
        return json.load(response)


@pytest.mark.slow
def test_kill9_keeps_history_and_does_not_alert_twice(receiver, tmp_path):
    db = tmp_path / "history.db"
    # GIVEN a daemon that saw a stall and alerted, then was killed with SIGKILL
    proc, _ = start(db, receiver.url, "stalled")
    assert receiver.wait_for(1)
    kill9(proc)
    # WHEN it restarts and still sees the same stall
    proc, url = start(db, receiver.url, "stalled")
    try:
        before = history(url)
    finally:
        kill9(proc)
    # THEN the history is intact and no second alert went out
    assert len(receiver.bodies) == 1 and receiver.bodies[0]["event"] == "firing"
    assert [t["state"] for t in before["transitions"]] == ["stalled"]
    assert [(a["kind"], a["status"]) for a in before["alerts"]] == [("firing", "sent")]
    # WHEN it restarts once more and the server has recovered
    proc, url = start(db, receiver.url, "ready")
    try:
        after = history(url)
    finally:
        kill9(proc)
    # THEN the same episode is resolved, once
    events = [(b["event"], b["episode_id"]) for b in receiver.bodies]
    assert [e for e, _ in events] == ["firing", "resolved"] and events[0][1] == events[1][1]
    assert [t["state"] for t in reversed(after["transitions"])] == ["stalled", "ready"]
