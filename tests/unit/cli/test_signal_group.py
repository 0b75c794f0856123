"""`hangwatch run` and the remedy relaunch stop a server by signalling its process group, whose id
is the launcher's pid. After the launcher is reaped that number may belong to a stranger's group:
those must be left alone, while ranks the launcher left behind still go."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from hangwatch.cli.launch import signal_group
from helpers.liveprocs import Spawner, wait_until

SLEEPER = "import time; time.sleep(600)"


def test_ranks_left_by_a_reaped_launcher_are_killed(spawner: Spawner) -> None:
    # a launcher that starts a rank in its own group and exits at once; the rank holds the group id
    launcher = spawner.python(f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {SLEEPER!r}]).pid, flush=True)",
                              stdout=subprocess.PIPE)
    assert launcher.stdout is not None
    rank = int(launcher.stdout.readline())
    launcher.wait(timeout=10)  # reaped: its pid is free, but the rank still holds its group id
    signal_group(launcher, signal.SIGKILL)
    wait_until(lambda: not _alive(rank))


def test_a_stranger_at_a_reaped_launchers_pid_is_left_alone(spawner: Spawner) -> None:
    launcher = spawner.python("pass")
    launcher.wait(timeout=10)
    # SIMULATION of the kernel giving the reaped launcher's number to a new session leader: the
    # record of the reaped launcher is pointed at a real stranger heading its own group
    stranger = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        launcher.pid = stranger.pid
        signal_group(launcher, signal.SIGKILL)
        with pytest.raises(subprocess.TimeoutExpired):  # without the check, killpg(stranger.pid) killed it
            stranger.wait(timeout=0.5)
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


def test_a_live_launchers_group_is_signalled(spawner: Spawner) -> None:
    launcher = spawner.python(SLEEPER)
    signal_group(launcher, signal.SIGTERM)
    assert launcher.wait(timeout=10) == -signal.SIGTERM


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
