"""`hangwatch attach` read in a real 80-column terminal (tmux): nothing cut with "…", and a wrapped
line of the verdict panel continues under its own text (issue 23)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers.livetools import HANGWATCH, Procs, _env, free_port, server_cmd, wait_for_text

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30, check=False).stdout


def test_attach_in_80_columns_cuts_nothing_and_wraps_under_its_text(tmp_path: Path) -> None:
    procs, session = Procs(), f"hw-{os.getpid()}"
    fifo = tmp_path / "weights.fifo"
    os.mkfifo(fifo)
    try:
        log = tmp_path / "server.log"
        with log.open("wb") as fh:
            server = procs.start(server_cmd(free_port()), stdout=fh, stderr=subprocess.STDOUT,
                                 env=_env(HW_MODE="fifo_rank", HW_FIFO=str(fifo)))
        wait_for_text(log, "Load weight begin")
        # LINES: the live view fits its panel to the terminal's height; a detached tmux may report 24 rows
        command = " ".join(["env", "LINES=70", *HANGWATCH, "attach", str(server.pid), "--log", str(log), "--no-learn",
                            "--history", str(tmp_path / "h.db")])
        _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "70", command)
        screen, deadline = "", time.monotonic() + 120
        while "check:" not in screen and time.monotonic() < deadline:
            time.sleep(1)
            screen = _tmux("capture-pane", "-p", "-t", session)
        assert "STALLED" in screen and "check:" in screen, screen
        lines = screen.splitlines()
        assert max(len(line) for line in lines) <= 80
        table = lines[: next(i for i, line in enumerate(lines) if line.startswith("╭"))]
        assert not any("…" in line for line in table), "\n".join(table)
        assert "libc.so.6" not in "\n".join(table)  # the rank's Python frame, not the native one it waits in
        for i, line in enumerate(lines[:-1]):
            if "check: " in line and lines[i + 1].startswith("│"):
                following = lines[i + 1][1:]
                starts_new = following.lstrip()[:1].isdigit() or following[1:2].isupper() or following.lstrip()[:1] in "+−"
                assert starts_new or following.startswith(" " * 13), f"{line}\n{lines[i + 1]}"
    finally:
        _tmux("kill-session", "-t", session)
        procs.stop()
