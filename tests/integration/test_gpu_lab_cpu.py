"""The GPU lab's scenarios run live on CPU (LAB_GPU_CPU=1: gloo, no GPU): rendezvous-mismatch under
`attach`, graph-capture under `run --remedy`.

rendezvous-mismatch: two real torch ranks block in init_process_group under the user's own process-group setup
(lab/gpu/user_hooks.py: rank 1 looks for the TCPStore on another port than rank 0 serves);
`hangwatch attach` must say `stalled nccl_init` and never offer user code as a cause (issue 26).
The same scenario on an H200 is tests/fixtures/gpu/rendezvous-mismatch-1gpu. Needs torch and
setproctitle: the SGLang lab venv (HANGWATCH_LAB_PYTHON) has both.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.liveprocs import kill_group, running
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


def test_graph_capture_under_run_remedy_is_relaunched_without_graphs_and_answers(tmp_path: Path) -> None:
    """graph-capture spelled as an SGLang launch (lab/gpu/engine/sglang/launch_server.py): its
    capture loop out of step between the ranks really deadlocks (gloo here, NCCL on the H200);
    `run --remedy` must say cuda_graph_capture, relaunch once with exactly --disable-cuda-graph, and
    the relaunched server must start and answer /health on its serving port. The same on one H200:
    tests/fixtures/gpu/remedy-graph-capture-1gpu (docs/gpu.md)."""
    import urllib.request

    http, nccl = _free_port_pair(), _free_port_pair()
    argv = [str(LAB_PYTHON), str(ROOT / "lab" / "gpu" / "engine" / "sglang" / "launch_server.py"), "--lab-scenario",
            "graph-capture", "--model-path", "lab/gpu-tiny", "--tp-size", "2", "--host", "127.0.0.1", "--port", str(http),
            "--nccl-port", str(nccl), "--hold", "300"]  # fmt: skip
    env = {**os.environ, "LAB_GPU_CPU": "1", "XDG_STATE_HOME": str(tmp_path / "state")}
    watch = subprocess.Popen(
        [sys.executable, "-m", "hangwatch", "run", "--remedy", "--json", "--exit-on", "ready", "--timeout", "240",
         "--log", str(tmp_path / "run.log"), "--", *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )
    out = ""
    try:
        out, err = watch.communicate(timeout=600)
        lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        assert watch.returncode == 0, err[-3000:]
        relaunches = [x["relaunch"] for x in lines if "relaunch" in x]
        assert [(r["cause"], r["id"]) for r in relaunches] == [("cuda_graph_capture", "sglang-disable-cuda-graph")], err[-3000:]
        assert relaunches[0]["argv"] == [*argv, "--disable-cuda-graph"] and not relaunches[0]["env"]
        stalled = [x for x in lines if x.get("state") == "stalled"]
        assert stalled and stalled[0]["cause"] == "cuda_graph_capture", stalled
        assert lines[-1]["state"] == "ready" and "--disable-cuda-graph" in lines[-1]["remedy"]
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/health", timeout=10) as resp:
            assert resp.status == 200
    finally:
        if watch.poll() is None:
            watch.kill()
        # the ready server outlives --exit-on ready (its own session); the one relaunched from may be a stranger now
        for pid in {int(m) for m in re.findall(r"sglang pid (\d+)", out)}:
            kill_group(pid, running("--port", str(http)))
