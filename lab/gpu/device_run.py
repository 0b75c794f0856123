"""Run every GPU lab scenario under hangwatch and keep the evidence (the device-machine driver).

    python3 lab/gpu/device_run.py --out DIR [--scenarios a,b] [--deadline S] [--history DB] [--history-pass]

Per scenario: start lab/gpu/run.py in its own session, wait (bounded) for its onset file, run
`hangwatch attach PID --json --exit-on stalled,crashed,ready --timeout 90 --log LOG` and keep its
verdict stream with arrival times (and hangwatch's own CPU and RSS), `hangwatch collect PID` into
a bundle directory (3 samples), time py-spy (Python-only, --nonblocking, --native) per rank, kill
the process group and wait until the GPUs hold no process. Also: NVML timings, the `gpu` pytest
marks, versions. Writes DIR/summary.json after every scenario and DIR/gpu_fixtures.tar.gz (one
folder per scenario: bundle/, verdicts.jsonl, expected.json, native/, server.log).

--history DB passes `--history DB` to every attach (`--no-learn` without it: the fixed holds).
--history-pass first runs `healthy` twice with a fresh history file, then graph-capture and
spin-kernel with it, and keeps onset -> stalled and the learned budget (the verdict's `eta`) in
summary.json under "history_pass". Every launch has the same --model-path and --tp-size (1 for
kv-slow), so that the history's setup key matches. --one-gpu: the history pass with one rank
(--tp-size 1): healthy twice, then spin-kernel (graph-capture needs two ranks); the scenarios that
hang between two ranks run both on the one GPU (NCCL between them over loopback sockets).

--remedy N: N times, `hangwatch run --remedy --json --exit-on ready -- <graph-capture launch>`, the
launch spelled as SGLang's (lab/gpu/engine/sglang/launch_server.py: --port the serving port,
--nccl-port the TCPStore's), each with a fresh history: onset (rank 0 in the pre-capture barrier)
-> `stalled cuda_graph_capture` -> the `relaunch` line (the server stopped, `--disable-cuda-graph`
appended) -> `ready` -> /health 200 on the serving port, each with its time; then
`hangwatch preflight` of the same launch must propose the change. Kept in summary.json under
"remedy" and in the tarball (remedy/run<i>/: verdicts.jsonl, run.log, stderr.txt, result.json).

LAB_GPU_CPU=1 runs the two-rank scenarios on CPU with gloo (no NVML, no GPU) to check the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CPU = os.environ.get("LAB_GPU_CPU") == "1"
PYSPY_TIMINGS = os.environ.get("LAB_PYSPY_TIMINGS", "1") == "1"
ORDER = ("collective", "dead-rank", "nccl-init", "rendezvous-mismatch", "graph-capture", "spin-kernel", "kv-slow")
# What each scenario really is (the lab's ground truth, written before anything runs).
EXPECTED = {
    "healthy": {"state": "ready"},
    "collective": {"cause": "patch_or_user_code", "state": "stalled", "culprits": ["TP1"]},
    "nccl-init": {"cause": "nccl_init", "state": "stalled"},
    "dead-rank": {"cause": "dead_rank", "state": "stalled"},  # culprit: the killed pid, added at run time
    # the user's code called the rendezvous, but the ranks wait on each other in torch's TCPStore
    # (one host, so not multinode_rendezvous): never patch_or_user_code (issue 26)
    "rendezvous-mismatch": {"cause": "nccl_init", "state": "stalled"},
    "kv-slow": {"cause": "kv_cache_alloc", "state": "progressing"},
    "spin-kernel": {"cause": "arch_kernel_hang", "state": "stalled"},
    "graph-capture": {"cause": "cuda_graph_capture", "state": "stalled"},
}
# Scenarios that hang between two ranks: on one GPU both ranks share it (lab_scheduler.share_gpus).
PEER_SCENARIOS = ("collective", "nccl-init", "dead-rank", "rendezvous-mismatch", "graph-capture")
# `collect` records its own observation window as the quiet time (since_last_progress_s), so a
# bundle must span more than the hold (`for:`) of the rule that explains it, or `diagnose` reads
# "starting": samples x interval per scenario, with margin over today's holds (15 s, 30 s, 60 s).
COLLECT_PLAN: dict[str, tuple[int, float]] = {}  # a long collect beside attach; the default 3 samples after it suffice
T0 = time.monotonic()
MODEL = "lab/gpu-tiny"  # the same model path on every launch: the history's setup key must match
HISTORY: Path | None = None  # --history DB: passed to every attach (collect keeps no history)
WATCH_S: float | None = None  # --history-watch S: history-pass hangs watched S s past stalled (the cause refined)
ONE_GPU = False  # --one-gpu: the history pass with one rank (--tp-size 1): healthy, spin-kernel


def say(*parts: object) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s]", *parts, file=sys.stderr, flush=True)


def hangwatch(*args: str) -> list[str]:
    return [sys.executable, "-m", "hangwatch", *args]


def run(cmd: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(cmd, 124, exc.stdout or "", (exc.stderr or "") + "\n(timeout)")


# ---------------------------------------------------------------- measurements


class Usage(threading.Thread):
    """hangwatch's own CPU (percent of one core) and RSS while it runs."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.rss: list[float] = []
        self.cpu0 = self.proc.cpu_times()
        self.t0 = time.monotonic()
        self.cpu_s = 0.0
        self.wall_s = 0.0

    def run(self) -> None:
        while True:
            try:
                with self.proc.oneshot():
                    self.rss.append(self.proc.memory_info().rss / 2**20)
                    times = self.proc.cpu_times()
                    children = sum(c.cpu_times().user + c.cpu_times().system for c in self.proc.children(recursive=True))
            except psutil.Error:
                return
            self.cpu_s = times.user + times.system - self.cpu0.user - self.cpu0.system
            self.children_cpu_s = children
            self.wall_s = time.monotonic() - self.t0
            time.sleep(0.25)

    def report(self) -> dict:
        return {
            "wall_s": round(self.wall_s, 2),
            "cpu_s": round(self.cpu_s, 3),
            "cpu_pct": round(100 * self.cpu_s / self.wall_s, 1) if self.wall_s else None,
            "rss_mib_max": round(max(self.rss), 1) if self.rss else None,
            "rss_mib_last": round(self.rss[-1], 1) if self.rss else None,
        }


def attach(pid: int, log: Path, onset: float, expected: dict, exit_on: str = "stalled,crashed,ready",
           timeout: float = 90.0, during=None) -> dict:
    """Run attach; return its verdict lines (with arrival wall time) and measurements."""
    args = ["attach", str(pid), "--json", "--timeout", str(timeout), "--log", str(log)]
    if exit_on:
        args += ["--exit-on", exit_on]
    args += ["--history", str(HISTORY)] if HISTORY else ["--no-learn"]
    started = time.time()
    proc = subprocess.Popen(hangwatch(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    usage = Usage(proc.pid)
    usage.start()
    lines: list[dict] = []

    def read() -> None:
        for raw in proc.stdout:  # type: ignore[union-attr]
            try:
                verdict = json.loads(raw)
            except ValueError:
                continue
            lines.append({"arrived": time.time(), "verdict": verdict})

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if during is not None:
        during(lines)
    try:
        code = proc.wait(timeout=timeout + 20)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    reader.join(5)
    stderr = proc.stderr.read() if proc.stderr else ""  # type: ignore[union-attr]
    first_right = next((x for x in lines if matches(x["verdict"], expected)), None)
    return {
        "exit_code": code,
        "started_after_onset_s": round(started - onset, 2),
        "lines": lines,
        "stderr_tail": stderr[-2000:],
        "first_correct_after_onset_s": round(first_right["arrived"] - onset, 2) if first_right else None,
        "first_correct_after_attach_s": round(first_right["arrived"] - started, 2) if first_right else None,
        "final": {k: lines[-1]["verdict"].get(k) for k in ("state", "cause", "rule", "ranks", "confidence", "eta")} if lines else None,
        "usage": usage.report(),
    }


def matches(verdict: dict, expected: dict) -> bool:
    return verdict.get("state") == expected.get("state") and (
        "cause" not in expected or verdict.get("cause") == expected["cause"]
    )


def pyspy_timings(pids: dict[str, int], dest: Path, reps: int = 3) -> dict:
    """py-spy dump per rank: Python-only (pausing), --nonblocking (what hangwatch uses), --native."""
    out: dict = {}
    dest.mkdir(parents=True, exist_ok=True)
    pyspy = shutil.which("py-spy") or "py-spy"
    for label, pid in pids.items():
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            continue
        row: dict = {}
        for mode, extra in (("python", []), ("nonblocking", ["--nonblocking"]), ("native", ["--native"])):
            times, ok = [], 0
            for rep in range(reps):
                t = time.perf_counter()
                res = run([pyspy, "dump", "--pid", str(pid), *extra], timeout=30)
                times.append(round(time.perf_counter() - t, 3))
                ok += res.returncode == 0
                if rep == 0 and mode != "nonblocking":  # long C++ template names cut: a few KB per dump
                    text = res.stdout + (res.stderr if res.returncode else "")
                    (dest / f"{label}.{mode}.txt").write_text("\n".join(x[:240] for x in text.splitlines()) + "\n")
            row[mode] = {"s": times, "ok": ok}
        out[label] = row
    return out


def gpu_processes() -> list[str]:
    if CPU:
        return []
    res = run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"], timeout=20)
    return [line for line in res.stdout.splitlines() if line.strip()]


def nvml_timings() -> dict:
    if CPU:
        return {}
    from hangwatch.sources.gpus import Nvml

    t = time.perf_counter()
    nvml = Nvml()
    first = nvml.read()
    init_s = time.perf_counter() - t
    samples = []
    for _ in range(20):
        t = time.perf_counter()
        nvml.read()
        samples.append(time.perf_counter() - t)
    samples.sort()
    return {
        "init_and_first_read_ms": round(init_s * 1000, 2),
        "read_ms_median": round(samples[len(samples) // 2] * 1000, 3),
        "read_ms_max": round(samples[-1] * 1000, 3),
        "read_ms_all": [round(s * 1000, 3) for s in samples],
        "gpus": [{"index": g.index, "name": g.name, "cc": g.compute_capability, "total_mib": g.memory_total_mib,
                  "used_mib": g.memory_used_mib, "util": g.utilization_pct} for g in first],
    }


# ---------------------------------------------------------------- one scenario


def wait_onset(path: Path, launcher: subprocess.Popen, timeout: float) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            try:
                return json.loads(path.read_text())
            except ValueError:
                pass
        if launcher.poll() is not None:
            return None
        time.sleep(0.1)
    return None


def kill_group(launcher: subprocess.Popen, pids: list[int]) -> None:
    try:
        os.killpg(launcher.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        launcher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def launch_args(name: str) -> list[str]:
    # --one-gpu: one rank where a scenario hangs alone; two ranks sharing the GPU where it needs a peer
    one = name == "kv-slow" or (ONE_GPU and name not in PEER_SCENARIOS)
    return ["--model-path", MODEL, "--tp-size", "1" if one else "2"]


def scenario(name: str, index: int, work: Path) -> dict:
    sdir = work / name
    shutil.rmtree(sdir, ignore_errors=True)
    sdir.mkdir(parents=True)
    log = Path(f"/tmp/lab-{name}.log")
    onset_file = Path(f"/tmp/lab-{name}.onset")
    for p in (log, onset_file):
        p.unlink(missing_ok=True)
    result: dict = {"scenario": name, "expected": dict(EXPECTED[name])}
    t_start = time.time()
    go = Path(f"/tmp/lab-{name}.go")
    go.unlink(missing_ok=True)
    wait = ["--wait-file", str(go)] if name == "healthy" else []
    launcher = subprocess.Popen(
        [sys.executable, str(HERE / "run.py"), name, *wait, "--log", str(log), "--onset-file", str(onset_file),
         "--port", str(29650 + index), "--hold", "400", *launch_args(name)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, cwd=ROOT,
    )
    first = launcher.stdout.readline()  # type: ignore[union-attr]
    info = json.loads(first)
    pids = info["ranks"]
    labels = {f"TP{r}" if len(pids) > 1 else "scheduler": pid for r, pid in enumerate(pids)}
    result["launcher_pid"], result["rank_pids"] = info["pid"], pids
    if name == "dead-rank":
        result["expected"]["culprits"] = [f"pid {pids[1]}"]
    if name == "healthy":  # attached from the launch, so that every phase is timed and learned
        try:
            def release(lines: list) -> None:  # the ranks start once attach has printed its first verdict
                deadline = time.monotonic() + 60
                while not lines and time.monotonic() < deadline:
                    time.sleep(0.05)
                go.touch()

            result["attach"] = attach(info["pid"], log, t_start, result["expected"], timeout=120, during=release)
            result["ready_after_launch_s"] = result["attach"]["first_correct_after_onset_s"]
            say(name, "attach", result["attach"]["final"], "ready after launch", result["ready_after_launch_s"])
        finally:
            kill_group(launcher, pids)
            if log.exists():
                shutil.copy(log, sdir / "server.full.log")
            result["gpus_free_after_kill"] = wait_gpus_free()
        return result
    onset = wait_onset(onset_file, launcher, 120)
    result["start_to_onset_s"] = round(onset["onset"] - t_start, 2) if onset else None
    say(name, "onset", onset)
    try:
        if onset is None:
            result["error"] = "no onset within 120 s"
            return result
        t_onset = onset["onset"]
        result["t_onset"] = t_onset
        if name == "kv-slow":
            time.sleep(1.0)
            bundle = {}

            def collect_mid(_lines: list) -> None:  # while the pool grows: the fixture must show it moving
                time.sleep(12)
                bundle["res"] = collect(info["pid"], log, sdir)

            result["attach"] = attach(info["pid"], log, t_onset, result["expected"], timeout=90, during=collect_mid)
            result["collect"] = bundle.get("res")
        elif name in COLLECT_PLAN:  # attach and a long collect side by side, both from the onset
            bundle = {}

            def collect_long() -> None:
                bundle["res"] = collect(info["pid"], log, sdir, *COLLECT_PLAN[name])

            side = threading.Thread(target=collect_long)
            side.start()
            result["attach"] = attach(info["pid"], log, t_onset, result["expected"], timeout=90)
            side.join(120)
            result["collect"] = bundle.get("res")
        else:
            if HISTORY is not None and WATCH_S:
                result["attach"] = attach(info["pid"], log, t_onset, result["expected"], exit_on="crashed,ready",
                                          timeout=WATCH_S)
            else:
                result["attach"] = attach(info["pid"], log, t_onset, result["expected"], timeout=90)
            result["collect"] = collect(info["pid"], log, sdir)
        say(name, "attach", result["attach"]["final"], "first correct after onset",
            result["attach"]["first_correct_after_onset_s"])
        if name == "collective":  # steady state: hangwatch watching a stalled server (native dumps too)
            steady = attach(info["pid"], log, t_onset, result["expected"], exit_on="", timeout=40)
            result["steady_attach"] = {k: steady[k] for k in ("usage", "final", "exit_code")}
            result["steady_attach"]["states"] = [x["verdict"]["state"] for x in steady["lines"]]
        if name != "kv-slow" and PYSPY_TIMINGS and HISTORY is None:
            result["pyspy"] = pyspy_timings(labels, sdir / "native")
        with open(sdir / "verdicts.jsonl", "w") as fh:
            for line in result["attach"]["lines"]:
                fh.write(json.dumps({"t_after_onset_s": round(line["arrived"] - t_onset, 2), **line["verdict"]}) + "\n")
        (sdir / "expected.json").write_text(json.dumps(result["expected"], indent=2) + "\n")
        (sdir / "onset.json").write_text(json.dumps({**onset, "launcher": info}, indent=2) + "\n")
    finally:
        kill_group(launcher, pids)
        if log.exists():
            shutil.copy(log, sdir / "server.full.log")
        result["gpus_free_after_kill"] = wait_gpus_free()
    return result


def wait_gpus_free() -> bool | list[str]:
    for _ in range(60):
        if not gpu_processes():
            return True
        time.sleep(0.5)
    return gpu_processes()


def learned_starts(db: Path) -> list[dict]:
    import sqlite3

    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        return [dict(row) for row in con.execute("SELECT * FROM starts ORDER BY id")]


def history_pass(work: Path) -> dict:
    """healthy twice with --history (the learned phase budgets), then graph-capture and
    spin-kernel with that history: onset -> stalled, and the budget the verdict used (eta)."""
    global HISTORY
    db = work.parent / "history.sqlite"
    db.unlink(missing_ok=True)
    HISTORY = db
    out: dict = {"db": str(db), "runs": {}}
    try:
        # graph-capture hangs between two ranks; CuPy (spin-kernel) needs a GPU
        names = ("healthy", "healthy") + (() if ONE_GPU else ("graph-capture",)) + (() if CPU else ("spin-kernel",))
        for index, name in enumerate(names):
            label = f"{name}-{index}" if name == "healthy" else name
            res = scenario(name, 50 + index, work / "history")
            res["verdicts"] = [{"t_after_onset_s": round(x["arrived"] - (res.get("t_onset") or 0), 2), **x["verdict"]}
                               for x in res.get("attach", {}).get("lines", [])] if res.get("t_onset") else None
            out["runs"][label] = res
            out["starts"] = learned_starts(db) if db.exists() else []
            say("history", label, (res.get("attach") or {}).get("final"),
                "onset->verdict", (res.get("attach") or {}).get("first_correct_after_onset_s"))
    finally:
        HISTORY = None
    return out


# ---------------------------------------------------------------- run --remedy (issue 20)

REMEDY_CHANGE = "--disable-cuda-graph"  # remedies.yaml sglang-disable-cuda-graph: what the relaunch must add


def remedy_launch(http_port: int, nccl_port: int, onset: Path) -> list[str]:
    """graph-capture, spelled as an SGLang launch (the path ends in sglang/launch_server)."""
    return [sys.executable, str(HERE / "engine" / "sglang" / "launch_server.py"), "--lab-scenario", "graph-capture",
            "--model-path", MODEL, "--tp-size", "2", "--host", "127.0.0.1", "--port", str(http_port),
            "--nccl-port", str(nccl_port), "--onset-file", str(onset), "--hold", "400"]


def free_port(lo: int, hi: int) -> int:
    import socket

    for port in range(lo, hi):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in [{lo}, {hi})")


def health_200(port: int, timeout: float) -> float | None:
    """Poll GET /health on the serving port; wall time of the first 200, None if none came."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    return time.time()
        except OSError:
            pass
        time.sleep(0.1)
    return None


def server_pids(lines: list[dict]) -> set[int]:
    import re

    return {int(m) for x in lines for m in re.findall(r"pid (\d+)", str(x["line"].get("server", "")))}


def remedy_once(index: int, work: Path, timeout: float) -> dict:
    """One `run --remedy` of graph-capture: the times of onset, stalled, relaunch, ready, /health."""
    rdir = work / "remedy" / f"run{index}"
    shutil.rmtree(rdir, ignore_errors=True)
    rdir.mkdir(parents=True)
    onset_file = Path(f"/tmp/lab-remedy-{index}.onset")
    onset_file.unlink(missing_ok=True)
    http, nccl = free_port(30100 + 10 * index, 30200), free_port(29700 + 10 * index, 29800)
    argv = remedy_launch(http, nccl, onset_file)
    env = {**os.environ, "XDG_STATE_HOME": str(rdir / "state"), "PYTHONUNBUFFERED": "1"}
    cmd = hangwatch("run", "--remedy", "--json", "--exit-on", "ready", "--timeout", str(timeout),
                    "--log", str(rdir / "run.log"), "--", *argv)
    result: dict = {"argv": argv, "cmd": cmd[2:], "http_port": http, "nccl_port": nccl}
    t_start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    lines: list[dict] = []
    err: list[str] = []

    def read_out() -> None:
        for raw in proc.stdout:  # type: ignore[union-attr]
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict) and ("state" in line or "relaunch" in line):
                lines.append({"arrived": time.time(), "line": line})

    onsets: list[dict] = []  # each launch that hangs writes the file anew: the first is this run's onset

    def watch_onset() -> None:
        while proc.poll() is None:
            try:
                seen = json.loads(onset_file.read_text())
            except (OSError, ValueError):
                seen = None
            if seen and seen not in onsets:
                onsets.append(seen)
            time.sleep(0.1)

    readers = [threading.Thread(target=read_out, daemon=True), threading.Thread(target=watch_onset, daemon=True),
               threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)]  # type: ignore[arg-type]
    for reader in readers:
        reader.start()
    try:
        result["exit_code"] = proc.wait(timeout=2 * timeout + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        result["exit_code"] = proc.wait()
    for reader in readers:
        reader.join(5)
    t_health = health_200(http, 30) if result["exit_code"] == 0 else None
    pids = server_pids(lines)
    try:
        onset = onsets[0] if onsets else None
        result["onsets"] = onsets
        t0 = onset["onset"] if onset else t_start
        stalled = next((x for x in lines if x["line"].get("state") == "stalled"), None)
        relaunch = next((x for x in lines if "relaunch" in x["line"]), None)
        ready = next((x for x in lines if x["line"].get("state") == "ready"), None)

        def after(x: dict | None, base: float | None) -> float | None:
            return round(x["arrived"] - base, 2) if x and base is not None else None

        info = relaunch["line"]["relaunch"] if relaunch else {}
        result.update({
            "start_to_onset_s": round(onset["onset"] - t_start, 2) if onset else None,
            "onset": onset,
            "stalled": {k: stalled["line"].get(k) for k in ("state", "cause", "rule", "confidence")} if stalled else None,
            "onset_to_stalled_s": after(stalled, t0),
            "onset_to_relaunch_s": after(relaunch, t0),
            "stalled_to_relaunch_s": after(relaunch, stalled["arrived"]) if stalled else None,
            "relaunch_to_ready_s": after(ready, relaunch["arrived"]) if relaunch else None,
            "onset_to_ready_s": after(ready, t0),
            "relaunch_to_health_s": round(t_health - relaunch["arrived"], 2) if t_health and relaunch else None,
            "relaunch": info,
            "relaunches": sum(1 for x in lines if "relaunch" in x["line"]),
            "changes": [x["line"]["relaunch"].get("id") for x in lines if "relaunch" in x["line"]],
            "ready_remedy": ready["line"].get("remedy") if ready else None,
            "health_200": t_health is not None,
            "gpu_processes_ready": gpu_processes(),
        })
        result["exact_change"] = info.get("argv") == [*argv, REMEDY_CHANGE] and not info.get("env")
        proposal = run(hangwatch("preflight", "--", *argv), timeout=120, cwd=ROOT, env=env)
        result["preflight_proposes"] = f"past starts of this setup needed {REMEDY_CHANGE}" in proposal.stdout
        result["agree"] = bool(
            result["stalled"] and result["stalled"]["cause"] == "cuda_graph_capture"
            and info.get("id") == "sglang-disable-cuda-graph" and result["relaunches"] == 1 and result["exact_change"]
            and ready and REMEDY_CHANGE in (result["ready_remedy"] or "") and result["health_200"]
            and result["preflight_proposes"])
        with open(rdir / "verdicts.jsonl", "w") as fh:
            for x in lines:
                fh.write(json.dumps({"t_after_onset_s": round(x["arrived"] - t0, 2), **x["line"]}) + "\n")
        (rdir / "stderr.txt").write_text("".join(err)[-20000:])
        (rdir / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    finally:
        for pid in pids:  # the ready server outlives `--exit-on ready`; the stalled one was stopped by hangwatch
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        result["gpus_free_after_kill"] = wait_gpus_free()
    say("remedy", index, {k: result.get(k) for k in ("onset_to_stalled_s", "onset_to_relaunch_s", "relaunch_to_ready_s",
                                                     "relaunch_to_health_s", "agree")})
    return result


def remedy_pass(work: Path, runs: int, timeout: float = 150.0, deadline: float = 520.0) -> dict:
    out: dict = {"runs": []}
    for index in range(runs):
        if index and time.monotonic() - T0 > deadline - 90:  # a run takes about a minute on the H200
            out["skipped"] = f"{runs - index} run(s): past the deadline"
            break
        try:
            out["runs"].append(remedy_once(index, work, timeout))
        except Exception as exc:  # the other runs still count
            out["runs"].append({"error": repr(exc)})
            say("remedy", index, "error", repr(exc))
    agree = [r.get("agree") is True for r in out["runs"]]
    out["agreement"] = f"{sum(agree)}/{len(agree)}"

    def spread(key: str) -> dict | None:
        values = sorted(r[key] for r in out["runs"] if isinstance(r.get(key), (int, float)))
        return {"median": values[len(values) // 2], "min": values[0], "max": values[-1]} if values else None

    out["figures"] = {k: spread(k) for k in ("start_to_onset_s", "onset_to_stalled_s", "onset_to_relaunch_s",
                                             "stalled_to_relaunch_s", "relaunch_to_ready_s", "relaunch_to_health_s",
                                             "onset_to_ready_s")}
    return out


def collect(pid: int, log: Path, sdir: Path, samples: int = 3, interval: float = 1.0) -> dict:
    t = time.perf_counter()
    res = run(hangwatch("collect", str(pid), "-o", str(sdir / "bundle"), "--samples", str(samples),
                        "--interval", str(interval), "--log", str(log)), timeout=samples * interval + 60, cwd=ROOT)
    return {"exit_code": res.returncode, "s": round(time.perf_counter() - t, 2), "stdout": res.stdout.strip(),
            "stderr": res.stderr[-1500:]}


# ---------------------------------------------------------------- main


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    code = ("import torch, json; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
            "'nccl': '.'.join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None, "
            "'gpus': torch.cuda.device_count()}))")
    res = run([sys.executable, "-c", code], timeout=60)
    try:
        out.update(json.loads(res.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        out["torch_error"] = res.stderr[-500:]
    out["py-spy"] = run(["py-spy", "--version"], timeout=10).stdout.strip()
    if not CPU:
        out["nvidia-smi"] = run(["nvidia-smi", "--query-gpu=index,name,compute_cap,memory.total,driver_version",
                                 "--format=csv,noheader"], timeout=20).stdout.strip()
    return out


def pack(out: Path, work: Path) -> None:
    with tarfile.open(out / "gpu_fixtures.tar.gz", "w:gz") as tar:
        tar.add(work, arcname="gpu")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenarios", default=",".join(ORDER))
    parser.add_argument("--deadline", type=float, default=520.0, help="start no scenario after this many seconds")
    parser.add_argument("--pytest", action="store_true", help="also run the NVML tests marked gpu")
    parser.add_argument("--history-pass", action="store_true",
                        help="first: healthy twice with --history, then graph-capture and spin-kernel with it")
    parser.add_argument("--history-watch", type=float,
                        help="in the history pass, watch each hang this many seconds instead of exiting at stalled")
    parser.add_argument("--history", type=Path, help="pass --history DB to every attach of the scenarios")
    parser.add_argument("--one-gpu", action="store_true", help="the history pass on one GPU: one rank, no graph-capture")
    parser.add_argument("--remedy", type=int, default=0, metavar="N",
                        help="first: N runs of `hangwatch run --remedy` on graph-capture (onset -> relaunch -> ready)")
    parser.add_argument("--remedy-timeout", type=float, default=150.0, help="--timeout of each run --remedy launch")
    args = parser.parse_args()
    global HISTORY, WATCH_S, ONE_GPU
    ONE_GPU = args.one_gpu
    out = args.out
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    summary: dict = {"versions": versions(), "nvml": nvml_timings(), "scenarios": {}}
    say("versions", summary["versions"])
    if args.pytest and not CPU:
        res = run([sys.executable, "-m", "pytest", "-q", "-rs", "-m", "gpu", "tests/unit/sources/test_gpus_real.py",
                   "-p", "no:cacheprovider"], timeout=120, cwd=ROOT)
        summary["pytest_gpu"] = {"exit_code": res.returncode, "tail": (res.stdout + res.stderr)[-3000:]}
        say("pytest", res.returncode, res.stdout[-300:])
    WATCH_S = args.history_watch
    if args.remedy:
        summary["remedy"] = remedy_pass(work, args.remedy, args.remedy_timeout, args.deadline)
        say("remedy", summary["remedy"]["agreement"], summary["remedy"]["figures"])
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        pack(out, work)
    if args.history_pass:
        try:
            summary["history_pass"] = history_pass(work)
        except Exception as exc:
            summary["history_pass"] = {"error": repr(exc)}
            say("history pass error", repr(exc))
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    HISTORY = args.history
    budget = {"healthy": 60, "kv-slow": 80, "collective": 110, "graph-capture": 110, "spin-kernel": 70}
    for index, name in enumerate(n for n in args.scenarios.split(",") if n):
        left = args.deadline - (time.monotonic() - T0)
        if left < budget.get(name, 55):
            summary["scenarios"][name] = {"skipped": f"only {left:.0f} s left"}
            continue
        try:
            summary["scenarios"][name] = scenario(name, index, work)
        except Exception as exc:  # keep going: the other scenarios still count
            summary["scenarios"][name] = {"error": repr(exc)}
            say(name, "error", repr(exc))
        (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        pack(out, work)
    summary["total_s"] = round(time.monotonic() - T0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    pack(out, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
