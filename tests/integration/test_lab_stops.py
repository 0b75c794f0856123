"""Stops and an unread argv on the real SGLang server (CPU lab): a stop someone asked for ends as
`stopped`, and a launcher whose argv is one joined title is read, not assumed.

The server is SGLang 0.5.23 starting node 0 of two (`--nnodes 2`) whose node 1 never comes: rank 0
really waits in torch's TCPStore, as in the lab's two-node-missing scenario. Slow: one real start
per test on two shared cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from hangwatch.sources.procs import start_time
from helpers.liveprocs import kill_group, started_at
from helpers.paths import ROOT
from lab import _procs
from lab._runner import COMMON_FLAGS

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
START_TIMEOUT_S = 600  # a TP=2 start reached its dist-init line only after 4-5 min on the loaded 2-core host

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)"),
]


def _stuck_start() -> tuple[list[str], int]:
    """SGLang node 0 of two on this host; node 1 never starts. (args after the program, HTTP port)"""
    port, dist = _procs.free_port(31000, 31999), _procs.free_port(29600, 29699)
    return [
        "--model-path", str(_procs.tiny_model()), "--port", str(port), *COMMON_FLAGS, "--max-total-tokens", "4096",
        "--skip-server-warmup", "--tp", "2", "--nnodes", "2", "--node-rank", "0", "--dist-init-addr", f"127.0.0.1:{dist}",
    ], port


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # one NUMA node here: SGLang asserts on tp>1 unless the cores are given (lab.scenarios.TP2_ENV)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path), "SGLANG_CPU_OMP_THREADS_BIND": "0|1",
            "HANGWATCH_LAB_PYTHON": LAB_PYTHON}


@pytest.fixture
def groups() -> Iterator[Callable[[int], None]]:
    """`own(pid)`: the group that running `pid` heads is killed at teardown (hangwatch's, the server's
    in its own session), unless by then its pid holds another process."""
    started: dict[int, float | None] = {}
    yield lambda pid: started.setdefault(pid, start_time(pid))
    for pid, at in started.items():
        kill_group(pid, started_at(at))


def _wait_text(path: Path, text: str, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} not in {path} within {timeout_s} s:\n{path.read_text(errors='replace')[-3000:] if path.exists() else ''}")


def _launcher_of(pid: int, timeout_s: float = 60.0) -> psutil.Process:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children():
            with contextlib.suppress(psutil.NoSuchProcess):  # a py-spy run that just ended
                if "sglang.launch_server" in " ".join(child.cmdline()):
                    return child
        time.sleep(0.2)
    raise TimeoutError(f"hangwatch run (pid {pid}) started no server in {timeout_s} s")


def _why(lines: list[dict[str, Any]], log: Path) -> str:
    """What a failed stop test needs said: each verdict with its evidence, and the log's end."""
    said = [f"{v['t']} {v['state']} {v['cause']}: {[f['text'] for f in v['evidence']]}" for v in lines]
    return "\n".join([*said, "--- the log's end:", *log.read_text(errors="replace").splitlines()[-40:]])


def _lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("stop", ["ctrl-c to run", "sigterm to run", "sigterm to the server"])
def test_a_stop_of_a_real_stuck_start_is_stopped(tmp_path: Path, env: dict[str, str], groups: Callable[[int], None], stop: str) -> None:
    # GIVEN `hangwatch run` starting a real SGLang node that waits for a node that never comes
    args, _ = _stuck_start()
    log = tmp_path / "run.log"
    watch = subprocess.Popen([HANGWATCH, "run", "--json", "--no-preflight", "--log", str(log), "--", LAB_PYTHON,
                              "-m", "sglang.launch_server", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    groups(watch.pid)
    launcher = _launcher_of(watch.pid)
    groups(launcher.pid)  # its own session: killed at teardown whatever happens
    _wait_text(log, "Init parallel begin")
    time.sleep(3)  # inside the rendezvous
    # WHEN it is stopped: the user's Ctrl-C, a supervisor's SIGTERM to run, an orchestrator's to the server
    if stop == "ctrl-c to run":
        watch.send_signal(signal.SIGINT)
    elif stop == "sigterm to run":
        watch.send_signal(signal.SIGTERM)
    else:
        os.kill(launcher.pid, signal.SIGTERM)
    out, err = watch.communicate(timeout=120)
    lines = _lines(out)
    # THEN the last verdict is stopped: no crash, no dead rank, no KeyboardInterrupt as evidence
    assert lines and lines[-1]["state"] == "stopped" and lines[-1]["cause"] is None, _why(lines, log)
    assert all(line["state"] != "crashed" and line["cause"] != "dead_rank" for line in lines), [
        (line["state"], line["cause"]) for line in lines]
    print(json.dumps({"stop": stop, "states": [(line["t"], line["state"], line["cause"]) for line in lines],
                      "evidence": [f["text"] for f in lines[-1]["evidence"]]}))


def test_a_real_launcher_with_a_joined_title_on_its_own_port_is_no_port_conflict(
        tmp_path: Path, env: dict[str, str], groups: Callable[[int], None]) -> None:
    # GIVEN SGLang's launcher retitled (setproctitle) with its command line joined into one string,
    # on a port of its own, while something else holds the default port 30000
    args, port = _stuck_start()
    title = " ".join(["python3", "-m", "sglang.launch_server", *args])
    code = ("import runpy, sys, setproctitle\n"
            f"sys.argv = ['sglang.launch_server', *{args!r}]\n"
            f"setproctitle.setproctitle({title!r})\n"
            "runpy.run_module('sglang.launch_server', run_name='__main__')\n")
    log = tmp_path / "server.log"
    stranger = socket.socket()
    with contextlib.suppress(OSError):  # ours, or whoever holds 30000 on this host already
        stranger.bind(("127.0.0.1", 30000))
        stranger.listen()
    try:
        with open(log, "wb") as fh:
            server = subprocess.Popen([LAB_PYTHON, "-c", code], stdout=fh, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)
        groups(server.pid)
        _wait_text(log, "Init parallel begin")
        assert b"\x00" not in Path(f"/proc/{server.pid}/cmdline").read_bytes().rstrip(b"\x00")
        # WHEN attached, gating on a stall
        done = subprocess.run([HANGWATCH, "attach", str(server.pid), "--json", "--exit-on", "stalled,crashed,ready",
                               "--timeout", "120"], capture_output=True, text=True, timeout=240, env=env)
    finally:
        stranger.close()
    lines = _lines(done.stdout)
    # THEN its port is the one it was given, and nothing accuses the holder of the default port
    assert lines and all(line["server"].endswith(f":{port}") for line in lines), (lines[:1], done.stderr[-2000:])
    assert all(line["cause"] != "port_in_use" for line in lines), [(line["state"], line["cause"]) for line in lines]
    assert lines[-1]["state"] == "stalled" and lines[-1]["cause"] == "multinode_rendezvous", lines[-1]
