"""A live rank that forks short-lived helpers (issue 24): the helpers carry the rank's title (fork
without exec), but they are not ranks: none is reported as a dead rank, by the sampler or by a real
`hangwatch attach` of the server, while the rank itself stays a rank."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from hangwatch.sources.procs import ProcessSampler
from helpers.liveprocs import Spawner, wait_json


def forking(head: str) -> str:
    """A program that runs `head`, says it is ready, then forks a helper (never exec'd) every 0.1 s
    that lives 0.15 s."""
    return f"""
import json, os, sys, time
{head}
open(os.environ["HW_READY"], "w").write(json.dumps({{"pid": os.getpid()}}))
while True:
    child = os.fork()
    if child == 0:
        time.sleep(0.15)
        os._exit(0)
    time.sleep(0.1)
    os.waitpid(child, 0)
"""


RANK = forking("""from setproctitle import setproctitle
setproctitle("sglang::scheduler_TP0")
print("[2026-12-01 10:00:00 TP0] Init torch distributed begin.", flush=True)""")
LAUNCHER = """
import os, subprocess, sys
subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "rank.py")]).wait()
"""


def start(spawner: Spawner, tmp_path: Path) -> tuple[int, int, Path]:
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    (pkg / "rank.py").write_text(RANK)
    (pkg / "launch_server.py").write_text(LAUNCHER)
    ready, log = tmp_path / "ready.json", tmp_path / "server.log"
    with log.open("wb") as fh:
        launcher = spawner.start([sys.executable, str(pkg / "launch_server.py"), "--tp-size", "1", "--port", "1"],
                                 stdout=fh, stderr=subprocess.STDOUT, env={"HW_READY": str(ready), "PATH": "/usr/bin:/bin"})
    rank = int(wait_json(ready, launcher, 20.0)["pid"])
    return launcher.pid, rank, log


def test_the_sampler_never_keeps_a_helper_as_a_rank(spawner: Spawner, tmp_path: Path) -> None:
    launcher, rank, _ = start(spawner, tmp_path)
    sampler = ProcessSampler()
    seen_helpers = 0
    for _ in range(40):
        records = sampler.sample(launcher)
        by_pid = {r.pid: r for r in records}
        assert by_pid[rank].role == "scheduler" and by_pid[rank].rank == "TP0" and by_pid[rank].alive
        helpers = [r for r in records if r.ppid == rank]
        seen_helpers += len(helpers)
        assert all(r.rank is None and r.role == "other" for r in helpers), helpers
        assert not [r for r in records if not r.alive and r.rank is not None], records
        time.sleep(0.05)
    assert seen_helpers > 0  # the helpers were really there to be seen


def test_attach_says_no_dead_rank(spawner: Spawner, tmp_path: Path) -> None:
    launcher, _, log = start(spawner, tmp_path)
    run = subprocess.run([str(Path(sys.executable).parent / "hangwatch"), "attach", str(launcher), "--json",
                          "--log", str(log), "--timeout", "12"], capture_output=True, timeout=120, check=False)
    verdicts = [json.loads(line) for line in run.stdout.decode().splitlines() if line.startswith("{")]
    assert verdicts, run.stderr.decode()[-2000:]
    assert not [v for v in verdicts if v.get("cause") == "dead_rank"], verdicts


# vLLM's API server runs `python -m vllm.model_executor.models.registry` at start: between fork and
# exec that child shows the launcher's very command line; sampled then, its exit read as the
# launcher's ("The server exited", crashed, at t = 12 s of a healthy vLLM start in a CI-like run)
VLLM_LAUNCHER = forking("")


def test_a_launchers_fork_that_exits_is_not_the_launcher_exiting(spawner: Spawner, tmp_path: Path) -> None:
    pkg = tmp_path / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for folder in (tmp_path / "vllm", tmp_path / "vllm" / "entrypoints", pkg):
        (folder / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(VLLM_LAUNCHER)
    ready = tmp_path / "ready.json"
    launcher = spawner.start([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "m"],
                             env={"HW_READY": str(ready), "PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    wait_json(ready, launcher, 20.0)
    sampler = ProcessSampler()
    forks_seen = 0
    for _ in range(40):
        records = sampler.sample(launcher.pid)
        by_pid = {r.pid: r for r in records}
        assert by_pid[launcher.pid].role == "launcher" and by_pid[launcher.pid].alive
        forks_seen += len([r for r in records if r.ppid == launcher.pid])
        assert not [r for r in records if r.role == "launcher" and not r.alive], records
        time.sleep(0.05)
    assert forks_seen > 0
