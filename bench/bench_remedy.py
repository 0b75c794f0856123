"""Figures for `hangwatch run --remedy` on the real SGLang lab (printed, never asserted).

    python bench/bench_remedy.py [--runs 3] [--scenario nccl-port,dist-init-port,stale-lock]

nccl-port and dist-init-port start the real `sglang.launch_server` on the tiny model with an
internal port that a real listener already holds; stale-lock starts the test server
(tests/integration/programs, under the lab's python) whose rank 0 waits on torch's own FileBaton
for a `lock` a killed build left an hour ago. Each runs under
`hangwatch run --json --remedy --exit-on ready`. Per run:

- onset: the failure appears in the server's log (`EADDRINUSE`; for stale-lock, rank 0's last
  line before it waits on the baton),
- detected: hangwatch prints the `crashed`/`stalled` verdict,
- relaunch: hangwatch prints its `{"relaunch": ...}` line (after stopping the server cleanly),
- ready: hangwatch prints the `ready` verdict of the relaunched server,
- answers: the server's own /health on its own port returns 200 (the test server: its port accepts).

Then per scenario: median and max of onset -> relaunch and onset -> ready, and whether all runs
agreed (the same cause, the same change, ready, answering). Times are wall clock on this machine
(2 shared cores: expect +-50 %). HANGWATCH_LAB_PYTHON picks the lab's python.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]
from lab import _procs  # noqa: E402
from lab._runner import COMMON_FLAGS  # noqa: E402

HANGWATCH = str(Path(sys.executable).parent / "hangwatch")
LAB_PYTHON = os.environ.get("HANGWATCH_LAB_PYTHON") or str(ROOT / ".lab-venv" / "bin" / "python")
SCENARIOS = {
    "nccl-port": lambda port: ["--nccl-port", str(port)],
    "dist-init-port": lambda port: ["--dist-init-addr", f"127.0.0.1:{port}"],
    "stale-lock": lambda port: [],  # the test server (tests/integration/programs) on torch's FileBaton
}
ONSET = {"stale-lock": re.compile(r"TP0\] Load weight end")}  # rank 0 then waits on the baton
PORT_ONSET = re.compile(r"EADDRINUSE|address already in use")
LAUNCHER = ROOT / "tests" / "integration" / "programs" / "sglang" / "launch_server.py"
RUN_TIMEOUT_S = 900


def _command(scenario: str, http: int, port: int, tmp: Path) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / "state"), "TMPDIR": str(tmp)}
    if scenario == "stale-lock":
        lock = tmp / "torch_extensions" / "hw_test_ext" / "lock"
        lock.parent.mkdir(parents=True)
        lock.write_text("")
        os.utime(lock, (time.time() - 3600, time.time() - 3600))  # a killed build's leftover
        env.update(HW_MODE="jit_lock", TORCH_EXTENSIONS_DIR=str(lock.parent.parent), HOME=str(tmp))
        return [LAB_PYTHON, str(LAUNCHER), "--model-path", "/models/tiny", "--tp-size", "2", "--port", str(http)], env
    argv = [LAB_PYTHON, "-m", "sglang.launch_server", "--model-path", str(_procs.tiny_model()), "--port", str(http),
            *COMMON_FLAGS, "--max-total-tokens", "4096", "--skip-server-warmup", *SCENARIOS[scenario](port)]
    return argv, env


def one_run(scenario: str, tmp: Path) -> dict[str, Any]:
    http = _procs.free_port(31000, 31999)
    holder = socket.socket()
    port = _procs.free_port(29600, 29699)
    holder.bind(("127.0.0.1", port))
    holder.listen(4)
    log = tmp / f"{scenario}-{http}.log"
    argv, env = _command(scenario, http, port, tmp)
    start = time.time()
    marks: dict[str, float] = {}
    stop = threading.Event()
    threading.Thread(target=_watch_log, args=(log, ONSET.get(scenario, PORT_ONSET), marks, stop), daemon=True).start()
    proc = subprocess.Popen([HANGWATCH, "run", "--json", "--remedy", "--exit-on", "ready", "--timeout", str(RUN_TIMEOUT_S),
                             "--log", str(log), "--", *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, start_new_session=True)
    result: dict[str, Any] = {"scenario": scenario}
    servers: set[int] = set()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            now, body = time.time(), json.loads(line)
            servers.update(int(p) for p in re.findall(r"pid (\d+)", str(body.get("server", ""))))
            if "relaunch" in body:
                marks.setdefault("relaunch", now)
                result.update(cause=body["relaunch"]["cause"], change=body["relaunch"]["id"])
            elif body.get("state") in ("crashed", "stalled"):
                marks.setdefault("detected", now)
                result.setdefault("detected_cause", body.get("cause"))
            elif body.get("state") == "ready":
                marks.setdefault("ready", now)
        proc.wait(timeout=60)
        result["answers"] = _health(http) if scenario != "stale-lock" else _listening(http)
        result["final"] = "ready" if "ready" in marks else "not ready"
    finally:
        stop.set()
        holder.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in servers:  # a ready server outlives --exit-on ready
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    onset = marks.get("onset")
    for name in ("detected", "relaunch", "ready"):
        if onset and name in marks:
            result[f"onset_to_{name}_s"] = round(marks[name] - onset, 1)
    result["total_s"] = round(time.time() - start, 1)
    return result


def _watch_log(log: Path, onset: re.Pattern[str], marks: dict[str, float], stop: threading.Event) -> None:
    offset = 0
    while not stop.is_set() and "onset" not in marks:
        try:
            with open(log, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            data = b""
        if onset.search(data.decode("utf-8", "replace")):
            marks["onset"] = time.time()
        offset += max(0, len(data) - 200)  # a line cut by the read is seen whole next time
        time.sleep(0.1)


def _listening(port: int) -> bool:
    """The test server's own port accepts (it speaks no HTTP)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return True
    except OSError:
        return False


def _health(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
            return resp.status == 200
    except OSError:
        return False


def summarise(scenario: str, runs: list[dict[str, Any]]) -> None:
    print(f"\n{scenario}: {len(runs)} runs")
    for run in runs:
        print("  " + json.dumps(run))
    for name in ("detected", "relaunch", "ready"):
        values = [r[f"onset_to_{name}_s"] for r in runs if f"onset_to_{name}_s" in r]
        if values:
            print(f"  onset -> {name:<9} median {statistics.median(values):6.1f} s   max {max(values):6.1f} s   (n={len(values)})")
    keys = {(r.get("cause"), r.get("change"), r.get("final"), r.get("answers")) for r in runs}
    agreed = len(keys) == 1 and next(iter(keys))[2:] == ("ready", True)
    print(f"  agreement: {'all ' + str(len(runs)) + ' runs' if agreed else 'NO'}: {sorted(map(str, keys))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenario", default=",".join(SCENARIOS))
    args = parser.parse_args()
    # a `timeout` or Ctrl-C still runs each run's cleanup (hangwatch and the servers it started)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    if not Path(LAB_PYTHON).exists():
        sys.exit(f"no lab python at {LAB_PYTHON} (lab/install.sh, or set HANGWATCH_LAB_PYTHON)")
    for scenario in args.scenario.split(","):
        runs = []
        for n in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="hw-remedy-") as tmp:
                runs.append(one_run(scenario, Path(tmp)))
            print(f"  {scenario} run {n + 1}/{args.runs}: {runs[-1]}", file=sys.stderr, flush=True)
        summarise(scenario, runs)


if __name__ == "__main__":
    main()
