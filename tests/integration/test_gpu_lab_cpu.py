"""The GPU lab's rendezvous-mismatch scenario run live on CPU (LAB_GPU_CPU=1: gloo, no GPU).

Two real torch ranks block in init_process_group under the user's own process-group setup
(lab/gpu/user_hooks.py: rank 1 looks for the TCPStore on another port than rank 0 serves);
`hangwatch attach` must say `stalled nccl_init` and never offer user code as a cause (issue 26).
The same scenario on an H200 is tests/fixtures/gpu/rendezvous-mismatch-1gpu. Needs torch and
setproctitle: the SGLang lab venv (HANGWATCH_LAB_PYTHON) has both.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.paths import ROOT

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON")

pytestmark = [
    pytest.mark.lab,
    pytest.mark.skipif(not LAB_PYTHON, reason="set HANGWATCH_LAB_PYTHON to a python with torch and setproctitle"),
]


def _free_port_pair() -> int:
    """A port P with P and P+1 free now (rank 0 serves P, rank 1 looks on P+1)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two adjacent free ports")


def test_rendezvous_mismatch_is_nccl_init_never_user_code(tmp_path: Path) -> None:
    log, onset = tmp_path / "server.log", tmp_path / "onset.json"
    env = {**os.environ, "LAB_GPU_CPU": "1"}
    lab = subprocess.Popen(
        [str(LAB_PYTHON), str(ROOT / "lab" / "gpu" / "run.py"), "rendezvous-mismatch", "--log", str(log),
         "--onset-file", str(onset), "--port", str(_free_port_pair()), "--hold", "240"],
        stdout=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )
    try:
        launcher = json.loads(lab.stdout.readline())["pid"]  # type: ignore[union-attr]
        deadline = time.monotonic() + 120
        while not onset.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert onset.exists(), log.read_text() if log.exists() else "no log"
        out = subprocess.run(
            [sys.executable, "-m", "hangwatch", "attach", str(launcher), "--json", "--no-learn",
             "--exit-on", "stalled,crashed,ready", "--timeout", "90", "--log", str(log)],
            capture_output=True, text=True, timeout=150, cwd=ROOT,
        )
        lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
        assert lines, out.stderr
        assert (lines[-1]["state"], lines[-1]["cause"]) == ("stalled", "nccl_init"), lines[-1]
        offered = {c["cause"] for v in lines for c in v.get("candidates", [])} | {v["cause"] for v in lines}
        assert "patch_or_user_code" not in offered, offered
    finally:
        os.killpg(lab.pid, signal.SIGKILL)
        lab.wait(timeout=30)
