"""`hangwatch run` runs the preflight first: prints its findings, stops on a critical one with
--preflight-strict, serves it at /preflight, and the live verdict uses its findings as evidence.
Real processes: the test server of programs/ (SGLang's titles and log lines, a real rendezvous
wait), a real listener, a real 64 MiB tmpfs over /dev/shm in a private mount namespace, and the
real SGLang server of the lab on a real FIFO.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.livetools import (
    HANGWATCH,
    Procs,
    _env,
    finish,
    free_port,
    server_cmd,
)
from helpers.paths import ROOT

LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
GATE = ["--json", "--exit-on", "ready,stalled,crashed"]


@pytest.fixture
def procs() -> Iterator[Procs]:
    started = Procs()
    yield started
    started.stop()


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _poll(url: str, timeout_s: float = 30.0) -> tuple[int, dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _get(url)
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_strict_preflight_does_not_launch_on_a_taken_port(procs: Procs, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "run.log"
        code, _, err = finish(procs.hangwatch(["run", "--preflight-strict", "--log", str(log), "--", *server_cmd(port)]), 60)
    assert code == 1, err
    assert "CRITICAL  port_in_use" in err and f"port {port} (--port) is already listened on" in err
    assert "not launching" in err and "started pid" not in err and not log.exists()


def test_run_serves_the_preflight_and_prints_it(procs: Procs, tmp_path: Path) -> None:
    api = free_port()
    watch = procs.hangwatch(["run", "--json", "--serve", "--port", str(api), "--log", str(tmp_path / "run.log"), "--",
                             *server_cmd(free_port())], env=_env(HW_MODE="tcpstore", OMP_NUM_THREADS="64"))  # fmt: skip
    status, report = _poll(f"http://127.0.0.1:{api}/preflight")
    watch.send_signal(signal.SIGINT)
    _, _, err = finish(watch, 30)
    assert status == 200
    assert set(report) >= {"findings", "checked", "skipped"}
    assert [f["cause"] for f in report["findings"]] == ["cpu_thread_oversubscription"]
    assert "preflight-http-port-taken" in report["checked"]
    assert "hangwatch: preflight: 1 critical" in err and "OMP_NUM_THREADS=64 x 2 rank(s)" in err


def test_no_preflight(procs: Procs, tmp_path: Path) -> None:
    api = free_port()
    watch = procs.hangwatch(["run", "--json", "--no-preflight", "--serve", "--port", str(api), "--log", str(tmp_path / "run.log"),
                             "--", *server_cmd(free_port())], env=_env(HW_MODE="tcpstore"))  # fmt: skip
    status, body = _poll(f"http://127.0.0.1:{api}/preflight")
    watch.send_signal(signal.SIGINT)
    _, _, err = finish(watch, 30)
    assert status == 404 and "no preflight" in body["detail"]
    assert "preflight:" not in err


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare and root for a private mount")
def test_stall_after_a_small_shm_preflight_names_shm(procs: Procs, tmp_path: Path) -> None:
    # GIVEN /dev/shm is a 64 MiB tmpfs (a private mount namespace) and a TP=2 start whose rank 0
    # then waits in the rendezvous
    log = tmp_path / "run.log"
    script = 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"'
    # (no --exit-on: the test server's wait is in its own file, so a user-code rule names the
    # stall first; the preflight's rule takes over once its 10 s hold has passed)
    argv = ["unshare", "-m", "sh", "-c", script, "sh", *HANGWATCH, "run", "--json", "--timeout", "25", "--log", str(log),
            "--", *server_cmd(free_port())]  # fmt: skip
    watch = procs.start(argv, env=_env(HW_MODE="tcpstore"), stdout=-1, stderr=-1)
    # WHEN it stalls
    code, lines, err = finish(watch, 90)
    # THEN the verdict names the cause the preflight predicted, with the preflight's evidence
    assert code == 1, err
    verdict = lines[-1]
    assert (verdict["state"], verdict["cause"], verdict["rule"]) == ("stalled", "shm_too_small", "preflight-predicted-shm-stall")
    texts = [e["text"] for e in verdict["evidence"]]
    assert any("before the launch, preflight warned (critical)" in t for t in texts)
    assert any("/dev/shm is a 64 MiB tmpfs" in t for t in texts)


@pytest.mark.lab
@pytest.mark.slow  # ~2 min: the real SGLang start on 2 shared cores reaches weight loading
@pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)")
def test_lab_fifo_weights_stall_named_with_the_preflight(procs: Procs, tmp_path: Path) -> None:
    from lab import _procs
    from lab._runner import COMMON_FLAGS

    model = tmp_path / "tiny-llama-fifo"
    shutil.copytree(_procs.tiny_model(), model)
    (model / "model.safetensors").unlink()
    os.mkfifo(model / "model.safetensors")
    argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(model), "--port", str(_procs.free_port(31000, 31999)),
            *COMMON_FLAGS, "--max-total-tokens", "4096", "--skip-server-warmup"]  # fmt: skip
    watch = procs.hangwatch(["run", *GATE, "--timeout", "280", "--log", str(tmp_path / "run.log"), "--", *argv],
                            env=_env(TMPDIR=str(tmp_path)))  # fmt: skip
    code, lines, err = finish(watch, 320)
    assert code == 1, err
    assert "CRITICAL  weight_loading_io" in err  # printed before the launch
    verdict = lines[-1]
    assert (verdict["state"], verdict["cause"]) == ("stalled", "weight_loading_io"), verdict
    assert verdict["rule"] == "preflight-predicted-weights-stall"
    assert any("model.safetensors is a FIFO" in e["text"] for e in verdict["evidence"])
