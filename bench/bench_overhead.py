"""What watching costs the watched server (issue 25; printed, never asserted).

    python bench/bench_overhead.py [--pairs 20] [--window 3] [--workloads cpu,alloc] [--attribution 30]

The workload is the test server (tests/integration/programs: a launcher and two ranks titled
`sglang::scheduler_TP0/1`, as SGLang titles them) once ready, its rank 0 busy for good and appending
its work units per second to a file: `cpu` computes in Python, `alloc` maps, fills and frees 8 MiB
per unit (page faults and munmap: what /proc reads and py-spy's memory reads contend with).

One `hangwatch attach PID --json` runs per configuration; it is paused (SIGSTOP) for the `alone`
windows and resumed (SIGCONT) for the `watched` ones, so no window holds its start-up. Each pair is
one alone and one watched window of WINDOW s, in ABBA order (A W, W A, A W, ...: a drift in the
host's load falls on both sides). The ratio per pair is the time per work unit watched over alone
(1.01: the rank took 1 % longer watched), and the same of the rank's own CPU time per unit (on a
loaded host the steadier one); printed as median, min and max over the pairs, with a bootstrap
90 % interval of the median. Where two ABBA blocks meet, two alone windows stand side by side:
their ratio (alone/alone) is the host's noise, printed beside, the floor any ratio is read against.
The load average is printed per configuration (lowest and highest seen).

Configurations: Python stacks on (py-spy, the default) and off (`HANGWATCH_PYSPY` naming no
program: the stacks rung is reported missing); the native rung is allowed in both (the default
`--native`: it runs only for a server that looks stalled, so not for this ready one).

--attribution S: a Watcher in this process watches the same server for S ticks of 1 s, and the CPU
of each source (this thread's CPU time plus the children it waited for: `ss`, py-spy) is printed
per tick, before the pairs; and what reading one process's /proc files costs with and without
its per-thread files (a real serving rank has a hundred threads or more; sources/procs.py reads them
every THREADS_EVERY_S on a ready server's steady ticks).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from helpers.livetools import Procs, wait_for_text  # noqa: E402

_ENTRY = Path(sys.executable).parent / "hangwatch"  # the installed entry point, else the module (a --target install)
HANGWATCH = [str(_ENTRY)] if _ENTRY.exists() else [sys.executable, "-m", "hangwatch"]


def _rate_line(rate_file: Path) -> tuple[float, int]:
    t, units = rate_file.read_text().strip().splitlines()[-1].split()
    return float(t), int(units)


def _window(rate_file: Path, rank: psutil.Process, seconds: float) -> tuple[float, float]:
    """(wall seconds, the rank's CPU seconds) per work unit over about `seconds`, between two of
    the rank's own reports. CPU time per unit is not moved by how often the host's scheduler runs
    the rank, only by what watching costs it (its caches, its memory map's lock): on a loaded
    host it is the steadier figure of the two."""
    time.sleep(1.05)  # a report written after this window began
    a, cpu_a = _rate_line(rate_file), sum(rank.cpu_times()[:2])
    time.sleep(seconds)
    b, cpu_b = _rate_line(rate_file), sum(rank.cpu_times()[:2])
    units = max(1, b[1] - a[1])
    return (b[0] - a[0]) / units, (cpu_b - cpu_a) / units


def pairs(server_pid: int, rank: psutil.Process, rate_file: Path, *, stacks: bool, n: int, window: float) -> dict[str, Any]:
    env = dict(os.environ)
    if not stacks:
        env["HANGWATCH_PYSPY"] = "/nonexistent/py-spy"
    watch = subprocess.Popen([*HANGWATCH, "attach", str(server_pid), "--json"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(watch.stdout.readline, b"")), daemon=True)  # type: ignore[union-attr, arg-type]
    reader.start()
    me = psutil.Process(watch.pid)
    try:
        deadline = time.monotonic() + 120
        while not lines and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3.0)  # past the first ticks: the steady state a sidecar lives in
        windows: list[tuple[str, float, float]] = []  # (side, wall s per unit, the rank's CPU s per unit), in order
        cpu_watched, wall_watched, loads = 0.0, 0.0, [os.getloadavg()[0]]
        for i in range(n):
            # A W | W A | A W | W A ...: ABBA blocks, so a drift of the host's load falls on both sides
            for side in (("alone", "watched") if i % 2 == 0 else ("watched", "alone")):
                if side == "alone":
                    os.kill(watch.pid, signal.SIGSTOP)
                    windows.append((side, *_window(rate_file, rank, window)))
                    os.kill(watch.pid, signal.SIGCONT)
                else:
                    cpu0, t0 = _cpu(me), time.monotonic()
                    windows.append((side, *_window(rate_file, rank, window)))
                    cpu_watched += _cpu(me) - cpu0
                    wall_watched += time.monotonic() - t0
            loads.append(os.getloadavg()[0])
        pairs_ = [(windows[2 * i], windows[2 * i + 1]) for i in range(n)]
        ratios, cpu_ratios = [], []
        for a, b in pairs_:
            alone, watched = (a, b) if a[0] == "alone" else (b, a)
            ratios.append(watched[1] / alone[1])
            cpu_ratios.append(watched[2] / alone[2])
        # the null: two alone windows side by side (where one ABBA block meets the next): what the
        # host's noise alone makes of a ratio, to read the watched/alone one against
        null = [windows[k + 1][1] / windows[k][1] for k in range(len(windows) - 1)
                if windows[k][0] == windows[k + 1][0] == "alone"]
        state = _verdict(lines[-1]) if lines else "none"
        return {"ratios": ratios, "cpu_ratios": cpu_ratios, "null": null, "cpu": cpu_watched / wall_watched,
                "state": state, "loads": loads}
    finally:
        try:
            os.kill(watch.pid, signal.SIGCONT)
            os.killpg(watch.pid, signal.SIGINT)
            watch.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(watch.pid, signal.SIGKILL)


def _is_rank0(proc: psutil.Process) -> bool:
    try:
        return "scheduler_TP0" in " ".join(proc.cmdline())
    except psutil.Error:  # a child that exited meanwhile (a zombie has no command line)
        return False


def _verdict(line: bytes) -> str:
    """`ready`, or the state with its cause and title (what the watched server was said to be)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return "unreadable"
    verdict = doc.get("verdict", doc) if isinstance(doc, dict) else {}
    state = str(verdict.get("state"))
    return state if state == "ready" else f"{state} ({verdict.get('cause')}: {verdict.get('title')})"


def _spread(values: list[float]) -> str:
    """median (min, max) and a bootstrap 90 % interval of the median: how far the median can be trusted."""
    if not values:
        return "none"
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(2000))
    return (f"median {statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f}; "
            f"median's 90 % interval {medians[100]:.3f}-{medians[1899]:.3f})")


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of hangwatch and its children (py-spy, ss), reaped ones included."""
    times = proc.cpu_times()
    return times.user + times.system + times.children_user + times.children_system + sum(
        sum(c.cpu_times()[:2]) for c in _children(proc))


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def attribution(server_pid: int, ticks: int) -> None:
    from hangwatch.classify import load_rules
    from hangwatch.sources.discover import discover
    from hangwatch.watch import WatchConfig, Watcher

    watcher = Watcher(discover(server_pid), load_rules(), WatchConfig())
    cost: dict[str, float] = {}

    def wrap(obj: Any, name: str, key: str) -> None:
        inner = getattr(obj, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0, c0 = time.thread_time(), _children_cpu()
            try:
                return inner(*args, **kwargs)
            finally:
                cost[key] = cost.get(key, 0.0) + time.thread_time() - t0 + _children_cpu() - c0

        setattr(obj, name, timed)

    for name, key in (("read_log", "log read"), ("read_procs", "/proc (process tree)"), ("read_ports", "ports (ss)"),
                      ("read_gpus", "NVML"), ("dump", "py-spy stacks"), ("read_health", "health endpoint")):
        wrap(watcher.sources, name, key)
    wrap(watcher, "_decide", "classify")
    wrap(watcher, "_observe", "observe")
    self0, kids0, began = _self_cpu(), _children_cpu(), time.monotonic()
    for _ in range(ticks):
        t0 = time.monotonic()
        _, verdict = watcher.tick()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    wall = time.monotonic() - began
    total = _self_cpu() - self0 + _children_cpu() - kids0
    watcher.close()
    print(f"where the cost comes from ({ticks} ticks in process, verdict {verdict.state.value}): "
          f"{total / wall * 100:.2f} % of one core in all")
    for key, value in sorted(cost.items(), key=lambda kv: -kv[1]):
        print(f"   {key:22s} {value / ticks * 1000:6.2f} ms per tick ({value / total * 100:4.1f} %)")
    thread_files(server_pid)


def thread_files(server_pid: int) -> None:
    """One process's /proc read with and without its threads' files, for a rank of 120 threads."""
    from hangwatch.sources.procs import read_process

    code = "import threading, time\n[threading.Thread(target=time.sleep, args=(600,), daemon=True).start() for _ in range(119)]\ntime.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(child.pid).num_threads() < 120 and time.monotonic() < deadline:
            time.sleep(0.1)
        cost = {}
        for threads in (True, False):
            times = []
            for _ in range(40):
                t0 = time.thread_time()
                read_process(psutil.Process(child.pid), threads=threads)
                times.append(time.thread_time() - t0)
            cost[threads] = statistics.median(times) * 1000
        print(f"   one process of {psutil.Process(child.pid).num_threads()} threads read from /proc: {cost[True]:.2f} ms of CPU "
              f"with its threads' wchan and io, {cost[False]:.2f} ms without (a ready server's steady ticks)")
    finally:
        child.kill()
        child.wait(10)


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--workloads", default="cpu,alloc")
    parser.add_argument("--attribution", type=int, default=30, help="ticks (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hw-bench-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        for kind in args.workloads.split(","):
            procs = Procs()
            try:
                rate_file = tmp / f"rate-{kind}.txt"
                log = tmp / f"spin-{kind}.log"
                server = procs.server("spin", log, HW_RATE_FILE=str(rate_file), HW_SPIN_KIND=kind)
                wait_for_text(log, "fired up")
                time.sleep(2.0)
                if args.attribution and kind == "cpu":
                    attribution(server.pid, args.attribution)
                rank = next(p for p in psutil.Process(server.pid).children(recursive=True) if _is_rank0(p))
                for stacks in (True, False):
                    found = pairs(server.pid, rank, rate_file, stacks=stacks, n=args.pairs, window=args.window)
                    r, c, null, loads = found["ratios"], found["cpu_ratios"], found["null"], found["loads"]
                    print(f"{kind} rank, Python stacks {'on ' if stacks else 'off'} (native rung allowed), {len(r)} pairs of "
                          f"{args.window:.0f} s in ABBA order: watched/alone time per unit {_spread(r)}; the rank's CPU "
                          f"per unit {_spread(c)}; alone/alone (the host's noise, {len(null)} adjacent alone windows) "
                          f"{_spread(null)}; hangwatch {found['cpu'] * 100:.2f} % of one core, py-spy and ss included; "
                          f"verdict {found['state']}; load average {min(loads):.1f}-{max(loads):.1f} on "
                          f"{os.cpu_count()} cores", flush=True)
            finally:
                procs.stop()


if __name__ == "__main__":
    main()
