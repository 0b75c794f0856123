"""`hangwatch preflight --json -- python -m sglang.launch_server ...` against the real conditions:
a real listener on the port, a real 64 MiB tmpfs over /dev/shm in a private mount namespace, a
real FIFO as the weights file, a real stale lock file whose owner is gone, real OpenMP settings,
a real second process holding the dist-init port, and the lab's healthy launch.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.liveprocs import Spawner
from helpers.paths import FIXTURES, ROOT

HANGWATCH = [sys.executable, "-m", "hangwatch"]
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
TIMEOUT_S = 120


def preflight(args: list[str], env: dict[str, str] | None = None, wrap: list[str] | None = None) -> tuple[int, Any]:
    argv = [*(wrap or []), *HANGWATCH, "preflight", "--json", "--", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                          env={**os.environ, **(env or {})}, cwd=ROOT)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def found(report: Any) -> dict[str, dict[str, Any]]:
    return {f["cause"]: f for f in report["findings"]}


def server(model: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model), "--device", "cpu", *extra]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


def listener(spawner: Spawner, tmp_path: Path) -> tuple[int, int]:
    """A real process listening on a free port; (port, pid)."""
    code = ("import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen();"
            "open(sys.argv[1],'w').write(str(s.getsockname()[1])); time.sleep(300)")  # fmt: skip
    ready = tmp_path / f"port-{len(spawner.procs)}"
    proc = spawner.start([sys.executable, "-c", code, str(ready)])
    from helpers.liveprocs import wait_until

    wait_until(lambda: ready.exists() and ready.read_text(), timeout_s=20)
    return int(ready.read_text()), proc.pid


def test_taken_http_port_is_critical(spawner: Spawner, tmp_path: Path, model: Path) -> None:
    port, pid = listener(spawner, tmp_path)
    code, report = preflight(server(model, "--port", str(port)))
    assert code == 1
    finding = found(report)["port_in_use"]
    assert finding["severity"] == "critical" and finding["remedy"]
    assert f"port {port} (--port) is already listened on at 127.0.0.1" in finding["evidence"][0]["text"]
    assert f"pid {pid}" in finding["evidence"][0]["text"]


def test_second_process_holding_the_dist_init_port(spawner: Spawner, tmp_path: Path, model: Path) -> None:
    port, _ = listener(spawner, tmp_path)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        http = free.getsockname()[1]
    code, report = preflight(server(model, "--port", str(http), "--tp", "2", "--dist-init-addr", f"127.0.0.1:{port}"))
    assert code == 1
    assert f"port {port} (--dist-init-addr)" in found(report)["port_in_use"]["evidence"][0]["text"]


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare and root for a private mount")
def test_tp2_under_a_64_mib_dev_shm(model: Path) -> None:
    # a private mount namespace: the tmpfs covers /dev/shm for the preflight only
    script = 'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$@"'
    code, report = preflight(server(model, "--tp", "2"), wrap=["unshare", "-m", "sh", "-c", script, "sh"])
    assert code == 1
    finding = found(report)["shm_too_small"]
    assert finding["severity"] == "critical"
    assert "/dev/shm is a 64 MiB tmpfs (for 2 rank process(es))" in finding["evidence"][0]["text"]
    assert "--shm-size" in finding["remedy"]
    # the same launch outside the namespace: this host's /dev/shm is not small
    assert "shm_too_small" not in found(preflight(server(model, "--tp", "2"))[1])


def test_omp_threads_times_ranks_on_the_cores(model: Path) -> None:
    cores = len(os.sched_getaffinity(0))
    threads = 16 * cores  # 32 on this 2-core machine
    _, report = preflight(server(model, "--tp", "2"), env={"OMP_NUM_THREADS": str(threads)})
    finding = found(report)["cpu_thread_oversubscription"]
    assert finding["severity"] in ("critical", "warning") and "OMP_NUM_THREADS" in finding["remedy"]
    assert f"OMP_NUM_THREADS={threads} x 2 rank(s) = {2 * threads} compute threads on {cores} usable cores" in finding["evidence"][0]["text"]
    # one thread per rank fits
    assert "cpu_thread_oversubscription" not in found(preflight(server(model, "--tp", "2"), env={"OMP_NUM_THREADS": "1"})[1])
    # given on the command line, as a shell would
    assert "cpu_thread_oversubscription" in found(preflight([f"OMP_NUM_THREADS={threads}", *server(model, "--tp", "2")])[1])


def test_fifo_as_the_weights_file(model: Path) -> None:
    (model / "model.safetensors").unlink()
    os.mkfifo(model / "model.safetensors")
    code, report = preflight(server(model))  # must not block on the FIFO
    assert code == 1
    finding = found(report)["weight_loading_io"]
    assert finding["severity"] == "critical" and finding["remedy"]
    assert f"{model / 'model.safetensors'} is a FIFO" in finding["evidence"][0]["text"]


def test_stale_lock_whose_owner_is_gone(tmp_path: Path, model: Path) -> None:
    cache = tmp_path / "flashinfer"
    (cache / "jit").mkdir(parents=True)
    owner = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    gone = int(owner.stdout)  # that process has exited: the lock's owner is gone
    (cache / "jit" / "batch_prefill.lock").write_text(f"{gone}\n{socket.gethostname()}\n")
    alive = cache / "jit" / "decode.lock"
    alive.write_text(f"{os.getpid()}\n")
    code, report = preflight(server(model), env={"FLASHINFER_WORKSPACE_BASE": str(cache)})
    assert code == 1
    text = found(report)["jit_lock_deadlock"]["evidence"][0]["text"]
    assert f"batch_prefill.lock names pid {gone}, which is gone" in text and "decode.lock" not in text


def test_recorded_gpus(model: Path) -> None:
    argv = [*HANGWATCH, "preflight", "--json", "--gpus-from", str(FIXTURES / "preflight" / "rtx-pro-6000-x2-iommu-acs.json"),
            "--", *server(model, "--tp", "2", "--attention-backend", "triton")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, cwd=ROOT)
    assert done.returncode == 1, done.stderr
    assert found(json.loads(done.stdout))["nccl_p2p_topology"]["severity"] == "critical"
    healthy = [*HANGWATCH, "preflight", "--json", "--gpus-from", str(FIXTURES / "preflight" / "h200x2-gputopo.json"),
               "--", *server(model, "--tp", "2")]  # fmt: skip
    done = subprocess.run(healthy, capture_output=True, text=True, timeout=TIMEOUT_S, check=False, cwd=ROOT)
    assert done.returncode == 0 and json.loads(done.stdout)["findings"] == []


def test_bad_input_exits_2() -> None:
    done = subprocess.run([*HANGWATCH, "preflight", "--json", "--"], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 2
    done = subprocess.run([*HANGWATCH, "preflight", "--gpus-from", "/nonexistent.json", "--", "python", "-m", "sglang.launch_server"],
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)  # fmt: skip
    assert done.returncode == 2 and "cannot read the GPU recording" in done.stderr


@pytest.mark.lab
@pytest.mark.skipif(not Path(LAB_PYTHON).exists(), reason="no lab venv (lab/install.sh, or set HANGWATCH_LAB_PYTHON)")
def test_lab_healthy_launch_has_no_critical_finding() -> None:
    from lab import _procs
    from lab._runner import COMMON_FLAGS

    port = _procs.free_port(31000, 31999)
    # the lab's `healthy` scenario: rs.server_args(port, warmup=True), with the lab's own Python
    argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()), "--port", str(port),
            *COMMON_FLAGS, "--max-total-tokens", "4096"]  # fmt: skip
    code, report = preflight(argv)
    assert code == 0
    assert [f for f in report["findings"] if f["severity"] == "critical"] == []
    assert report["facts"]["version_sglang"]["value"]  # read from the lab venv's metadata, torch never imported
